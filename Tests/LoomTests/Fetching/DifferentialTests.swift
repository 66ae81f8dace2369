import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

/// One truth: random object graphs and random predicates from the grammar Loom supports give
/// the same answers in SQL (SQLite store), in the in-memory evaluator (in-memory store), and
/// in a context holding the same changes unsaved (the store's answer corrected in memory).
@MainActor
@Suite("One truth")
struct DifferentialTests {
    nonisolated static let seeds: [UInt64] = Array(1...16)

    @Test("Random graphs and predicates: SQLite, the in-memory store and unsaved changes agree", arguments: seeds)
    func agree(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let graph = GraphPlan(&random)
        let edits = (0..<Int.random(in: 3...12, using: &random)).map { _ in Edit(&random) }
        let queries = (0..<30).map { _ in Query("Novel", &random) } + (0..<30).map { _ in Query("Author", &random) } + (0..<10).map { _ in Query("Tag", &random) }

        var answers: [StoreKind: (before: [[String]], pending: [[String]], saved: [[String]])] = [:]
        for kind in StoreKind.availableCases {
            let container = try kind.makeGraphContainer()
            let context = container.viewContext
            var world = try graph.build(in: context)
            try context.save()
            let before = try queries.map { try $0.run(in: context) }
            for edit in edits { edit.apply(to: &world, in: context) }
            context.processPendingChanges()
            let pending = try queries.map { try $0.run(in: context) }
            try context.save()
            let fresh = container.newBackgroundContext()
            let saved = try fresh.performAndWait { context in try queries.map { try $0.run(in: context) } }
            answers[kind] = (before, pending, saved)
        }
        let sql = try #require(answers[.sqlite]), memory = try #require(answers[.inMemory])
        for (i, query) in queries.enumerated() {
            #expect(sql.before[i] == memory.before[i], "seed \(seed), before the edits: \(query)")
            #expect(sql.saved[i] == memory.saved[i], "seed \(seed), after the save: \(query)")
            #expect(sql.pending[i] == sql.saved[i], "seed \(seed), SQLite, unsaved vs saved: \(query)")
            #expect(memory.pending[i] == memory.saved[i], "seed \(seed), in memory, unsaved vs saved: \(query)")
            if let postgres = answers[.postgres] {
                #expect(postgres.before[i] == memory.before[i], "seed \(seed), PostgreSQL, before the edits: \(query)")
                #expect(postgres.saved[i] == memory.saved[i], "seed \(seed), PostgreSQL, after the save: \(query)")
                #expect(postgres.pending[i] == postgres.saved[i], "seed \(seed), PostgreSQL, unsaved vs saved: \(query)")
            }
        }
        // The grammar must not be trivial: most queries match something and not everything.
        let informative = queries.indices.filter { !sql.saved[$0].isEmpty }.count
        #expect(informative > queries.count / 3, "seed \(seed): too many queries match nothing")
    }
}

/// The random library both stores are filled with.
struct GraphPlan {
    struct AuthorPlan { var rating: Int; var born: Double?; var publisher: Int?; var mentor: Int? }
    struct NovelPlan { var pages: Int; var year: Int?; var author: Int?; var tags: [Int] }
    var authors: [AuthorPlan] = []
    var novels: [NovelPlan] = []

    init(_ random: inout SeededGenerator) {
        let authorCount = Int.random(in: 3...9, using: &random)
        for _ in 0..<authorCount {
            authors.append(AuthorPlan(
                rating: Int.random(in: 0...5, using: &random),
                born: Bool.random(using: &random) ? Double(Int.random(in: -2_000_000_000...2_000_000_000, using: &random)) : nil,
                publisher: Int.random(in: 0...4, using: &random) < 2 ? nil : Int.random(in: 0..<3, using: &random),
                mentor: Int.random(in: 0...9, using: &random) < 3 ? Int.random(in: 0..<authorCount, using: &random) : nil))
        }
        for _ in 0..<Int.random(in: 2...16, using: &random) {
            novels.append(NovelPlan(
                pages: Int.random(in: 0...500, using: &random),
                year: Int.random(in: 0...9, using: &random) < 3 ? nil : Int.random(in: 1900...2024, using: &random),
                author: Int.random(in: 0...9, using: &random) < 2 ? nil : Int.random(in: 0..<authorCount, using: &random),
                tags: (0..<4).filter { _ in Int.random(in: 0...2, using: &random) == 0 }))
        }
    }

    /// The objects made from the plan, by index.
    struct World {
        var publishers: [Publisher]
        var authors: [Author]
        var novels: [Novel]
        var tags: [Tag]
        var counter = 0
    }

