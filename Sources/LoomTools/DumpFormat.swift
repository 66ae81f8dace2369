import Foundation
@_spi(LoomStore) import LoomCore

/// The first line of a dump: what `loom load` needs to make the store without the
/// application's model. Written with sorted keys, so that the same store gives the same bytes.
struct DumpHeader: Codable {
    /// Always `loom-dump`: says what the file is.
    var format: String
    /// The version of the format, ``DumpHeader/currentVersion``.
    var formatVersion: Int
    /// The dumped store's UUID, the host of every URI in the dump; the loaded store keeps it.
    var storeIdentifier: UUID
    /// The saved schema's version hash.
    var versionHash: String
    /// The key allocator's next key per entity (`loom_keys`): a loaded store hands out no key
    /// the dumped one had handed out.
    var nextKeys: [String: Int64]
    /// The store's other metadata (the model version, for one).
    var metadata: [String: String]
    /// The schema saved in the store.
    var schema: SchemaRecord

    static let formatName = "loom-dump"
    static let currentVersion = 1
    /// Metadata keys a store writes itself when it is made; not carried in ``metadata``.
    static let ownMetadataKeys: Set<String> = ["schema", "storeIdentifier", "versionHash", "formatVersion"]
}

extension DumpHeader {
    /// The header of a dump of the store `storeIdentifier` names, from what the store SPI reads
    /// of it (``StoreMaintenanceState``): every store kind's dump starts with the same header.
    init(storeIdentifier: UUID, state: StoreMaintenanceState) {
        self.init(
            format: Self.formatName, formatVersion: Self.currentVersion, storeIdentifier: storeIdentifier,
            versionHash: state.metadata["versionHash"] ?? "", nextKeys: state.nextKeys,
            metadata: state.metadata.filter { !Self.ownMetadataKeys.contains($0.key) }, schema: state.schemaRecord)
    }
}

/// Bytes for standard output or a file, written through a 256 KiB buffer (a dump, a query's
/// result).
struct BufferedOutput {
    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private static let capacity = 1 << 18

    init(descriptor: Int32) {
        self.descriptor = descriptor
        buffer.reserveCapacity(Self.capacity + 4096)
    }

    mutating func append(_ byte: UInt8) { buffer.append(byte) }

    mutating func append(_ text: StaticString) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func append(raw text: String) {
        var text = text
        text.withUTF8 { buffer.append(contentsOf: $0) }
    }

    mutating func append(_ value: Int64) { append(raw: String(value)) }

    mutating func append<C: Collection<UInt8>>(bytes: C) { buffer.append(contentsOf: bytes) }

    /// Appends `text` as a JSON string, escaping quotes, backslashes and control characters.
    mutating func appendJSONString(_ text: String) {
        var text = text
        buffer.append(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            var start = 0
            for (i, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
                start = i + 1
                buffer.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): buffer.append(byte)
                case 0x0A: buffer.append(UInt8(ascii: "n"))
                case 0x0D: buffer.append(UInt8(ascii: "r"))
                case 0x09: buffer.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    buffer.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
            }
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        buffer.append(UInt8(ascii: "\""))
    }

    /// Writes the buffer out when it is full.
    mutating func flushIfFull() throws(LoomToolError) {
        if buffer.count >= Self.capacity { try flush() }
    }

