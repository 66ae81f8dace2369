import Foundation
import Loom
import LoomSQL
import LoomPostgreSQL
@_spi(LoomStore) @testable import LoomCore
import Testing

/// The SQL text `SQLGenerator` writes, per dialect: SQLite's exactly, and a numbered-parameter
/// dialect (PostgreSQL's shape) to prove that every dialect-specific piece goes through the
/// dialect.
@Suite("SQL dialects")
struct SQLDialectTests {
    /// PostgreSQL's conventions, enough to check the generator's text.
    struct NumberedDialect: SQLDialect {
        func placeholder(_ index: Int) -> String { "$\(index)" }
        func nullSafeComparison(_ a: String, equal: Bool, _ b: String) -> String { "\(a) IS \(equal ? "NOT " : "")DISTINCT FROM \(b)" }
        func isInKeyList(_ column: String, _ placeholder: String) -> String { "\(column) = ANY(\(placeholder))" }
        var unlimited: StoredValue { .null }
        func insertIgnoringExisting(into table: String, columns: [String], values: [String]) -> String {
            "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES (\(values.joined(separator: ", "))) ON CONFLICT DO NOTHING"
        }
        func columnType(_ type: AttributeType) -> String { type == .string ? "TEXT COLLATE \"C\"" : "BIGINT" }
        var primaryKeyDefinition: String { "BIGINT PRIMARY KEY" }
        var integerType: String { "BIGINT" }
        var orderType: String { "BYTEA" }
        var joinTableOptions: String { "" }
        func stringTest(_ op: PredicateNode.StringOperator, _ a: String, _ b: String) -> String { "loom.\(op)(\(a), \(b))" }
        func lowercase(_ a: String) -> String { "lower(\(a))" }
        func length(_ a: String) -> String { "char_length(\(a))" }
        func hierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] { ["CREATE TRIGGER \(t.name) ON \(t.table)"] }
        func droppingHierarchyConstraintTriggers(_ t: HierarchyConstraintTriggers) -> [String] { ["DROP TRIGGER \(t.name)"] }
    }

    let schema: Schema
    let book: EntityDescription
    init() throws {
        schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        book = try schema.requireEntity(named: "Book")
    }

    /// A schema with many-to-many relationships (join tables).
    static func graphSchema() throws -> Schema { try Schema([Publisher.self, Author.self, Profile.self, Novel.self, Tag.self, Chapter.self, Review.self]) }

    func index(_ name: String) throws -> Int { try #require(book.attributes.firstIndex { $0.name == name }) }

    /// `pages > 300 AND title == nil OR title hasPrefix "A"`, by title, 10 from 20.
    func query() throws -> StoreQuery {
        let pages = try index("pages"), title = try index("title")
        let predicate = PredicateNode.or(
            .and(.compare(.greater, .attribute(pages), .constant(.integer(300))), .compare(.equal, .attribute(title), .constant(.null))),
            .string(.hasPrefix, .attribute(title), .constant(.text("A"))))
        return StoreQuery(entity: book, predicate: predicate, sortKeys: [SortKey(attributeIndex: title, ascending: true)], fetchOffset: 20, fetchLimit: 10)
    }

    @Test("SQLite: positional parameters, IS, json_each key lists, LIMIT -1, INSERT OR IGNORE")
    func sqlite() throws {
        let sql = SQLGenerator(schema: schema, dialect: SQLiteDialect())
        let (text, arguments) = sql.select(try query())
        #expect(text.hasSuffix(#"FROM "Book" AS t0 WHERE (((t0."pages" > ?) AND (t0."title" IS ?)) OR loom_has_prefix(t0."title", ?)) ORDER BY t0."title" ASC, t0."Z_PK" LIMIT ? OFFSET ?"#))
        #expect(arguments == [.integer(300), .null, .text("A"), .integer(10), .integer(20)])
        #expect(sql.selectByKeys(book).hasSuffix(#"FROM "Book" WHERE "Z_PK" IN (SELECT value FROM json_each(?))"#))
        #expect(sql.update(book, columns: [try index("title")]) == #"UPDATE "Book" SET "title" = ?, "Z_OPT" = "Z_OPT" + 1 WHERE "Z_PK" = ? AND "Z_OPT" = ?"#)
        let offsetOnly = StoreQuery(entity: book, fetchOffset: 5)
        #expect(sql.select(offsetOnly).1 == [.integer(-1), .integer(5)])
        let joinTable = try #require(try Self.graphSchema().joinTables.first)
        #expect(sql.insertLink(joinTable).hasPrefix("INSERT OR IGNORE INTO"))
        #expect(sql.createStatements().contains { $0.hasPrefix(#"CREATE TABLE "Book" ("Z_PK" INTEGER PRIMARY KEY, "Z_OPT" INTEGER NOT NULL"#) })
        #expect(SQLGenerator(schema: try Self.graphSchema(), dialect: SQLiteDialect()).createStatements().contains { $0.hasSuffix("WITHOUT ROWID") })
    }

    @Test("Queries that differ only in their constants share a text, each with its own arguments, as if written anew", arguments: [false, true])
    func queryTextsByShape(numbered: Bool) throws {
        let dialect: any SQLDialect = numbered ? NumberedDialect() : SQLiteDialect()
        let sql = SQLGenerator(schema: schema, dialect: dialect)
        let pages = try index("pages"), title = try index("title")
        func query(_ low: StoredValue, _ name: StoredValue, _ list: [StoredValue], limit: Int? = nil, offset: Int = 0) -> StoreQuery {
            let predicate = PredicateNode.and(
                .compare(.greaterOrEqual, .coalesce(.attribute(pages), .constant(.integer(0))), .constant(low)),
                .or(.compare(.equal, .attribute(title), .constant(name)), .isIn(.arithmetic(.add, .attribute(pages), .constant(.integer(1))), list)))
            return StoreQuery(entity: book, predicate: predicate, sortKeys: [SortKey(attributeIndex: title, ascending: false)], fetchOffset: offset, fetchLimit: limit)
        }
        let queries = [
            query(.integer(1), .text("A"), [.integer(1)]),
            query(.integer(2), .text("B"), [.integer(3)]),
            query(.integer(2), .null, [.integer(3)]),                         // NULL: another shape
            query(.real(2.5), .text("C"), [.integer(1), .null], limit: 5),    // a window, a longer list
            query(.real(3.5), .text("D"), [.integer(7), .text("x")], limit: nil, offset: 4),
            StoreQuery(entity: book, predicate: nil, sortKeys: [], fetchOffset: 0, fetchLimit: nil),
        ]
        for query in queries + queries {
            let (text, arguments) = sql.select(query)
            let (written, bound) = SQLGenerator(schema: schema, dialect: dialect).select(query)
            #expect(text == written)
            #expect(arguments == bound)
        }
        #expect(sql.select(queries[0]).0 == sql.select(queries[1]).0)
        #expect(sql.select(queries[1]).1 == [.integer(0), .integer(2), .text("B"), .integer(1), .integer(3)])
    }

    @Test("A numbered dialect: every parameter, comparison, key list, window and type goes through it")
    func numbered() throws {
        let sql = SQLGenerator(schema: schema, dialect: NumberedDialect())
        let (text, arguments) = sql.select(try query())
        #expect(text.hasSuffix(#"WHERE (((t0."pages" > $1) AND (t0."title" IS NOT DISTINCT FROM $2)) OR loom.hasPrefix(t0."title", $3)) ORDER BY t0."title" ASC, t0."Z_PK" LIMIT $4 OFFSET $5"#))
        #expect(arguments.count == 5)
        #expect(sql.select(StoreQuery(entity: book, fetchOffset: 5)).1 == [.null, .integer(5)])
        #expect(sql.update(book, columns: [try index("title"), try index("pages")]).hasSuffix(#"SET "title" = $1, "pages" = $2, "Z_OPT" = "Z_OPT" + 1 WHERE "Z_PK" = $3 AND "Z_OPT" = $4"#))
        #expect(sql.insert(book).contains("VALUES ($1, $2,"))
        #expect(sql.delete(book) == #"DELETE FROM "Book" WHERE "Z_PK" = $1 AND "Z_OPT" = $2"#)
        #expect(sql.selectByKeys(book).hasSuffix(#"WHERE "Z_PK" = ANY($1)"#))
        let joinTable = try #require(try Self.graphSchema().joinTables.first)
        #expect(sql.insertLink(joinTable).hasSuffix("VALUES ($1, $2) ON CONFLICT DO NOTHING"))
        let create = sql.createStatements()
        #expect(create.contains { $0.hasPrefix(#"CREATE TABLE "Book" ("Z_PK" BIGINT PRIMARY KEY, "Z_OPT" BIGINT NOT NULL"#) })
        #expect(create.contains { $0.contains(#""title" TEXT COLLATE "C" NOT NULL"#) })
        #expect(!create.contains { $0.contains("WITHOUT ROWID") || $0.contains("BLOB") || $0.contains(" INTEGER") })
        // No statement written for this dialect has a positional marker left.
        let texts = [text, sql.count(try query()).0, sql.selectKeys(try query()).0] + create
        #expect(!texts.contains { $0.contains("?") })
    }

    @Test("PostgreSQL: booleans are 0/1 where a value is wanted and `<> 0` tests where a condition is, NULLs first ascending, division by zero NULL, grouping outside a subquery")
    func postgres() throws {
        let sql = SQLGenerator(schema: schema, dialect: PostgreSQLDialect())
        let pages = try index("pages"), title = try index("title")
        // A string test compared with a value, and a bare value used as a condition.
        let predicate = PredicateNode.and(
            .compare(.equal, .string(.contains, .attribute(title), .constant(.text("a"))), .constant(.integer(1))),
            .arithmetic(.divide, .attribute(pages), .constant(.integer(0))))
        let query = StoreQuery(entity: book, predicate: predicate, sortKeys: [SortKey(attributeIndex: title, ascending: true), SortKey(attributeIndex: pages, ascending: false)])
        let (text, arguments) = sql.select(query)
        #expect(text.contains(#"(((strpos(t0."title", $1) > 0))::int4::int8) IS NOT DISTINCT FROM $2"#), "\(text)")
        #expect(text.contains(#"AND (((t0."pages" / NULLIF($3, 0))) <> 0))"#), "\(text)")
        #expect(text.hasSuffix(#"ORDER BY t0."title" ASC NULLS FIRST, t0."pages" DESC NULLS LAST, t0."Z_PK""#), "\(text)")
        #expect(arguments == [.text("a"), .integer(1), .integer(0)])
        #expect(sql.count(query).0.hasSuffix(") AS matches"))
        #expect(sql.selectByKeys(book).hasSuffix(#"WHERE "Z_PK" = ANY($1::int8[])"#))
        // A column against a value: = and <> that an index serves, never NULL; against NULL or
        // another column: IS [NOT] DISTINCT FROM.
        func condition(_ predicate: PredicateNode) -> String {
            let text = sql.select(StoreQuery(entity: book, predicate: predicate)).0
            return String(text[text.range(of: "WHERE ")!.upperBound..<text.range(of: " ORDER BY")!.lowerBound])
        }
        #expect(condition(.compare(.equal, .attribute(pages), .constant(.integer(3)))) == #"(t0."pages" = $1 AND t0."pages" IS NOT NULL)"#)
        #expect(condition(.compare(.notEqual, .constant(.integer(3)), .attribute(pages))) == #"(t0."pages" <> $1 OR t0."pages" IS NULL)"#)
        #expect(condition(.compare(.equal, .attribute(pages), .constant(.null))) == #"(t0."pages" IS NOT DISTINCT FROM $1)"#)
        #expect(condition(.compare(.notEqual, .attribute(pages), .attribute(title))) == #"(t0."pages" IS DISTINCT FROM t0."title")"#)
        // Grouped: the values once, in a subquery; grouped and ordered outside it.
        let grouped = AggregateQuery(entity: book, columns: [.value(.attribute(title)), .aggregate(.average, .attribute(pages))], groupBy: [.attribute(title)])
        let (groupText, _) = sql.aggregate(grouped)
        #expect(groupText == #"SELECT q.g0, (AVG(q.a1)::float8) FROM (SELECT t0."title" AS g0, t0."pages" AS a1 FROM "Book" AS t0) AS q GROUP BY q.g0 ORDER BY q.g0 ASC NULLS FIRST"#, "\(groupText)")
    }

    @Test("A change set becomes the same statements in every dialect: deletes with their links, updates by shape, inserts by entity, then links", arguments: [false, true])
    func changeSetStatements(numbered: Bool) throws {
        let schema = try Self.graphSchema()
        let sql = SQLGenerator(schema: schema, dialect: numbered ? NumberedDialect() : SQLiteDialect())
        let novel = try schema.requireEntity(named: "Novel"), tag = try schema.requireEntity(named: "Tag")
        let author = try schema.requireEntity(named: "Author")
        let links = schema.joinTables(involving: novel)
        let table = try #require(links.first?.table)
        func value(_ entity: EntityDescription) -> [StoredValue] { [StoredValue](repeating: .null, count: entity.storedValueCount) }

        var changes = StoreChangeSet()
        changes.deletes = [.init(entity: novel, key: 7, expectedVersion: 2), .init(entity: author, key: 8, expectedVersion: 1)]
        changes.updates = [
            .init(entity: novel, key: 1, expectedVersion: 1, changes: [(0, .integer(1))]),
            .init(entity: novel, key: 2, expectedVersion: 1, changes: [(0, .integer(2)), (1, .null)]),
            .init(entity: novel, key: 3, expectedVersion: 1, changes: [(0, .integer(3))]),
        ]
        changes.inserts = [
            .init(entity: novel, key: 10, values: value(novel)), .init(entity: novel, key: 11, values: value(novel)),
            .init(entity: tag, key: 12, values: value(tag)), .init(entity: novel, key: 13, values: value(novel)),
        ]
        changes.linkDeletes = [.init(table: table, source: 1, target: 2)]
        changes.linkInserts = [.init(table: table, source: 10, target: 12), .init(table: table, source: 13, target: 12)]

        let planned = sql.statements(for: changes)
        let expectedSteps: [SQLGenerator.ChangeStep] =
            [.delete(0)] + links.map { _ in .deleteLinks(0) } + [.delete(1)] + schema.joinTables(involving: author).map { _ in .deleteLinks(1) }
            + [.update(0), .update(1), .update(2), .insert(0..<2), .insert(2..<3), .insert(3..<4), .deleteLink(0), .insertLink(0), .insertLink(1)]
        #expect(planned.map(\.step) == expectedSteps)
        // Text by step, from the generator's own statements; same shapes share one text.
        for statement in planned {
            switch statement.step {
            case .delete(let i): #expect(statement.sql == sql.delete(changes.deletes[i].entity))
            case .deleteLinks: #expect(statement.sql.hasPrefix("DELETE FROM"))
            case .deleteKeys, .deleteLinksOfKeys: Issue.record("A set read outside its transaction is deleted row by row, with versions")
            case .update(let i): #expect(statement.sql == sql.update(novel, columns: changes.updates[i].changes.map(\.index)))
            case .insert(let rows): #expect(statement.sql == sql.insert(changes.inserts[rows.lowerBound].entity))
            case .deleteLink: #expect(statement.sql == sql.deleteLink(table))
            case .insertLink: #expect(statement.sql == sql.insertLink(table))
            }
            #expect(statement.sql.contains("?") != numbered)
        }
        #expect(planned[planned.firstIndex { $0.step == .update(0) }!].sql == planned[planned.firstIndex { $0.step == .update(2) }!].sql)
        // Deletes and updates must change their row; the rest may change any number.
        #expect(SQLGenerator.ChangeStep.delete(1).rowThatMustChange(in: changes)?.key == 8)
        #expect(SQLGenerator.ChangeStep.update(2).rowThatMustChange(in: changes)?.key == 3)
        #expect(SQLGenerator.ChangeStep.insert(0..<2).rowThatMustChange(in: changes) == nil)
        #expect(SQLGenerator.ChangeStep.deleteLinks(0).rowThatMustChange(in: changes) == nil)
    }

    @Test("A change set whose versions were read in its transaction deletes by key sets: each entity's run in groups of keysPerDelete, each group with its join rows", arguments: [false, true])
    func changeSetDeletesByKeys(numbered: Bool) throws {
        let schema = try Self.graphSchema()
        let sql = SQLGenerator(schema: schema, dialect: numbered ? NumberedDialect() : SQLiteDialect())
        let novel = try schema.requireEntity(named: "Novel"), author = try schema.requireEntity(named: "Author")
        let group = SQLGenerator.keysPerDelete
        var changes = StoreChangeSet()
        changes.versionsReadInTransaction = true
        changes.deletes = (0..<(2 * group + 5)).map { .init(entity: novel, key: Int64($0 + 1), expectedVersion: 1) } + [.init(entity: author, key: 9, expectedVersion: 3)]
        changes.updates = [.init(entity: author, key: 1, expectedVersion: 1, changes: [(0, .integer(1))])]

        let planned = sql.statements(for: changes)
        let novelLinks = schema.joinTables(involving: novel), authorLinks = schema.joinTables(involving: author)
        #expect(!novelLinks.isEmpty)
        let runs = [0..<group, group..<(2 * group), (2 * group)..<(2 * group + 5)]
        let last = 2 * group + 5
        var expected: [SQLGenerator.ChangeStep] = []
        for range in runs { expected += [.deleteKeys(range)] + novelLinks.map { _ in .deleteLinksOfKeys(range) } }
        expected += [.deleteKeys(last..<(last + 1))] + authorLinks.map { _ in .deleteLinksOfKeys(last..<(last + 1)) }
        expected += [.update(0)]
        #expect(planned.map(\.step) == expected)
        for statement in planned {
            switch statement.step {
            case .deleteKeys(let range):
                #expect(statement.sql == sql.deleteKeys(changes.deletes[range.lowerBound].entity))
                #expect(statement.step.rowsThatMustChange == range.count)
                #expect(statement.sql.contains(numbered ? "$\(group))" : "?)") && !statement.sql.contains(numbered ? "$\(group + 1)" : "Z_OPT"))
            case .deleteLinksOfKeys: #expect(statement.sql.hasPrefix("DELETE FROM") && statement.step.rowsThatMustChange == nil)
            case .update: #expect(statement.step.rowsThatMustChange == nil)
            default: Issue.record("unexpected \(statement.step)")
            }
        }
    }
}