    func build(in context: ManagedObjectContext) throws -> World {
        let publishers = (0..<3).map { Publisher(name: "P\($0)") }
        let tags = (0..<4).map { Tag(name: "T\($0)") }
        for p in publishers { context.insert(p) }
        for t in tags { context.insert(t) }
        let authors = authors.indices.map { Author(name: "A\($0)", rating: self.authors[$0].rating) }
        for (a, plan) in zip(authors, self.authors) {
            context.insert(a)
            a.born = plan.born.map { Date(timeIntervalSinceReferenceDate: $0) }
            a.publisher = plan.publisher.map { publishers[$0] }
        }
        for (a, plan) in zip(authors, self.authors) { a.mentor = plan.mentor.map { authors[$0] } }
        var novels: [Novel] = []
        for (i, plan) in self.novels.enumerated() {
            let n = Novel(title: "N\(i)", pages: plan.pages)
            context.insert(n)
            n.year = plan.year
            n.author = plan.author.map { authors[$0] }
            n.tags = Set(plan.tags.map { tags[$0] })
            novels.append(n)
        }
        return World(publishers: publishers, authors: authors, novels: novels, tags: tags)
    }
}

/// One unsaved change, chosen at random and applied the same way to both stores.
struct Edit {
    let kind: Int
    let a: Int, b: Int, c: Int

    init(_ random: inout SeededGenerator) {
        kind = Int.random(in: 0..<10, using: &random)
        a = Int.random(in: 0..<1000, using: &random)
        b = Int.random(in: 0..<1000, using: &random)
        c = Int.random(in: 0..<1000, using: &random)
    }

    func apply(to world: inout GraphPlan.World, in context: ManagedObjectContext) {
        let authors = world.authors.filter { !$0.isDeleted }
        let novels = world.novels.filter { !$0.isDeleted }
        let tags = world.tags.filter { !$0.isDeleted }
        func pick<T>(_ items: [T], _ n: Int) -> T? { items.isEmpty ? nil : items[n % items.count] }
        switch kind {
        case 0: pick(authors, a)?.rating = b % 6
        case 1: pick(novels, a)?.pages = b % 501
        case 2: pick(novels, a)?.year = c % 3 == 0 ? nil : 1900 + b % 125
        case 3: pick(novels, a)?.author = c % 4 == 0 ? nil : pick(authors, b)
        case 4:
            guard let novel = pick(novels, a), let tag = pick(tags, b) else { return }
            if novel.tags.contains(tag) { novel.tags.remove(tag) } else { novel.tags.insert(tag) }
        case 5:
            world.counter += 1
            let n = Novel(title: "New\(world.counter)", pages: b % 501, author: pick(authors, c))
            context.insert(n)
            if let tag = pick(tags, a) { n.tags = [tag] }
            world.novels.append(n)
        case 6:
            world.counter += 1
            let author = Author(name: "New\(world.counter)", rating: b % 6)
            context.insert(author)
            author.mentor = pick(authors, c)
            world.authors.append(author)
        case 7: if let novel = pick(novels, a) { context.delete(novel) }
        case 8: if let author = pick(authors, a), author.publisher == nil || c % 2 == 0 { author.publisher = nil; context.delete(author) }
        default: if let tag = pick(tags, a), b % 3 == 0 { context.delete(tag) } else { pick(authors, a)?.mentor = pick(authors, c) }
        }
    }
}

/// A random predicate on one entity, as the nodes `#Predicate` translates to.
struct Query: CustomStringConvertible {
    let entity: String
    let node: PredicateNode

    init(_ entity: String, _ random: inout SeededGenerator) {
        self.entity = entity
        self.node = Query.predicate(entity, depth: 3, &random)
    }

    var description: String { "\(entity) where \(node)" }

    func run(in context: ManagedObjectContext) throws -> [String] {
        let sortName = entity == "Novel" ? "title" : "name"
        let objects = try context.fetch(DynamicFetchRequest(entityName: entity, predicate: node, sortBy: [(sortName, true)]))
        return objects.map { object in
            let dynamic = object as? DynamicObject
            if let novel = object as? Novel { return novel.title }
            if let author = object as? Author { return author.name }
            if let tag = object as? Tag { return tag.name }
            return dynamic.map { "\($0[sortName] ?? .null)" } ?? "?"
        }
    }

    // MARK: The grammar

    static let slots: [String: [String: Int]] = {
        let schema = try! Schema(StoreKind.graphTypes)
        var out: [String: [String: Int]] = [:]
        for entity in schema.entities {
            for name in entity.attributes.map(\.name) + entity.relationships.map(\.name) {
                if let slot = entity.storedValueIndex(named: name) { out[entity.name, default: [:]][name] = slot }
            }
        }
        return out
    }()

    static func attribute(_ entity: String, _ name: String) -> PredicateNode { .attribute(slots[entity]![name]!) }
    static func relationship(_ entity: String, _ name: String) -> RelationshipReference { RelationshipReference(entityName: entity, name: name) }
    static func int(_ v: Int) -> PredicateNode { .constant(.integer(Int64(v))) }

