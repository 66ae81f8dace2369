import NIOCore
import PostgresNIO

/// A statement's values in the form postgres-nio's prepared queries take them.
///
/// postgres-nio runs a named prepared statement with SQL known only at run time through its
/// `PostgresDatabase.prepare(query:)`, whose `PreparedQuery` takes `[PostgresData]`; its newer
/// prepared statements need the SQL in a type's static property. Loom builds every statement's
/// values as `PostgresBindings`, which keeps them in one buffer (each value as its length and
/// bytes) beside their types, and offers no public way to read them back. They are read through
/// reflection. Whether that still gives back exactly what was bound is checked once, on values
/// of every kind Loom binds (``layoutIsKnown``); if a later postgres-nio lays the bindings out
/// otherwise, ``values(of:)`` answers nil and statements go unnamed, as before.
///
/// Reflecting every value's type and format costs more than the rest of a save's work on the
/// client, so only a statement's first run does it (``values(of:)``): later runs of the same
/// statement read only the values' bytes (``values(of:types:)``), with the types of the first.
/// Running a prepared statement sends each value's format and bytes, not its type (the types
/// were fixed when it was prepared), and a statement's values at one position are always bound
/// the same way (the same code builds them), so in the same format: binary, which every value
/// Loom binds has and the first run checks.
enum PreparedValues {
    /// `bindings` as postgres-nio's legacy values, or nil when they cannot be read.
    static func values(of bindings: PostgresBindings) -> [PostgresData]? {
        layoutIsKnown ? read(bindings) : nil
    }

    /// `bindings` of a statement whose first run's values had `types` (from ``values(of:)``):
    /// only their bytes are read. Nil when they cannot be read, or are not as many.
    static func values(of bindings: PostgresBindings, types: [PostgresDataType]) -> [PostgresData]? {
        guard layoutIsKnown, bindings.count == types.count else { return nil }
        var bytes: ByteBuffer?
        for child in Mirror(reflecting: bindings).children where child.label == "bytes" {
            bytes = child.value as? ByteBuffer
        }
        guard var bytes else { return nil }
        return split(&bytes, types: types)
    }

    /// The values in `bytes` (each its length, then as many bytes; -1 for NULL), in binary,
    /// typed `types`; nil unless there are exactly that many.
    private static func split(_ bytes: inout ByteBuffer, types: some Collection<PostgresDataType>) -> [PostgresData]? {
        var values: [PostgresData] = []
        values.reserveCapacity(types.count)
        for type in types {
            guard let length = bytes.readInteger(as: Int32.self) else { return nil }
            if length < 0 {
                values.append(PostgresData(type: type, formatCode: .binary, value: nil))
            } else {
                guard let value = bytes.readSlice(length: Int(length)) else { return nil }
                values.append(PostgresData(type: type, formatCode: .binary, value: value))
            }
        }
        return bytes.readableBytes == 0 ? values : nil
    }

    /// Whether ``read(_:)`` gives back what was bound: appending what it reads to new bindings
    /// makes bindings equal to the first.
    static let layoutIsKnown: Bool = {
        var bindings = PostgresBindings()
        bindings.append(Int64(-7))
        bindings.appendNull()
        bindings.append("text, with ünïcode")
        bindings.append(2.5)
        bindings.append(BoundValue(psqlType: .int8Array, bytes: PostgreSQLValues.keyBytes([1, 2, 3])))
        bindings.append(BoundValue(psqlType: .bytea, bytes: ByteBuffer(bytes: [0, 1, 2])))
        guard let values = read(bindings), values.count == bindings.count else { return false }
        var again = PostgresBindings()
        for value in values { again.append(value) }
        return again == bindings
    }()

    static func read(_ bindings: PostgresBindings) -> [PostgresData]? {
        var entries: [Any]?
        var bytes: ByteBuffer?
        for child in Mirror(reflecting: bindings).children {
            switch child.label {
            case "metadata": entries = child.value as? [Any]
            case "bytes": bytes = child.value as? ByteBuffer
            default: break
            }
        }
        guard let entries, var bytes else { return nil }
        var types: [PostgresDataType] = []
        types.reserveCapacity(entries.count)
        for entry in entries {
            var type: PostgresDataType?
            var format: PostgresFormat?
            for field in Mirror(reflecting: entry).children {
                switch field.label {
                case "dataType": type = field.value as? PostgresDataType
                case "format": format = field.value as? PostgresFormat
                default: break
                }
            }
            // A legacy value is sent in binary: one bound as text cannot go this way.
            guard let type, format == .binary else { return nil }
            types.append(type)
        }
        return split(&bytes, types: types)
    }
}
