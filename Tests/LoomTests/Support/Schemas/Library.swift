import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

// Authors, books and tags: relationships of every kind, renamed from version to version.

/// Relationships of every storage kind, before and after renames.
enum LibraryRelsV1 {
    @Model final class Author {
        var name: String
        @Relationship(inverse: \Book.author) var books: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var author: Author?
        @Relationship(inverse: \Tag.books) var tags: Set<Tag> = []
        init(title: String) { self.title = title }
    }

    @Model final class Tag {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Author.self, Book.self, Tag.self]) }
}

/// `Author.books` (ordered) renamed `works`, `Book.author` (its to-one inverse) `writer`, and
/// `Book.tags` (many-to-many, the side that names the join table) `labels`.
enum LibraryRelsV2 {
    @Model final class Author {
        var name: String
        @Relationship(inverse: \Book.writer, originalName: "books") var works: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "author") var writer: Author?
        @Relationship(inverse: \Tag.books, originalName: "tags") var labels: Set<Tag> = []
        init(title: String) { self.title = title }
    }

    @Model final class Tag {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Author.self, Book.self, Tag.self]) }
}

/// V2 with entities renamed: `Author` → `Writer`, and `Tag` → `Audience`, which now sorts
/// before `Book` and so names the many-to-many's join table from its side.
enum LibraryRelsV3 {
    @Model(originalName: "Author") final class Writer {
        var name: String
        @Relationship(inverse: \Book.writer) var works: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var writer: Writer?
        @Relationship(inverse: \Audience.books) var labels: Set<Audience> = []
        init(title: String) { self.title = title }
    }

    @Model(originalName: "Tag") final class Audience {
        var name: String
        var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Writer.self, Book.self, Audience.self]) }
}

extension LibraryRelsV1 {
    /// Ann's three books in a custom order, two of them tagged; saved, the container closed.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let ann = Author(name: "Ann")
            let books = ["B1", "B2", "B3"].map { Book(title: $0) }
            let tags = ["red", "blue"].map { Tag(name: $0) }
            context.insert(ann)
            books.forEach(context.insert)
            tags.forEach(context.insert)
            ann.books = [books[1], books[0], books[2]]
            books[0].tags = [tags[0]]
            books[1].tags = [tags[0], tags[1]]
        }
        try await container.close()
    }
}

extension LibraryRelsV3 {
    /// Reads every link of ``LibraryRelsV1/fill(_:)``'s objects after the renames, adds a new
    /// audience to B3 and saves; the writer's key last.
    static func readAndAddGreen(_ container: PersistentContainer) async throws -> [String] {
        try await container.save { context in
            let writer = try #require(try context.fetch(FetchRequest<Writer>()).first)
            let books = try context.fetch(FetchRequest<Book>(sortBy: [SortDescriptor(\.title)]))
            let audiences = try context.fetch(FetchRequest<Audience>(sortBy: [SortDescriptor(\.name)]))
            // New objects take keys after the saved ones.
            let newcomer = Audience(name: "green")
            context.insert(newcomer)
            books[2].labels.insert(newcomer)
            return [
                writer.works.map(\.title).joined(separator: ","),
                books.map { "\($0.title):\($0.writer?.name ?? "-"):\($0.labels.map(\.name).sorted().joined(separator: "+"))" }.joined(separator: " "),
                audiences.map { "\($0.name):\($0.books.map(\.title).sorted().joined(separator: "+"))" }.joined(separator: " "),
                "\(writer.objectID.erased.primaryKey)",
            ]
        }
    }

    static let expectedAfterGreen = ["B2,B1,B3", "B1:Ann:red B2:Ann:blue+red B3:Ann:green", "blue:B2 red:B1+B2", "1"]

    /// The saved keys kept; the key allocator's position moved with the entity (a new object
    /// does not take a saved key).
    static func expectKeysKept(_ container: PersistentContainer) async throws {
        let audiences = try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Audience>(sortBy: [SortDescriptor(\.name)])).map { ($0.name, $0.objectID.erased.primaryKey) }
        }
        #expect(audiences.map(\.0) == ["blue", "green", "red"])
        #expect(audiences[0].1 == 2 && audiences[2].1 == 1 && audiences[1].1 > 2)
    }
}