    static func comparison(_ random: inout SeededGenerator) -> PredicateNode.ComparisonOperator {
        [.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual].randomElement(using: &random)!
    }

    static func predicate(_ entity: String, depth: Int, _ random: inout SeededGenerator) -> PredicateNode {
        let choice = Int.random(in: 0..<10, using: &random)
        if depth > 0 && choice < 2 {
            let l = predicate(entity, depth: depth - 1, &random), r = predicate(entity, depth: depth - 1, &random)
            return Bool.random(using: &random) ? .and(l, r) : .or(l, r)
        }
        if depth > 0 && choice == 2 { return .not(predicate(entity, depth: depth - 1, &random)) }
        return atom(entity, depth: depth, &random)
    }

    static func atom(_ entity: String, depth: Int, _ random: inout SeededGenerator) -> PredicateNode {
        let deeper = max(depth - 1, 0)
        switch entity {
        case "Novel":
            switch Int.random(in: 0..<(depth > 0 ? 12 : 6), using: &random) {
            case 0: return .compare(comparison(&random), attribute("Novel", "pages"), int(Int.random(in: 0...500, using: &random)))
            case 1: return .compare(Bool.random(using: &random) ? .equal : .notEqual, attribute("Novel", "year"), .constant(.null))
            case 2: return .compare(comparison(&random), .coalesce(attribute("Novel", "year"), int(0)), int(Int.random(in: 1900...2024, using: &random)))
            case 3: return .string(.contains, attribute("Novel", "title"), .constant(.text(String(Int.random(in: 0...9, using: &random)))))
            case 4: return .compare(Bool.random(using: &random) ? .equal : .notEqual, attribute("Novel", "author"), .constant(.null))
            case 5: return .compare(comparison(&random), .relatedCount(relationship("Novel", "tags")), int(Int.random(in: 0...3, using: &random)))
            case 6, 7: return .toOne(relationship("Novel", "author"), atom("Author", depth: deeper, &random))
            case 8: return .anyRelated(relationship("Novel", "tags"), atom("Tag", depth: deeper, &random))
            case 9: return .allRelated(relationship("Novel", "tags"), atom("Tag", depth: deeper, &random))
            case 10: return .compare(comparison(&random), .toOne(relationship("Novel", "author"), attribute("Author", "rating")), int(Int.random(in: 0...5, using: &random)))
            default:
                // What `$0.author?.publisher?.name == "P1"` translates to.
                return .compare(.equal, .toOne(relationship("Novel", "author"), .toOne(relationship("Author", "publisher"), attribute("Publisher", "name"))),
                                .constant(.text("P\(Int.random(in: 0...2, using: &random))")))
            }
        case "Author":
            switch Int.random(in: 0..<(depth > 0 ? 12 : 5), using: &random) {
            case 0: return .compare(comparison(&random), attribute("Author", "rating"), int(Int.random(in: 0...5, using: &random)))
            case 1: return .compare(Bool.random(using: &random) ? .equal : .notEqual, attribute("Author", "born"), .constant(.null))
            case 2: return .compare(comparison(&random), attribute("Author", "born"), .constant(.real(Double(Int.random(in: -2_000_000_000...2_000_000_000, using: &random)))))
            case 3: return .compare(comparison(&random), .relatedCount(relationship("Author", "novels")), int(Int.random(in: 0...3, using: &random)))
            case 4: return .compare(comparison(&random), .relatedCount(relationship("Author", "students")), int(Int.random(in: 0...2, using: &random)))
            case 5, 6: return .anyRelated(relationship("Author", "novels"), atom("Novel", depth: deeper, &random))
            case 7: return .allRelated(relationship("Author", "novels"), atom("Novel", depth: deeper, &random))
            case 8: return .toOne(relationship("Author", "mentor"), atom("Author", depth: deeper, &random))
            case 9: return .anyRelated(relationship("Author", "students"), atom("Author", depth: deeper, &random))
            case 10: return .compare(.equal, .toOne(relationship("Author", "publisher"), attribute("Publisher", "name")), .constant(.text("P\(Int.random(in: 0...2, using: &random))")))
            default: return .nullPropagating(attribute("Author", "mentor"), .compare(comparison(&random), .toOne(relationship("Author", "mentor"), attribute("Author", "rating")), attribute("Author", "rating")))
            }
        default:
            switch Int.random(in: 0..<(depth > 0 ? 5 : 2), using: &random) {
            case 0: return .compare(.equal, attribute("Tag", "name"), .constant(.text("T\(Int.random(in: 0...3, using: &random))")))
            case 1: return .compare(comparison(&random), .relatedCount(relationship("Tag", "novels")), int(Int.random(in: 0...3, using: &random)))
            case 2, 3: return .anyRelated(relationship("Tag", "novels"), atom("Novel", depth: deeper, &random))
            default: return .allRelated(relationship("Tag", "novels"), atom("Novel", depth: deeper, &random))
            }
        }
    }
}
