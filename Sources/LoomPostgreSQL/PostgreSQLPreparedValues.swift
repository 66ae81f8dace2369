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
enum PreparedValues {
    /// `bindings` as postgres-nio's legacy values, or nil when they cannot be read.
    static func values(of bindings: PostgresBindings) -> [PostgresData]? {
        layoutIsKnown ? read(bindings) : nil
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
        var values: [PostgresData] = []
        values.reserveCapacity(entries.count)
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
            guard let type, format == .binary, let length = bytes.readInteger(as: Int32.self) else { return nil }
            if length < 0 {
                values.append(PostgresData(type: type, formatCode: .binary, value: nil))
            } else {
                guard let value = bytes.readSlice(length: Int(length)) else { return nil }
                values.append(PostgresData(type: type, formatCode: .binary, value: value))
            }
        }
        return bytes.readableBytes == 0 ? values : nil
    }
}
