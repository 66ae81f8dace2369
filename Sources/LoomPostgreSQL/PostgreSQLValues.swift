import Foundation
@_spi(LoomStore) import LoomCore
import NIOCore
import PostgresNIO

/// One value bound as a statement parameter, in PostgreSQL's binary format: Loom's stored values
/// map to `int8`, `float8`, `text` and `bytea` (the column types ``PostgreSQLDialect`` declares),
/// and arrays of them travel as one parameter (`unnest`, `= ANY`).
struct BoundValue: PostgresDynamicTypeEncodable {
    let psqlType: PostgresDataType
    let bytes: ByteBuffer

    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        var copy = bytes
        byteBuffer.writeBuffer(&copy)
    }
}

/// The PostgreSQL types Loom's columns have.
enum ColumnKind: Sendable {
    case integer, real, text, bytes

    var type: PostgresDataType {
        switch self {
        case .integer: .int8
        case .real: .float8
        case .text: .text
        case .bytes: .bytea
        }
    }

    var arrayType: PostgresDataType {
        switch self {
        case .integer: .int8Array
        case .real: .float8Array
        case .text: .textArray
        case .bytes: .byteaArray
        }
    }

    /// The SQL name of the array type, for casts in `unnest($1::int8[], …)`.
    var arrayName: String {
        switch self {
        case .integer: "int8[]"
        case .real: "float8[]"
        case .text: "text[]"
        case .bytes: "bytea[]"
        }
    }

    /// The kind of a slot's column.
    static func of(_ entity: EntityDescription, _ slot: Int) -> ColumnKind {
        switch entity.storedValue(at: slot) {
        case .attribute(let attribute): of(attribute.type)
        case .foreignKey: .integer
        case .order: .bytes
        }
    }

    static func of(_ type: AttributeType) -> ColumnKind {
        switch type {
        case .bool, .integer16, .integer32, .integer64: .integer
        case .double, .float, .date: .real
        case .string, .url, .decimal: .text
        case .binary, .uuid, .codable: .bytes
        }
    }

    /// The kind a value binds as when nothing says which column it is for.
    static func natural(_ value: StoredValue) -> ColumnKind? {
        switch value {
        case .null: nil
        case .integer: .integer
        case .real: .real
        case .text: .text
        case .blob: .bytes
        }
    }
}

/// A value PostgreSQL cannot store as given: the caller names the attribute.
struct UnstorableValue: Error {
    let reason: String
}

enum PostgreSQLValues {
    /// Writes `value` as `kind` in binary format (without its length), converting between
    /// integer and real as SQLite's affinities do. Text with a NUL character cannot be stored
    /// (PostgreSQL refuses it): that throws instead of truncating.
    static func write(_ value: StoredValue, as kind: ColumnKind, into buffer: inout ByteBuffer) throws(UnstorableValue) {
        switch (kind, value) {
        case (_, .null):
            preconditionFailure("NULL has no bytes")
        case (.integer, .integer(let v)):
            buffer.writeInteger(v)
        case (.integer, .real(let v)):
            if let exact = Int64(exactly: v) { buffer.writeInteger(exact) } else {
                throw UnstorableValue(reason: "the real value \(v) is stored in an integer column")
            }
        case (.real, .real(let v)):
            buffer.writeInteger(v.bitPattern)
        case (.real, .integer(let v)):
            buffer.writeInteger(Double(v).bitPattern)
        case (.text, .text(var v)):
            if v.withUTF8({ $0.contains(0) }) { throw UnstorableValue(reason: "the text holds a NUL character, which PostgreSQL cannot store in text") }
            buffer.writeString(v)
        case (.bytes, .blob(let v)):
            buffer.writeBytes(v)
        case (.bytes, .text(let v)):
            buffer.writeString(v)
        case (.text, .blob(let v)):
            guard let text = String(data: v, encoding: .utf8), !text.utf8.contains(0) else {
                throw UnstorableValue(reason: "binary data is stored in a text column")
            }
            buffer.writeString(text)
        case (.integer, _), (.real, _), (.text, _), (.bytes, _):
            throw UnstorableValue(reason: "\(English.a(value.typeName)) value is stored in \(English.a(kind)) column")
        }
    }

