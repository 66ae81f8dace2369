import Foundation
import Loom
@_spi(LoomStore) import LoomCore

// People, pets and books: relationships that change kind from version to version.

/// One-to-many relationships, one of them ordered.
enum HouseholdV1 {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.reader) var books: [Book] = []
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var reader: Person?
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Pet.owner` becomes to-many `owners` (so pets ↔ owners is many-to-many, and `Person.pets`
/// ordered); `Person.books` becomes unordered.
enum HouseholdV2 {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owners) var pets: [Pet] = []
        @Relationship(inverse: \Book.reader) var books: Set<Book> = []
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        @Relationship(originalName: "owner") var owners: Set<Person> = []
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        var reader: Person?
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Person.books` made to-one (`book`), and `Book.reader` to-many: refused, it could drop links.
enum HouseholdToOne {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.readers, originalName: "books") var book: Book?
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "reader") var readers: Set<Person> = []
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

/// `Book.reader` made to-many, its inverse a new to-one `Person.book` that holds no saved
/// links: refused.
enum HouseholdLostLinks {
    @Model final class Person {
        var name: String
        @Relationship(inverse: \Pet.owner) var pets: Set<Pet> = []
        @Relationship(inverse: \Book.readers) var book: Book?
        init(name: String) { self.name = name }
    }

    @Model final class Pet {
        var name: String
        var owner: Person?
        init(name: String) { self.name = name }
    }

    @Model final class Book {
        var title: String
        @Relationship(originalName: "reader") var readers: Set<Person> = []
        init(title: String) { self.title = title }
    }

    static func schema() throws -> Schema { try Schema([Person.self, Pet.self, Book.self]) }
}

extension HouseholdV1 {
    /// Ann owns Rex and Tom and has B3 then B1; Bob owns Kit. Saved, the container closed.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let ann = Person(name: "Ann"), bob = Person(name: "Bob")
            let pets = ["Rex", "Tom", "Kit"].map { Pet(name: $0) }
            let books = ["B1", "B2", "B3"].map { Book(title: $0) }
            for object in [ann, bob] { context.insert(object) }
            pets.forEach(context.insert)
            books.forEach(context.insert)
            pets[0].owner = ann
            pets[1].owner = ann
            pets[2].owner = bob
            ann.books = [books[2], books[0]]
        }
        try await container.close()
    }
}

extension HouseholdV2 {
    /// Every person's pets and books, every pet's owners.
    static func links(_ container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            let people = try context.fetch(FetchRequest<Person>(sortBy: [SortDescriptor(\.name)]))
            let pets = try context.fetch(FetchRequest<Pet>(sortBy: [SortDescriptor(\.name)]))
            return people.map { "\($0.name):\($0.pets.map(\.name).joined(separator: ",")):\($0.books.map(\.title).sorted().joined(separator: ","))" }
                + pets.map { "\($0.name):\($0.owners.map(\.name).sorted().joined(separator: ","))" }
        }
    }

    static let migratedLinks = ["Ann:Rex,Tom:B1,B3", "Bob:Kit:", "Kit:Bob", "Rex:Ann", "Tom:Ann"]
}
