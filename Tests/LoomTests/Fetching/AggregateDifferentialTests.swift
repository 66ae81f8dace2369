import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

/// One truth for values and aggregates: random libraries and random grouped, distinct and
/// windowed queries give the same rows from SQL (SQLite store), from the in-memory aggregator
/// (in-memory store), and from a context computing them over unsaved changes.
@MainActor
@Suite("One truth for aggregates")
struct AggregateDifferentialTests {
    @Test("Random aggregate queries: SQLite, the in-memory store and unsaved changes agree", arguments: DifferentialTests.seeds)
    func agree(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let graph = GraphPlan(&random)
        let edits = (0..<Int.random(in: 3...12, using: &random)).map { _ in Edit(&random) }
        let plans = (0..<40).map { _ in AggregatePlan(&random) }

        var answers: [StoreKind: (store: [[[StoredValue]]], before: [[FetchedValues]], pending: [[FetchedValues]], saved: [[FetchedValues]])] = [:]
        for kind in StoreKind.availableCases {
            let container = try kind.makeGraphContainer()
            let context = container.viewContext
            var world = try graph.build(in: context)
            try context.save()
            let entity = try #require(container.coordinator.schema.entity(named: "Novel"))
            let store = try plans.map { try container.coordinator.store.aggregate($0.storeQuery(entity)) }
            let before = try plans.map { try context.fetch($0.request) }
            for edit in edits { edit.apply(to: &world, in: context) }
            context.processPendingChanges()
            let pending = try plans.map { try context.fetch($0.request) }
            try context.save()
            let saved = try container.newBackgroundContext().performAndWait { context in try plans.map { try context.fetch($0.request) } }
            answers[kind] = (store, before, pending, saved)
        }
        let sql = try #require(answers[.sqlite]), memory = try #require(answers[.inMemory])
        for (i, plan) in plans.enumerated() {
            #expect(sql.store[i] == memory.store[i], "seed \(seed), store queries: \(plan)")
            #expect(sql.before[i] == memory.before[i], "seed \(seed), before the edits: \(plan)")
            #expect(sql.saved[i] == memory.saved[i], "seed \(seed), after the save: \(plan)")
            #expect(sql.pending[i] == sql.saved[i], "seed \(seed), SQLite, unsaved vs saved: \(plan)")
            #expect(memory.pending[i] == memory.saved[i], "seed \(seed), in memory, unsaved vs saved: \(plan)")
        }
        let informative = plans.indices.filter { sql.saved[$0].count > 1 }.count
        #expect(informative > plans.count / 3, "seed \(seed): too many queries return one row or none")
    }
}

/// A random values query on `Novel`, as an SPI query (with a random predicate) and as the
/// public request (without one) made of the same choices.
struct AggregatePlan: CustomStringConvertible {
    /// What a property or group can read: a node and the same thing as a key path.
    struct Source {
        let name: String
        let node: PredicateNode
        let keyPath: any PartialKeyPath<Novel> & Sendable
        let isNumeric: Bool
    }

    static let sources: [Source] = {
        func novel(_ name: String) -> PredicateNode { Query.attribute("Novel", name) }
        let author = Query.relationship("Novel", "author")
        return [
            Source(name: "pages", node: novel("pages"), keyPath: \Novel.pages, isNumeric: true),
            Source(name: "year", node: novel("year"), keyPath: \Novel.year, isNumeric: true),
            Source(name: "title", node: novel("title"), keyPath: \Novel.title, isNumeric: false),
            Source(name: "author.rating", node: .toOne(author, Query.attribute("Author", "rating")), keyPath: \Novel.author?.rating, isNumeric: true),
            Source(name: "author.name", node: .toOne(author, Query.attribute("Author", "name")), keyPath: \Novel.author?.name, isNumeric: false),
            Source(name: "author.born", node: .toOne(author, Query.attribute("Author", "born")), keyPath: \Novel.author?.born, isNumeric: false),
            Source(name: "author.publisher.name", node: .toOne(author, .toOne(Query.relationship("Author", "publisher"), Query.attribute("Publisher", "name"))),
                   keyPath: \Novel.author?.publisher?.name, isNumeric: false),
        ]
    }()

    enum Column {
        case value(Int)
        case countRows
        case aggregate(AggregateQuery.Function, Int)
    }

