import Foundation
import Loom
import Testing

@MainActor
@Suite("Ordered many-to-many and nested deletes", .timeLimit(.minutes(5)))
struct OrderedManyToManyTests {
    func container(_ kind: StoreKind) throws -> PersistentContainer {
        let schema = try Schema(Playlist.self, Song.self)
        switch kind {
        case .inMemory: return PersistentContainer(store: InMemoryStore(schema: schema))
        case .sqlite: return PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "music.loom"), schema: schema))
        case .postgres: return PersistentContainer(store: try PostgresServer.makeStore(schema))
        }
    }

    @Test("An ordered many-to-many keeps each playlist's order; the songs see every playlist", arguments: StoreKind.allCases)
    func orderedManyToMany(kind: StoreKind) throws {
        let container = try container(kind)
        let context = container.viewContext
        let a = Song(name: "a"), b = Song(name: "b"), c = Song(name: "c")
        let morning = Playlist(title: "morning"), night = Playlist(title: "night")
        context.insert(morning); context.insert(night)
        morning.songs = [c, a, b]
        night.songs = [b, c]
        #expect(b.playlists == [morning, night])
        try context.save()
        let read = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Playlist>(sortBy: [SortDescriptor(\.title)])).map { $0.songs.map(\.name).joined() }
        }
        #expect(read == ["cab", "bc"])
        morning.songs = [b, a]                     // reorder and drop c
        c.playlists.insert(morning)                // added from the other side: at the end
        #expect(morning.songs.map(\.name) == ["b", "a", "c"])
        try context.save()
        let again = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Playlist>(predicate: #Predicate { $0.title == "morning" })).first!.songs.map(\.name).joined()
        }
        #expect(again == "bac")
    }

    @Test("Delete rules applied in a child context reach the parent and the store", arguments: StoreKind.allCases)
    func childDeletes(kind: StoreKind) async throws {
        let container = try kind.makeGraphContainer()
        let context = container.viewContext
        let ann = Author(name: "Ann")
        let novel = Novel(title: "N", author: ann)
        novel.chapters = [Chapter(title: "c")]
        context.insert(novel)
        try context.save()
        let annID = ann.objectID
        let child = context.newChildContext()
        try await child.perform { context in
            context.delete(try context.existingObject(with: annID))   // cascades to the novel and its chapter
            try context.save()
        }
        #expect(ann.isDeleted && novel.isDeleted)
        let chaptersDeleted = novel.chapters.allSatisfy { $0.isDeleted }
        #expect(chaptersDeleted)
        try context.save()
        #expect(try context.count(for: FetchRequest<Chapter>()) == 0)
        #expect(try context.count(for: FetchRequest<Novel>()) == 0)
    }
}
