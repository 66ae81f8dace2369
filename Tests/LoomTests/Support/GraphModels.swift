import Foundation
import Loom

// A small library as an object graph: every kind of relationship and every delete rule.
//
//   Publisher 1 ──deny──▶ * Author            (to-many / to-one)
//   Author    1 ─cascade─▶ * Novel            (to-many / to-one)
//   Author    1 ───────── 1 Profile            (one-to-one)
//   Author    1 ───────── * Author             (self-referencing: mentor / students)
//   Novel     * ───────── * Tag                (many-to-many; Tag's side is noAction)
//   Novel     1 ─cascade─▶ [Chapter]           (ordered to-many)
//   Novel     1 ─cascade─▶ * Review            (the review's novel is required)

@Model final class Publisher {
    @Attribute(.unique) var name: String
    @Relationship(deleteRule: .deny, inverse: \Author.publisher) var authors: Set<Author> = []

    init(name: String) { self.name = name }
}

@Model final class Author {
    @Attribute(.unique) var name: String
    var rating: Int = 0
    var born: Date?
    var publisher: Publisher?
    @Relationship(deleteRule: .cascade, inverse: \Novel.author) var novels: Set<Novel> = []
    var profile: Profile?
    var mentor: Author?
    @Relationship(inverse: \Author.mentor) var students: Set<Author> = []

    init(name: String, rating: Int = 0) {
        self.name = name
        self.rating = rating
    }
}

@Model final class Profile {
    var bio: String
    @Relationship(inverse: \Author.profile) var author: Author?

    init(bio: String) { self.bio = bio }
}

@Model final class Novel {
    var title: String
    var pages: Int = 0
    var year: Int?
    var author: Author?
    @Relationship(inverse: \Tag.novels) var tags: Set<Tag> = []
    @Relationship(deleteRule: .cascade, inverse: \Chapter.novel) var chapters: [Chapter] = []
    @Relationship(deleteRule: .cascade, inverse: \Review.novel) var reviews: Set<Review> = []
    #Unique<Novel>([\.title, \.author])

    init(title: String, pages: Int = 0, author: Author? = nil) {
        self.title = title
        self.pages = pages
        self.author = author
    }
}

@Model final class Tag {
    @Attribute(.unique) var name: String
    @Relationship(deleteRule: .noAction) var novels: Set<Novel> = []

    init(name: String) { self.name = name }
}

@Model final class Chapter {
    var title: String
    var novel: Novel?

    init(title: String) { self.title = title }
}

@Model final class Review {
    var text: String
    var stars: Int = 3
    var novel: Novel

    init(text: String, novel: Novel) {
        self.text = text
        self.novel = novel
    }
}

extension StoreKind {
    /// The graph models' types.
    static var graphTypes: [any PersistentModel.Type] { [Publisher.self, Author.self, Profile.self, Novel.self, Tag.self, Chapter.self, Review.self] }

    /// A fresh, empty container of this kind for the graph models.
    func makeGraphContainer(trace: (@Sendable (String) -> Void)? = nil) throws -> PersistentContainer {
        let schema = try Schema(Self.graphTypes)
        switch self {
        case .inMemory:
            return PersistentContainer(store: InMemoryStore(schema: schema))
        case .sqlite:
            var options = SQLiteStore.Options()
            options.trace = trace
            return PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "graph.loom"), schema: schema, options: options))
        case .postgres:
            return PersistentContainer(store: try PostgresServer.makeStore(schema, trace: trace))
        }
    }
}

/// Collects the SQL statements a store runs, for tests that count queries.
///
/// `@unchecked Sendable`: `statements` is only read or written while `lock` is held.
final class StatementLog: @unchecked Sendable {
    private let lock = NSLock()
    private var statements: [String] = []

    var hook: @Sendable (String) -> Void { { [self] sql in lock.withLock { statements.append(sql) } } }

    /// The statements run so far that read Loom's data (not GRDB's connection set-up), after
    /// `reset()`.
    var selects: [String] { lock.withLock { statements.filter { $0.hasPrefix("SELECT") && !$0.contains("sqlite_master") } } }
    var all: [String] { lock.withLock { statements } }
    func reset() { lock.withLock { statements = [] } }
}
