import Foundation

/// A parsed JSON value, as the loader reads a dump's lines: numbers keep their text, so that an
/// `Int64` or a `Double` is read back exactly (no detour through `NSNumber`).
enum JSONValue {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([JSONMember])

    /// The value of the member `name` of an object, or `nil`.
    func member(_ name: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name == name }?.value
    }

    /// What kind of value this is, for error messages.
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A member of a JSON object: its name and value.
struct JSONMember {
    var name: String
    var value: JSONValue
}

/// Parses one JSON text (a dump's line) from UTF-8 bytes; a syntax error names the column.
struct JSONParser {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    /// Parses `bytes` as one JSON value with nothing after it but white space.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        if parser.index < bytes.count { throw parser.error("unexpected text after the value") }
        return value
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    private func error(_ message: String) -> JSONSyntaxError {
        JSONSyntaxError(column: index + 1, message: message)
    }

    private mutating func skipSpace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0D || bytes[index] == 0x0A { index += 1 }
    }

    private mutating func expect(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count, (0..<count).allSatisfy({ bytes[index + $0] == word.utf8Start[$0] }) else {
            throw error("expected \(word)")
        }
        index += count
    }

    private mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        if depth > 64 { throw error("values nested too deeply") }
        skipSpace()
        guard index < bytes.count else { throw error("unexpected end of line") }
        switch bytes[index] {
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "["):
            var elements: [JSONValue] = []
            try list(closing: UInt8(ascii: "]"), in: "an array") { parser throws(JSONSyntaxError) in
                elements.append(try parser.value(depth: depth + 1))
            }
            return .array(elements)
        case UInt8(ascii: "{"):
            var members: [JSONMember] = []
            try list(closing: UInt8(ascii: "}"), in: "an object") { parser throws(JSONSyntaxError) in
                parser.skipSpace()
                guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: "\"") else { throw parser.error("expected a member name in quotes") }
                let name = try parser.string()
                parser.skipSpace()
                guard parser.index < parser.bytes.count, parser.bytes[parser.index] == UInt8(ascii: ":") else { throw parser.error("expected : after a member name") }
                parser.index += 1
                members.append(JSONMember(name: name, value: try parser.value(depth: depth + 1)))
            }
            return .object(members)
        default:
            return .number(try number())
        }
    }

    /// Parses the comma-separated items of an array or object, from its opening bracket to
    /// `closing`, with `item`.
    private mutating func list(
        closing: UInt8, in what: String, _ item: (inout JSONParser) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        index += 1
        skipSpace()
        if index < bytes.count, bytes[index] == closing { index += 1; return }
        while true {
            try item(&self)
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of line in \(what)") }
            if bytes[index] == closing { index += 1; return }
            guard bytes[index] == UInt8(ascii: ",") else { throw error("expected , or \(Character(Unicode.Scalar(closing))) in \(what)") }
            index += 1
        }
    }

    private mutating func number() throws(JSONSyntaxError) -> String {
        let start = index
        func digits(_ parser: inout JSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count, parser.bytes[parser.index] >= 0x30, parser.bytes[parser.index] <= 0x39 { parser.index += 1 }
            return parser.index - from
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        if digits(&self) == 0 { index = start; throw error("expected a value") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            if digits(&self) == 0 { throw error("expected digits after the decimal point") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            if digits(&self) == 0 { throw error("expected digits in the exponent") }
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    private mutating func string() throws(JSONSyntaxError) -> String {
        index += 1   // the opening quote
        let start = index
        // The common case: no escapes, one copy of the bytes.
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 { index += 1 }
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            defer { index += 1 }
            return try validUTF8(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        }
        var scalars: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { index += 1; break }
            if byte < 0x20 { throw error("a control character in a string must be escaped") }
            if byte != UInt8(ascii: "\\") { scalars.append(byte); index += 1; continue }
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let escape = bytes[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
            case UInt8(ascii: "b"): scalars.append(0x08)
            case UInt8(ascii: "f"): scalars.append(0x0C)
            case UInt8(ascii: "n"): scalars.append(0x0A)
            case UInt8(ascii: "r"): scalars.append(0x0D)
            case UInt8(ascii: "t"): scalars.append(0x09)
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800..<0xDC00).contains(code) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw error("a high surrogate escape must be followed by a low one")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw error("a high surrogate escape must be followed by a low one") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(code) {
                    throw error("a lone low surrogate escape")
                }
                guard let scalar = Unicode.Scalar(code) else { throw error("an escape that is not a Unicode scalar") }
                scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
            default:
                throw error("unknown escape \\\(Character(Unicode.Scalar(escape)))")
            }
        }
        return try scalars.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in try validUTF8(buffer) }
    }

    private func validUTF8(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) -> String {
        guard let text = String(validating: buffer, as: UTF8.self) else { throw error("a string that is not valid UTF-8") }
        return text
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("expected four hex digits after \\u") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case 0x30...0x39: digit = byte - 0x30
            case 0x41...0x46: digit = byte - 0x41 + 10
            case 0x61...0x66: digit = byte - 0x61 + 10
            default: throw error("expected four hex digits after \\u")
            }
            code = code << 4 | UInt32(digit)
            index += 1
        }
        return code
    }
}

/// A JSON syntax error at a 1-based byte column of the line.
struct JSONSyntaxError: Error {
    var column: Int
    var message: String
}