    /// Appends one parameter: `value` as `kind` (its natural kind when `nil`).
    static func bind(_ value: StoredValue, as kind: ColumnKind? = nil, to bindings: inout PostgresBindings) throws(UnstorableValue) {
        guard let kind = kind ?? ColumnKind.natural(value), !value.isNull else {
            bindings.appendNull()
            return
        }
        var buffer = ByteBuffer()
        try write(value, as: kind, into: &buffer)
        bindings.append(BoundValue(psqlType: kind.type, bytes: buffer))
    }

    /// Appends one parameter holding an array of values of one kind (PostgreSQL's binary array
    /// format: one dimension, NULL elements allowed).
    ///
    /// The array is measured first, then written in one pass straight into the buffer's memory:
    /// writing it value by value through `ByteBuffer` (three calls a value, each checking
    /// capacity and exclusive access) and testing text for NUL with `utf8.contains` was a
    /// large part of the saving thread's work on a large insert. Values of another kind than
    /// the column's (converted or refused by ``write``) go the value-by-value way.
    static func bindArray<C: Collection>(_ values: C, as kind: ColumnKind, to bindings: inout PostgresBindings) throws(UnstorableValue) where C.Element == StoredValue {
        bindings.append(BoundValue(psqlType: kind.arrayType, bytes: try arrayBytes(values, as: kind)))
    }

