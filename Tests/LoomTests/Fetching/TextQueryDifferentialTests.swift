import Foundation
import Loom
@_spi(LoomStore) import LoomTools
import Testing

/// A text query read from a store file through ``ReadOnlyStore`` matches the same objects, in
/// the same order, as the equivalent `#Predicate` fetched through a context on that store.
@MainActor
@Suite("Text queries against #Predicate")
struct TextQueryDifferentialTests {
    let store: FilledGraphStore
    var url: URL { store.url }
    var container: PersistentContainer { store.container }

    init() throws { store = try FilledGraphStore() }

    static let born1950 = ISO8601DateFormatter().date(from: "1950-01-01T00:00:00Z")!

    /// Ann (Pan, rating 5, born 1940) wrote Dune (412 pages, 1965; fantasy, classic; reviews 5
    /// and 4) and Émile (180; classic; review 2); Bob (rating 2, born 1960, Ann's student) wrote
    /// Fog (90, 1990); Cy (rating 4) wrote nothing; Gulf (250) has no author.
    static func fill(_ context: ManagedObjectContext) throws {
        let pan = Publisher(name: "Pan")
        let ann = Author(name: "Ann", rating: 5), bob = Author(name: "Bob", rating: 2), cy = Author(name: "Cy", rating: 4)
        ann.born = ISO8601DateFormatter().date(from: "1940-03-01T00:00:00Z")
        bob.born = ISO8601DateFormatter().date(from: "1960-07-01T12:00:00Z")
        let dune = Novel(title: "Dune", pages: 412, author: ann), emile = Novel(title: "Émile", pages: 180, author: ann)
        let fog = Novel(title: "Fog", pages: 90, author: bob), gulf = Novel(title: "Gulf", pages: 250)
        dune.year = 1965
        fog.year = 1990
        let fantasy = Tag(name: "fantasy"), classic = Tag(name: "classic")
        context.insert(pan)
        for object in [ann, bob, cy] { context.insert(object) }
        for object in [dune, emile, fog, gulf] { context.insert(object) }
        for object in [fantasy, classic] { context.insert(object) }
        ann.publisher = pan
        bob.mentor = ann
        dune.tags = [fantasy, classic]
        emile.tags = [classic]
        for (stars, novel) in [(5, dune), (4, dune), (2, emile)] {
            let review = Review(text: "r", novel: novel)
            review.stars = stars
            context.insert(review)
        }
        try context.save()
    }

    /// The keys the text query reads from the store file.
    func textKeys(_ text: String) throws -> [Int64] {
        let store = try ReadOnlyStore(location: url.path)
        let query = try TextQuery(parsing: text, schema: store.schema)
        var keys: [Int64] = []
        try store.forEachRow(of: query) { key, _ in keys.append(key) }
        return keys
    }

    func check<Model: PersistentModel>(_ text: String, _ request: FetchRequest<Model>, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = try container.viewContext.fetch(request).map(\.objectID.primaryKey)
        let actual = try textKeys(text)
        #expect(!expected.isEmpty, "every query here matches something: \(text)", sourceLocation: sourceLocation)
        #expect(actual == expected, "\(text)", sourceLocation: sourceLocation)
    }

    func novels(_ predicate: Predicate<Novel>) -> FetchRequest<Novel> { FetchRequest(predicate: predicate) }
    func authors(_ predicate: Predicate<Author>) -> FetchRequest<Author> { FetchRequest(predicate: predicate) }

    @Test func comparisonsAndLogic() throws {
        try check(#"Novel where pages > 100 and year != nil"#, novels(#Predicate { $0.pages > 100 && $0.year != nil }))
        try check(#"Novel where year < 1970"#, novels(#Predicate { $0.year != nil && $0.year! < 1970 }))
        try check(#"Novel where year == nil or pages <= 90"#, novels(#Predicate { $0.year == nil || $0.pages <= 90 }))
        try check(#"Novel where not (pages > 100)"#, novels(#Predicate { !($0.pages > 100) }))
        try check(#"Novel where pages > 100 and not year == nil or title == "Fog""#, novels(#Predicate { ($0.pages > 100 && !($0.year == nil)) || $0.title == "Fog" }))
        try check(#"Author where name in ["Ann", "Cy", "Zed"]"#, authors(#Predicate { ["Ann", "Cy", "Zed"].contains($0.name) }))
        let born1950 = Self.born1950
        try check(#"Author where born >= "1950-01-01""#, authors(#Predicate { $0.born != nil && $0.born! >= born1950 }))
    }

    @Test func strings() throws {
        try check(#"Novel where title contains "u""#, novels(#Predicate { $0.title.contains("u") }))
        try check(#"Novel where title beginswith "F" or title hasPrefix "G""#, novels(#Predicate { $0.title.starts(with: "F") || $0.title.starts(with: "G") }))
        try check(#"Novel where title contains[cd] "emi""#, novels(#Predicate { $0.title.localizedStandardContains("emi") }))
        try check(#"Novel where title ==[c] "dune""#, novels(#Predicate { $0.title.localizedLowercase == "dune" }))
    }

    @Test func relationships() throws {
        try check(#"Novel where author.name == "Ann""#, novels(#Predicate { $0.author?.name == "Ann" }))
        try check(#"Novel where author == nil"#, novels(#Predicate { $0.author == nil }))
        try check(#"Novel where author.publisher.name == "Pan""#, novels(#Predicate { $0.author?.publisher?.name == "Pan" }))
        try check(#"Author where mentor.name == "Ann""#, authors(#Predicate { $0.mentor?.name == "Ann" }))
        try check(#"Novel where any tags.name == "classic""#, novels(#Predicate { $0.tags.contains { $0.name == "classic" } }))
        try check(#"Novel where all reviews.stars >= 3"#, novels(#Predicate { $0.reviews.allSatisfy { $0.stars >= 3 } }))
        try check(#"Author where any novels.pages > 300"#, authors(#Predicate { $0.novels.contains { $0.pages > 300 } }))
        try check(#"Novel where tags.@count == 0"#, novels(#Predicate { $0.tags.count == 0 }))
        try check(#"Author where count(novels) >= 2 or rating < 3"#, authors(#Predicate { $0.novels.count >= 2 || $0.rating < 3 }))
        try check(#"Novel where author.novels.@count > 1"#, novels(#Predicate { $0.author != nil && $0.author!.novels.count > 1 }))
    }

    @Test func sortAndWindow() throws {
        try check("Novel sort author.name desc, title limit 3 offset 1",
                  FetchRequest<Novel>(sortBy: [SortDescriptor(\.author?.name, order: .reverse), SortDescriptor(\.title)], fetchLimit: 3, fetchOffset: 1))
        try check("Novel where pages > 0 sort pages desc",
                  FetchRequest<Novel>(predicate: #Predicate { $0.pages > 0 }, sortBy: [SortDescriptor(\.pages, order: .reverse)]))
        try check("Author sort rating limit 2", FetchRequest<Author>(sortBy: [SortDescriptor(\.rating)], fetchLimit: 2))
    }
}

/// A SQLite store file of the graph models, filled by ``TextQueryDifferentialTests/fill(_:)``
/// and kept open by this process while the tests read it.
@MainActor
struct FilledGraphStore {
    let url = TemporaryDirectory.make().appending(path: "graph.loom")
    let container: PersistentContainer

    init() throws {
        container = PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(StoreKind.graphTypes)))
        try TextQueryDifferentialTests.fill(container.viewContext)
    }
}