    /// Writes everything buffered.
    mutating func flush() throws(LoomToolError) {
        var written = 0
        while written < buffer.count {
            let result = buffer.withUnsafeBytes { bytes in
                write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw LoomToolError(.storeFailure, "Writing the output failed: \(String(cString: strerror(errno))).")
            }
            written += result
        }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// How an attribute's stored value is written in a dump and read back, by attribute type:
///
/// | type | JSON |
/// |---|---|
/// | any, `nil` | `null` |
/// | `bool` | `true` / `false` |
/// | `integer16/32/64` | a number |
/// | `double`, `float` | a number (shortest text that reads back as the same `Double`) |
/// | `date` | a number: seconds since 2001-01-01 00:00:00 UTC, as stored (Core Data's reference date) |
/// | `string`, `url`, `decimal` | a string (a decimal's exact text) |
/// | `binary` | a string: the bytes in base64 |
/// | `uuid` | a string: `E621E1F8-C36C-495A-93FC-0C247A3E6E5F` |
/// | `codable` | a string: the stored JSON text |
///
/// A value whose storage class does not fit its type (a text in an integer column, an infinite
/// double, a codable value that is not UTF-8) is written as an object naming its class, so that
/// it still loads back exactly: `{"integer": 1}`, `{"real": "inf"}` (or `"-inf"`, `"nan"`, or a
/// number), `{"text": "…"}`, `{"blob": "<base64>"}`. Text that is not valid UTF-8, which a JSON
/// string cannot hold, is `{"textBytes": "<base64>"}`: its bytes as stored, loaded back as text
/// of the same bytes, whatever the attribute's type.
///
/// Every stored value loads back exactly: integers are their decimal text (no detour through a
/// double, so beyond 2^53 too), reals the shortest text that reads back as the same `Double`
/// (`-0.0` included), blobs every byte in base64, text every byte (JSON strings escape only
/// quotes, backslashes and control characters).
enum DumpValueCodec {
    static func write(_ value: StoredValue, of type: AttributeType, to out: inout BufferedOutput) {
        switch (type, value) {
        case (_, .null):
            out.append("null")
        case (.bool, .integer(let v)) where v == 0 || v == 1:
            out.append(v == 1 ? "true" : "false")
        case (.integer16, .integer(let v)), (.integer32, .integer(let v)), (.integer64, .integer(let v)):
            out.append(v)
        case (.double, .real(let v)), (.float, .real(let v)), (.date, .real(let v)):
            if v.isFinite { out.append(raw: v.description) } else { writeStorageClass(value, to: &out) }
        case (.string, .text(let v)), (.url, .text(let v)), (.decimal, .text(let v)):
            out.appendJSONString(v)
        case (.binary, .blob(let v)):
            out.appendJSONString(v.base64EncodedString())
        case (.uuid, .blob(let v)) where v.count == 16:
            out.appendJSONString(UUID(uuid: v.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }).uuidString)
        case (.codable, .blob(let v)):
            if let text = String(validating: v, as: UTF8.self) { out.appendJSONString(text) } else { writeStorageClass(value, to: &out) }
        default:
            writeStorageClass(value, to: &out)
        }
    }

    /// Writes text that is not valid UTF-8 (``RawStatement/nonUTF8Text(_:)``) as its bytes.
    static func write(textBytes bytes: Data, to out: inout BufferedOutput) {
        out.append("{\"textBytes\":")
        out.appendJSONString(bytes.base64EncodedString())
        out.append("}")
    }

    /// The bytes of a `{"textBytes": "<base64>"}` value, or `nil` for any other value.
    static func textBytes(_ json: JSONValue) -> Data? {
        guard case .object(let members) = json, members.count == 1, members[0].name == "textBytes",
              case .string(let text) = members[0].value else { return nil }
        return Data(base64Encoded: text)
    }

    private static func writeStorageClass(_ value: StoredValue, to out: inout BufferedOutput) {
        switch value {
        case .null: out.append("null")
        case .integer(let v): out.append("{\"integer\":"); out.append(v); out.append("}")
        case .real(let v):
            out.append("{\"real\":")
            if v.isFinite { out.append(raw: v.description) } else { out.appendJSONString(v.isNaN ? "nan" : (v > 0 ? "inf" : "-inf")) }
            out.append("}")
        case .text(let v): out.append("{\"text\":"); out.appendJSONString(v); out.append("}")
        case .blob(let v): out.append("{\"blob\":"); out.appendJSONString(v.base64EncodedString()); out.append("}")
        }
    }

    /// The stored value of a dump's JSON for an attribute of `type`, or a sentence saying what
    /// was expected.
    static func read(_ json: JSONValue, of type: AttributeType) -> Result<StoredValue, Mismatch> {
        if case .null = json { return .success(.null) }
        if case .object(let members) = json { return readStorageClass(members) }
        switch (type, json) {
        case (.bool, .bool(let v)):
            return .success(.integer(v ? 1 : 0))
        case (.integer16, .number(let text)), (.integer32, .number(let text)), (.integer64, .number(let text)):
            if let v = Int64(text) { return .success(.integer(v)) }
        case (.double, .number(let text)), (.float, .number(let text)), (.date, .number(let text)):
            if let v = Double(text) { return .success(.real(v)) }
        case (.string, .string(let v)), (.url, .string(let v)), (.decimal, .string(let v)):
            return .success(.text(v))
        case (.binary, .string(let v)):
            if let data = Data(base64Encoded: v) { return .success(.blob(data)) }
        case (.uuid, .string(let v)):
            if let uuid = UUID(uuidString: v) { return .success(.blob(withUnsafeBytes(of: uuid.uuid) { Data($0) })) }
        case (.codable, .string(let v)):
            return .success(.blob(Data(v.utf8)))
        default:
            break
        }
        return .failure(Mismatch(expected: expectation(type), found: json.kind))
    }

    private static func readStorageClass(_ members: [JSONMember]) -> Result<StoredValue, Mismatch> {
        let expected = "an object with one member integer, real, text, textBytes or blob"
        guard members.count == 1, let member = members.first else { return .failure(Mismatch(expected: expected, found: "an object")) }
        switch (member.name, member.value) {
        case ("integer", .number(let text)):
            if let v = Int64(text) { return .success(.integer(v)) }
        case ("real", .number(let text)):
            if let v = Double(text) { return .success(.real(v)) }
        case ("real", .string(let text)):
            switch text {
            case "inf": return .success(.real(.infinity))
            case "-inf": return .success(.real(-.infinity))
            case "nan": return .success(.real(.nan))
            default: break
            }
        case ("text", .string(let v)):
            return .success(.text(v))
        case ("blob", .string(let v)):
            if let data = Data(base64Encoded: v) { return .success(.blob(data)) }
        default:
            break
        }
        return .failure(Mismatch(expected: expected, found: "another object"))
    }

    private static func expectation(_ type: AttributeType) -> String {
        switch type {
        case .bool: "true or false"
        case .integer16, .integer32, .integer64: "an integer"
        case .double, .float: "a number"
        case .date: "a number of seconds since 2001-01-01"
        case .string, .url, .decimal: "a string"
        case .binary: "a base64 string"
        case .uuid: "a UUID string"
        case .codable: "a string of JSON text"
        }
    }

    /// What a value should have been, and what it was.
    struct Mismatch: Error {
        var expected: String
        var found: String
    }
}

/// The URI text of one entity's objects (``AnyObjectID/uriRepresentation``), made without a `URL`
/// per object: the same prefix, then the key.
struct URIPrefix {
    let text: String
    let bytes: [UInt8]

    init(storeIdentifier: UUID, entityName: String) {
        let sample = AnyObjectID(storeIdentifier: storeIdentifier, entityName: entityName, primaryKey: 1).uriRepresentation.absoluteString
        text = String(sample.dropLast())
        bytes = Array(text.utf8)
    }

    /// The key of a URI of this prefix, or `nil` for another URI.
    func key(of uri: String) -> Int64? {
        guard uri.hasPrefix(text), let key = Int64(uri.dropFirst(text.count)), key > 0 else { return nil }
        return key
    }
}
