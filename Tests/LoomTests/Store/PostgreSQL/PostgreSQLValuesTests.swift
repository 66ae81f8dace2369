import Foundation
@testable import LoomPostgreSQL
@_spi(LoomStore) import LoomCore
import NIOCore
import PostgresNIO
import Testing

/// Arrays bound as one parameter (`unnest`, `= ANY`): the one-pass writer gives exactly the
/// bytes of the value-by-value one, and refuses what PostgreSQL cannot store. No server needed.
@Suite("PostgreSQL array parameters")
struct PostgreSQLValuesTests {
    private static func randomValue(for kind: ColumnKind, _ random: inout SeededGenerator) -> StoredValue {
        if Int.random(in: 0..<6, using: &random) == 0 { return .null }
        switch kind {
        case .integer:
            return .integer([0, 1, -1, .max, .min, Int64.random(in: -1_000_000...1_000_000, using: &random)].randomElement(using: &random)!)
        case .real:
            // Integers in a real column are written as reals, as SQLite's REAL affinity keeps them.
            return Bool.random(using: &random) ? .real(Double.random(in: -1e9...1e9, using: &random)) : .integer(Int64.random(in: -99...99, using: &random))
        case .text:
            return .text(["", "a", "é 字 🧵", String(repeating: "long text ", count: Int.random(in: 1...40, using: &random))].randomElement(using: &random)!)
        case .bytes:
            return Bool.random(using: &random)
                ? .blob(Data((0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
                : .text("as bytes \u{0}")   // text in a bytea column keeps every byte, NUL included
        }
    }

    @Test("Every kind, NULLs, empty and multi-byte values: the same bytes as writing value by value", arguments: [ColumnKind.integer, .real, .text, .bytes])
    func oneInOnePassEqualsValueByValue(kind: ColumnKind) throws {
        var random = SeededGenerator(seed: 3)
        for length in [0, 1, 2, 17, 500] {
            let values = (0..<length).map { _ in Self.randomValue(for: kind, &random) }
            #expect(try PostgreSQLValues.arrayBytes(values, as: kind) == PostgreSQLValues.arrayBytesValueByValue(values, as: kind))
        }
    }

    @Test("Key arrays: the bytes of an integer array without NULLs")
    func keyArrays() throws {
        for keys: [Int64] in [[], [1], [.max, .min, 0, -1, 42]] {
            #expect(try PostgreSQLValues.keyBytes(keys) == PostgreSQLValues.arrayBytesValueByValue(keys.map(StoredValue.integer), as: .integer))
        }
    }

    @Test("A value of another kind goes value by value: converted when exact, refused when not; NUL in text is refused")
    func otherKindsAndNUL() throws {
        let exact: [StoredValue] = [.integer(1), .real(2), .null]
        #expect(try PostgreSQLValues.arrayBytes(exact, as: .integer) == PostgreSQLValues.arrayBytesValueByValue([.integer(1), .integer(2), .null], as: .integer))
        #expect(throws: UnstorableValue.self) { try PostgreSQLValues.arrayBytes([.integer(1), .real(2.5)], as: .integer) }
        let error = #expect(throws: UnstorableValue.self) { try PostgreSQLValues.arrayBytes([.text("fine"), .text("not\u{0}fine")], as: .text) }
        #expect(error?.reason.contains("NUL") == true)
        #expect(throws: UnstorableValue.self) { try PostgreSQLValues.arrayBytes([.text("a")], as: .integer) }
    }

    @Test("A statement's values read back for a prepared query are what was bound, for every kind of value Loom binds; a later run of it reads the bytes with the first run's types")
    func preparedValues() throws {
        #expect(PreparedValues.layoutIsKnown, "postgres-nio lays out its bindings otherwise: saves are no longer prepared")
        var random = SeededGenerator(seed: 42)
        for kind in [ColumnKind.integer, .real, .text, .bytes] {
            var bindings = PostgresBindings()
            bindings.append(Int64.min)
            bindings.appendNull()
            bindings.append("")
            bindings.append(Optional<String>.none)
            bindings.append(-0.0)
            try PostgreSQLValues.bindArray((0..<50).map { _ in Self.randomValue(for: kind, &random) }, as: kind, to: &bindings)
            try PostgreSQLValues.bindArray([], as: kind, to: &bindings)
            let values = try #require(PreparedValues.values(of: bindings))
            #expect(values.count == bindings.count)
            var again = PostgresBindings()
            for value in values { again.append(value) }
            #expect(again == bindings)
            // A later run reads the bytes only, with the first run's types.
            let types = values.map(\.type)
            let later = try #require(PreparedValues.values(of: bindings, types: types))
            #expect(later.map(\.type) == types)
            #expect(later.map(\.value) == values.map(\.value))
            #expect(later.map(\.formatCode) == values.map(\.formatCode))
            #expect(PreparedValues.values(of: bindings, types: Array(types.dropLast())) == nil, "fewer types than values")
            #expect(PreparedValues.values(of: bindings, types: types + [.int8]) == nil, "more types than values")
        }
        #expect(PreparedValues.values(of: PostgresBindings())?.isEmpty == true)
        #expect(PreparedValues.values(of: PostgresBindings(), types: [])?.isEmpty == true)
    }
}

