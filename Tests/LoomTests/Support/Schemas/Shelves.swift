import Foundation
import Loom
@_spi(LoomStore) import LoomCore

// The versioned schemas of a shelf of books and the plan between them.

/// Three versions of a shelf of books, in SwiftData's shape: one enum per version.
enum ShelfV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Book.self] }

    @Model final class Book {
        var title: String
        var number: Int
        var author: String?

        init(title: String, number: Int, author: String? = nil) {
            self.title = title
            self.number = number
            self.author = author
        }
    }
}

/// `title` renamed `name`; `pages` added; a new entity.
enum ShelfV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Book.self, Shelf.self] }

    @Model final class Book {
        @Attribute(originalName: "title") var name: String
        var number: Int
        var author: String?
        var pages: Int?

        init(name: String, number: Int) {
            self.name = name
            self.number = number
        }
    }

    @Model final class Shelf {
        var label: String
        init(label: String) { self.label = label }
    }
}

/// `name` made unique (V1 has duplicates: the custom stage removes them first); `pages`
/// required with a default (the custom stage fills it after).
enum ShelfV3: VersionedSchema {
    static let versionIdentifier = Schema.Version(3, 0, 0)
    static var models: [any PersistentModel.Type] { [Book.self, Shelf.self] }

    @Model final class Book {
        @Attribute(.unique) var name: String
        var number: Int
        var author: String?
        var pages: Int = 0

        init(name: String, number: Int) {
            self.name = name
            self.number = number
        }
    }

    @Model final class Shelf {
        var label: String
        init(label: String) { self.label = label }
    }
}

/// The V2 → V3 stage's code, shared by the plans below.
enum ShelfStage {
    /// Keeps, of the books sharing a name, the one with the lowest number.
    @Sendable static func removeDuplicates(_ context: ManagedObjectContext) throws {
        var seen: Set<String> = []
        for book in try context.fetch(FetchRequest<ShelfV2.Book>(sortBy: [SortDescriptor(\.name), SortDescriptor(\.number)])) {
            if !seen.insert(book.name).inserted { context.delete(book) }
        }
    }

    /// Gives every book its page count, and puts a shelf in.
    @Sendable static func fillPages(_ context: ManagedObjectContext) throws {
        for book in try context.fetch(FetchRequest<ShelfV3.Book>()) { book.pages = book.number % 500 + 1 }
        context.insert(ShelfV3.Shelf(label: "migrated"))
    }
}

enum ShelfPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ShelfV1.self, ShelfV2.self, ShelfV3.self] }
    static var stages: [MigrationStage] {
        [
            .lightweight(fromVersion: ShelfV1.self, toVersion: ShelfV2.self),
            .custom(fromVersion: ShelfV2.self, toVersion: ShelfV3.self, willMigrate: ShelfStage.removeDuplicates, didMigrate: ShelfStage.fillPages),
        ]
    }
}

/// V1's `Book` with one more attribute: a version no plan lists.
enum StrayBook {
    @Model final class Book {
        var title: String
        var number: Int
        var author: String?
        var isbn: String?

        init(title: String, number: Int) {
            self.title = title
            self.number = number
        }
    }
}

/// V3 with `name` no longer unique: a uniqueness constraint removed.
enum ShelfV4: VersionedSchema {
    static let versionIdentifier = Schema.Version(4, 0, 0)
    static var models: [any PersistentModel.Type] { [Book.self, Shelf.self] }

    @Model final class Book {
        var name: String
        var number: Int
        var author: String?
        var pages: Int = 0
        init(name: String, number: Int) {
            self.name = name
            self.number = number
        }
    }

    @Model final class Shelf {
        var label: String
        init(label: String) { self.label = label }
    }
}
