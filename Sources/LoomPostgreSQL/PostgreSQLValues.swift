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
        case (.text, .text(let v)):
            if v.utf8.contains(0) { throw UnstorableValue(reason: "the text holds a NUL character, which PostgreSQL cannot store in text") }
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
            throw UnstorableValue(reason: "a \(value.typeName) value is stored in a \(kind) column")
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
    static func bindArray<S: Sequence>(_ values: S, as kind: ColumnKind, to bindings: inout PostgresBindings) throws(UnstorableValue) where S.Element == StoredValue {
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
        bindings.append(BoundValue(psqlType: kind.arrayType, bytes: buffer))
    }

    /// An array of keys, as one `int8[]` parameter.
    static func bindKeys<C: Collection>(_ keys: C, to bindings: inout PostgresBindings) where C.Element == Int64 {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(20 + keys.count * 12)
        buffer.writeInteger(Int32(1))
        buffer.writeInteger(Int32(0))
        buffer.writeInteger(PostgresDataType.int8.rawValue)
        buffer.writeInteger(Int32(keys.count))
        buffer.writeInteger(Int32(1))
        for key in keys {
            buffer.writeInteger(Int32(8))
            buffer.writeInteger(key)
        }
        bindings.append(BoundValue(psqlType: .int8Array, bytes: buffer))
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