    var groups: [Int] = []
    var columns: [Column] = []
    var distinct = false
    var sorts: [(column: Int, ascending: Bool)] = []
    var offset = 0
    var limit: Int?
    var predicate: PredicateNode?

    init(_ random: inout SeededGenerator) {
        let sources = Self.sources
        // Grouped and plain in equal measure; plain ones are often distinct.
        if Bool.random(using: &random) {
            let groupCount = Int.random(in: 0...2, using: &random)
            groups = Array(Set((0..<groupCount).map { _ in Int.random(in: 0..<sources.count, using: &random) })).sorted()
            columns = groups.filter { _ in Bool.random(using: &random) }.map(Column.value)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let source = Int.random(in: 0..<sources.count, using: &random)
                let numeric = sources[source].isNumeric
                switch Int.random(in: 0..<6, using: &random) {
                case 0: columns.append(.countRows)
                case 1: columns.append(.aggregate(.count, source))
                case 2: columns.append(.aggregate(numeric ? .sum : .min, source))
                case 3: columns.append(.aggregate(numeric ? .average : .max, source))
                case 4: columns.append(.aggregate(.min, source))
                default: columns.append(.aggregate(.max, source))
                }
            }
        } else {
            let count = Int.random(in: 1...3, using: &random)
            columns = (0..<count).map { _ in .value(Int.random(in: 0..<sources.count, using: &random)) }
            distinct = Int.random(in: 0..<3, using: &random) > 0
        }
        // Two properties must not share a name.
        var seen: Set<String> = []
        columns = columns.filter { seen.insert(Self.name(of: $0)).inserted }
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            sorts.append((Int.random(in: 0..<columns.count, using: &random), Bool.random(using: &random)))
        }
        if Int.random(in: 0..<4, using: &random) == 0 {
            offset = Int.random(in: 0...3, using: &random)
            limit = Bool.random(using: &random) ? Int.random(in: 0...4, using: &random) : nil
        }
        if Bool.random(using: &random) { predicate = Query.predicate("Novel", depth: 2, &random) }
    }

    static func name(of column: Column) -> String {
        switch column {
        case .value(let s): sources[s].name
        case .countRows: "count"
        case .aggregate(let f, let s): "\(f.rawValue)(\(sources[s].name))"
        }
    }

    func storeQuery(_ entity: EntityDescription) -> AggregateQuery {
        let sources = Self.sources
        return AggregateQuery(
            entity: entity, predicate: predicate,
            columns: columns.map { column in
                switch column {
                case .value(let s): .value(sources[s].node)
                case .countRows: .countRows
                case .aggregate(let f, let s): .aggregate(f, sources[s].node)
                }
            },
            groupBy: groups.map { sources[$0].node }, isDistinct: distinct,
            sortKeys: sorts.map { AggregateQuery.SortKey(column: $0.column, ascending: $0.ascending) },
            fetchOffset: offset, fetchLimit: limit)
    }

    var request: PropertyFetchRequest<Novel> {
        let sources = Self.sources
        let properties: [FetchedProperty<Novel>] = columns.map { column in
            switch column {
            case .value(let s): .value(sources[s].keyPath)
            case .countRows: .count()
            case .aggregate(.count, let s): .count(of: sources[s].keyPath, as: Self.name(of: column))
            case .aggregate(.sum, let s): .sum(sources[s].keyPath)
            case .aggregate(.min, let s): .min(sources[s].keyPath)
            case .aggregate(.max, let s): .max(sources[s].keyPath)
            case .aggregate(_, let s): .average(sources[s].keyPath)
            }
        }
        let names = columns.map(Self.name(of:))
        var request = PropertyFetchRequest<Novel>(properties: properties, groupBy: groups.map { sources[$0].keyPath },
                                                  sortBy: sorts.map { ResultSort(names[$0.column], order: $0.ascending ? .forward : .reverse) },
                                                  fetchLimit: limit, fetchOffset: offset)
        request.returnsDistinctResults = distinct
        return request
    }

    var description: String {
        "\(columns.map(Self.name(of:))) group by \(groups.map { Self.sources[$0].name }) distinct: \(distinct) sort: \(sorts) window: \(offset), \(String(describing: limit)) where \(predicate.map { "\($0)" } ?? "-")"
    }
}
