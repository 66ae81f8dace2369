import Foundation
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization

// The versioned schemas of people whose names a transform stage splits, and the plans between them.

/// A person with one name field, and notes.
enum PeopleV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Person.self, Note.self] }

    @Model final class Person {
        var fullName: String
        var age: Int16
        init(fullName: String, age: Int16) {
            self.fullName = fullName
            self.age = age
        }
    }

    @Model final class Note {
        var text: String
        init(text: String) { self.text = text }
    }
}

/// `fullName` split in two (and gone from the model: only the old version can read it); `age`
/// widened; notes dropped.
enum PeopleV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Person.self] }

    @Model final class Person {
        var firstName: String = ""
        var lastName: String = ""
        var age: Int
        init(firstName: String, lastName: String, age: Int) {
            self.firstName = firstName
            self.lastName = lastName
            self.age = age
        }
    }
}

/// The transform both plans run: splits each old full name into the new object's two fields.
enum SplitNames {
    /// Per store file: how many times each person (by primary key) was handed to the
    /// transform, and the key on whose chunk it throws (none: never). Kept per file so that no
    /// other test's migration can touch them.
    static let seen = Mutex<[String: [Int64: Int]]>([:])
    static let failAtKey = Mutex<[String: Int64]>([:])
    struct Failure: Error {}

    @Sendable static func split(_ people: [PeopleV1.Person], _ old: ManagedObjectContext, _ new: ManagedObjectContext) throws {
        // One fetch for the chunk's new objects (migratedObject(_:as:) fetches one by one).
        for (person, migrated) in zip(people, try new.migratedObjects(people, as: PeopleV2.Person.self)) {
            let parts = person.fullName.split(separator: " ", maxSplits: 1)
            migrated.firstName = String(parts.first ?? "")
            migrated.lastName = parts.count > 1 ? String(parts[1]) : ""
        }
    }

    @Sendable static func counting(_ people: [PeopleV1.Person], _ old: ManagedObjectContext, _ new: ManagedObjectContext) throws {
        let file = (new.coordinator.store as? SQLiteStore)?.url.path ?? ""
        seen.withLock { seen in for person in people { seen[file, default: [:]][person.objectID.erased.primaryKey, default: 0] += 1 } }
        if let failing = failAtKey.withLock({ $0[file] }), people.contains(where: { $0.objectID.erased.primaryKey == failing }) { throw Failure() }
        try split(people, old, new)
    }
}

enum PeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: PeopleV1.self, toVersion: PeopleV2.self, transforming: PeopleV1.Person.self, chunkSize: 1_000, allowsDataLoss: true, transform: SplitNames.split)]
    }
}

enum StrictPeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: PeopleV1.self, toVersion: PeopleV2.self, transforming: PeopleV1.Person.self, transform: SplitNames.split)]
    }
}

/// V2 with `firstName` required and without a default: the tables cannot be migrated.
enum PeopleV2WithoutDefault: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Person.self] }

    @Model final class Person {
        var firstName: String
        var age: Int
        init(firstName: String, age: Int) {
            self.firstName = firstName
            self.age = age
        }
    }
}

enum UnmigratablePeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2WithoutDefault.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: PeopleV1.self, toVersion: PeopleV2WithoutDefault.self, transforming: PeopleV1.Person.self, allowsDataLoss: true) { _, _, _ in }]
    }
}

enum CountingPeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: PeopleV1.self, toVersion: PeopleV2.self, transforming: PeopleV1.Person.self, chunkSize: 1_000, allowsDataLoss: true, transform: SplitNames.counting)]
    }
}

/// People 1.0.0 with `age` widened and a new attribute with a default: an inferred migration
/// that rebuilds the people's table.
enum WiderPeople: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 1, 0)
    static var models: [any PersistentModel.Type] { [Person.self, Note.self] }

    @Model final class Person {
        var fullName: String
        var age: Int
        var nickname: String = ""
        init(fullName: String, age: Int) {
            self.fullName = fullName
            self.age = age
        }
    }

    @Model final class Note {
        var text: String
        init(text: String) { self.text = text }
    }
}

/// The transform stage of ``PeoplePlan`` in chunks of ten people.
enum ChunkedPeoplePlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PeopleV1.self, PeopleV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: PeopleV1.self, toVersion: PeopleV2.self, transforming: PeopleV1.Person.self, chunkSize: 10, allowsDataLoss: true, transform: SplitNames.split)]
    }
}
