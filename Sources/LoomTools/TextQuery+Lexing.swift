/// One token of a text query, with the 1-based column of its first character.
struct TextQueryToken: Equatable {
    enum Kind: Equatable {
        /// A name or keyword; `quoted` when written in backquotes (never a keyword).
        case identifier(String, quoted: Bool)
        case string(String)
        /// A number, with its text as written (a decimal attribute keeps every digit).
        case integer(Int64, text: String)
        case real(Double, text: String)
        /// Punctuation and operators: `== = != < <= > >= && || ! ( ) [ ] , . -`.
        case symbol(String)
        case end
    }

    let kind: Kind
    let column: Int

    /// The identifier's name when the token is an unquoted identifier equal to `keyword`,
    /// ignoring case.
    func isKeyword(_ keyword: String) -> Bool {
        if case .identifier(let name, quoted: false) = kind { return name.lowercased() == keyword }
        return false
    }

    func isSymbol(_ symbol: String) -> Bool { kind == .symbol(symbol) }

    /// How the token reads in an error message.
    var quoted: String {
        switch kind {
        case .identifier(let name, _): "'\(name)'"
        case .string: "a string"
        case .integer(_, let text), .real(_, let text): "'\(text)'"
        case .symbol(let s): "'\(s)'"
        case .end: "the end of the query"
        }
    }
}

/// Splits a text query into tokens.
struct TextQueryLexer {
    let characters: [Character]
    let query: String
    var index = 0

    init(_ query: String) {
        self.query = query
        self.characters = Array(query)
    }

    func error(_ message: String, at index: Int) -> TextQueryError {
        TextQueryError(.syntax, message, query: query, column: index + 1)
    }

    static let symbols = ["==", "!=", "<=", ">=", "&&", "||", "<", ">", "=", "!", "(", ")", "[", "]", ",", ".", "-"]

    mutating func tokens() throws(TextQueryError) -> [TextQueryToken] {
        var tokens: [TextQueryToken] = []
        while true {
            while index < characters.count, characters[index].isWhitespace { index += 1 }
            guard index < characters.count else {
                tokens.append(TextQueryToken(kind: .end, column: characters.count + 1))
                return tokens
            }
            let start = index
            let c = characters[index]
            let kind: TextQueryToken.Kind
            if c == "\"" {
                kind = .string(try string())
            } else if c == "`" {
                kind = .identifier(try quotedIdentifier(), quoted: true)
            } else if c.isNumber && c.isASCII {
                kind = try number()
            } else if c.isLetter || c == "_" || c == "@" {
                index += 1
                while index < characters.count, characters[index].isLetter || characters[index].isNumber || characters[index] == "_" { index += 1 }
                if c == "@" && index == start + 1 { throw error("expected a name after '@' (as in books.@count)", at: start) }
                kind = .identifier(String(characters[start..<index]), quoted: false)
            } else if let symbol = Self.symbols.first(where: { matches($0) }) {
                index += symbol.count
                kind = .symbol(symbol)
            } else {
                throw error("unexpected character '\(c)'", at: start)
            }
            tokens.append(TextQueryToken(kind: kind, column: start + 1))
        }
    }

    func matches(_ symbol: String) -> Bool {
        var i = index
        for character in symbol {
            guard i < characters.count, characters[i] == character else { return false }
            i += 1
        }
        return true
    }

    /// A double-quoted string, `index` at the opening quote.
    mutating func string() throws(TextQueryError) -> String {
        let start = index
        index += 1
        var text = ""
        while index < characters.count {
            let c = characters[index]
            if c == "\"" {
                index += 1
                return text
            }
            if c == "\\" {
                text.append(try escape())
            } else {
                text.append(c)
                index += 1
            }
        }
        throw error("this string has no closing '\"'", at: start)
    }

    /// An escape sequence, `index` at the backslash.
    mutating func escape() throws(TextQueryError) -> Character {
        let start = index
        index += 1
        guard index < characters.count else { throw error("a '\\' ends the query; write '\\\\' for a backslash", at: start) }
        let c = characters[index]
        index += 1
        switch c {
        case "\"": return "\""
        case "\\": return "\\"
        case "n": return "\n"
        case "t": return "\t"
        case "r": return "\r"
        case "0": return "\0"
        case "u":
            guard index < characters.count, characters[index] == "{",
                  let close = characters[index...].firstIndex(of: "}"),
                  let value = UInt32(String(characters[(index + 1)..<close]), radix: 16),
                  let scalar = Unicode.Scalar(value) else {
                throw error("'\\u' must be followed by a Unicode scalar's hexadecimal value in braces, as in \\u{E9}", at: start)
            }
            index = close + 1
            return Character(scalar)
        default:
            throw error("unknown escape '\\\(c)' (the escapes are \\\", \\\\, \\n, \\t, \\r, \\0 and \\u{…})", at: start)
        }
    }

    /// A name in backquotes, `index` at the opening backquote.
    mutating func quotedIdentifier() throws(TextQueryError) -> String {
        let start = index
        guard let close = characters[(index + 1)...].firstIndex(of: "`") else {
            throw error("this name has no closing '`'", at: start)
        }
        index = close + 1
        let name = String(characters[(start + 1)..<close])
        if name.isEmpty { throw error("expected a name between the backquotes", at: start) }
        return name
    }

    /// An integer or real number, `index` at its first digit.
    mutating func number() throws(TextQueryError) -> TextQueryToken.Kind {
        let start = index
        func digits() { while index < characters.count, characters[index].isASCII, characters[index].isNumber { index += 1 } }
        digits()
        var isReal = false
        if index + 1 < characters.count, characters[index] == ".", characters[index + 1].isASCII, characters[index + 1].isNumber {
            isReal = true
            index += 1
            digits()
        }
        if index < characters.count, characters[index] == "e" || characters[index] == "E" {
            let mark = index
            index += 1
            if index < characters.count, characters[index] == "+" || characters[index] == "-" { index += 1 }
            if index < characters.count, characters[index].isASCII, characters[index].isNumber {
                isReal = true
                digits()
            } else {
                index = mark
            }
        }
        if index < characters.count, characters[index].isLetter || characters[index] == "_" {
            throw error("a number runs into a name; put a space between them", at: index)
        }
        let text = String(characters[start..<index])
        if !isReal {
            guard let value = Int64(text) else { throw error("the integer \(text) does not fit in 64 bits", at: start) }
            return .integer(value, text: text)
        }
        guard let value = Double(text), value.isFinite else { throw error("the number \(text) is out of range", at: start) }
        return .real(value, text: text)
    }
}