    /// The bytes of ``bindArray(_:as:to:)``'s parameter.
    static func arrayBytes<C: Collection>(_ values: C, as kind: ColumnKind) throws(UnstorableValue) -> ByteBuffer where C.Element == StoredValue {
        var size = 20
        var hasNulls = false
        for value in values {
            switch (kind, value) {
            case (_, .null): size += 4; hasNulls = true
            case (.integer, .integer), (.real, .real), (.real, .integer): size += 12
            case (.text, .text(let text)), (.bytes, .text(let text)): size += 4 + text.utf8.count
            case (.bytes, .blob(let data)): size += 4 + data.count
            default: return try arrayBytesValueByValue(values, as: kind)
            }
        }
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        var holdsNUL = false
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var at = 0
            func put<T: FixedWidthInteger>(_ integer: T) {
                raw.storeBytes(of: integer.bigEndian, toByteOffset: at, as: T.self)
                at += MemoryLayout<T>.size
            }
            func put(_ bytes: UnsafeRawBufferPointer) {
                put(Int32(bytes.count))
                if let base = bytes.baseAddress, bytes.count > 0 {
                    (raw.baseAddress! + at).copyMemory(from: base, byteCount: bytes.count)
                    at += bytes.count
                }
            }
            put(Int32(1))                          // dimensions
            put(Int32(hasNulls ? 1 : 0))           // has nulls
            put(kind.type.rawValue)                // element type
            put(Int32(values.count))               // element count
            put(Int32(1))                          // lower bound
            for value in values {
                switch value {
                case .null:
                    put(Int32(-1))
                case .integer(let v):
                    put(Int32(8))
                    if kind == .real { put(Double(v).bitPattern) } else { put(v) }
                case .real(let v):
                    put(Int32(8))
                    put(v.bitPattern)
                case .text(var text):
                    text.withUTF8 { utf8 in
                        if kind == .text, let base = utf8.baseAddress, memchr(base, 0, utf8.count) != nil { holdsNUL = true }
                        put(UnsafeRawBufferPointer(utf8))
                    }
                case .blob(let data):
                    data.withUnsafeBytes { put($0) }
                }
            }
            return at
        }
        if holdsNUL { throw UnstorableValue(reason: "the text holds a NUL character, which PostgreSQL cannot store in text") }
        return buffer
    }

    /// ``arrayBytes(_:as:)`` for arrays holding values of another kind than their column's,
    /// converted (or refused) one by one by ``write(_:as:into:)``.
    static func arrayBytesValueByValue<C: Collection>(_ values: C, as kind: ColumnKind) throws(UnstorableValue) -> ByteBuffer where C.Element == StoredValue {
        var buffer = ByteBuffer()
        let header = buffer.writerIndex
        buffer.writeInteger(Int32(1))            // dimensions
        buffer.writeInteger(Int32(0))            // has nulls (patched below)
        buffer.writeInteger(kind.type.rawValue)  // element type
        let countIndex = buffer.writerIndex
        buffer.writeInteger(Int32(0))            // element count (patched below)
        buffer.writeInteger(Int32(1))            // lower bound
        var count: Int32 = 0
        var hasNulls = false
        for value in values {
            count += 1
            if value.isNull {
                hasNulls = true
                buffer.writeInteger(Int32(-1))
                continue
            }
            let lengthIndex = buffer.writerIndex
            buffer.writeInteger(Int32(0))
            try write(value, as: kind, into: &buffer)
            buffer.setInteger(Int32(buffer.writerIndex - lengthIndex - 4), at: lengthIndex)
        }
        buffer.setInteger(Int32(hasNulls ? 1 : 0), at: header + 4)
        buffer.setInteger(count, at: countIndex)
        return buffer
    }

    /// An array of keys, as one `int8[]` parameter, written in one pass into the buffer's memory
    /// (see ``arrayBytes(_:as:)``).
    static func bindKeys<C: Collection>(_ keys: C, to bindings: inout PostgresBindings) where C.Element == Int64 {
        bindings.append(BoundValue(psqlType: .int8Array, bytes: keyBytes(keys)))
    }

    /// The bytes of ``bindKeys(_:to:)``'s parameter.
    static func keyBytes<C: Collection>(_ keys: C) -> ByteBuffer where C.Element == Int64 {
        let size = 20 + keys.count * 12
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var at = 0
            func put<T: FixedWidthInteger>(_ integer: T) {
                raw.storeBytes(of: integer.bigEndian, toByteOffset: at, as: T.self)
                at += MemoryLayout<T>.size
            }
            put(Int32(1))                           // dimensions
            put(Int32(0))                           // no nulls
            put(PostgresDataType.int8.rawValue)     // element type
            put(Int32(keys.count))                  // element count
            put(Int32(1))                           // lower bound
            for key in keys {
                put(Int32(8))
                put(key)
            }
            return at
        }
        return buffer
    }

    /// A cell as a stored value. Aggregates' `numeric` results (PostgreSQL's sum of integers)
    /// become integers when they fit, and throw ``NumericOverflow`` when they do not.
    static func value(_ cell: PostgresCell) throws -> StoredValue {
        guard var bytes = cell.bytes else { return .null }
        switch cell.dataType {
        case .int8: return .integer(bytes.readInteger(as: Int64.self) ?? 0)
        case .int4: return .integer(Int64(bytes.readInteger(as: Int32.self) ?? 0))
        case .int2: return .integer(Int64(bytes.readInteger(as: Int16.self) ?? 0))
        case .bool: return .integer(Int64(bytes.readInteger(as: UInt8.self) ?? 0))
        case .float8: return .real(Double(bitPattern: bytes.readInteger(as: UInt64.self) ?? 0))
        case .float4: return .real(Double(Float(bitPattern: bytes.readInteger(as: UInt32.self) ?? 0)))
        case .bytea: return .blob(Data(bytes.readableBytesView))
        case .numeric:
            let decimal = try cell.decode(Decimal.self)
            var rounded = decimal, source = decimal
            NSDecimalRound(&rounded, &source, 0, .plain)
            if rounded == decimal {
                let number = NSDecimalNumber(decimal: decimal)
                if decimal >= Decimal(Int64.min) && decimal <= Decimal(Int64.max) { return .integer(number.int64Value) }
                throw NumericOverflow()
            }
            return .real(NSDecimalNumber(decimal: decimal).doubleValue)
        default:
            return .text(bytes.readString(length: bytes.readableBytes) ?? "")
        }
    }

    /// An `int8` cell.
    static func int64(_ cell: PostgresCell) -> Int64 {
        guard var bytes = cell.bytes else { return 0 }
        switch cell.dataType {
        case .int4: return Int64(bytes.readInteger(as: Int32.self) ?? 0)
        default: return bytes.readInteger(as: Int64.self) ?? 0
        }
    }
}

/// A sum of integers past 64 bits.
struct NumericOverflow: Error {}

extension StoredValue {
    var typeName: String {
        switch self {
        case .null: "NULL"
        case .integer: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "binary"
        }
    }
}
