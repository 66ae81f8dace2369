import Foundation
import Testing

// The code between the markers is README.md's transform-stage example, checked line for line by
// scripts/check-readme.py.

// BEGIN README TRANSFORM
import Loom

enum ContactsV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Contact.self] }
    @Model final class Contact {
        var fullName: String
        init(fullName: String) { self.fullName = fullName }
    }
}

enum ContactsV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Contact.self] }
    @Model final class Contact {   // fullName is gone: only the old version can read it
        var firstName: String = ""
        var lastName: String = ""
        init(firstName: String, lastName: String) { self.firstName = firstName; self.lastName = lastName }
    }
}

enum ContactsPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [ContactsV1.self, ContactsV2.self] }
    static var stages: [MigrationStage] {
        [.custom(fromVersion: ContactsV1.self, toVersion: ContactsV2.self, transforming: ContactsV1.Contact.self, chunkSize: 1_000) { contacts, old, new in
            for contact in contacts {   // read from a copy of the V1 store, with `old`
                let migrated = try new.migratedObject(contact, as: ContactsV2.Contact.self)
                let parts = contact.fullName.split(separator: " ", maxSplits: 1)
                migrated.firstName = String(parts.first ?? "")
                migrated.lastName = parts.count > 1 ? String(parts[1]) : ""
            }
        }]   // each chunk commits with its position: killed, the next open resumes after it
    }
}
// END README TRANSFORM

@Test("README: a transform stage splits a value only the old version has")
func readmeTransformMigration() async throws {
    let url = TemporaryDirectory.make().appending(path: "contacts.loom")
    let v1 = try await PersistentContainer(name: "Contacts", for: ContactsV1.self, location: .file(url))
    try await v1.save { context in context.insert(ContactsV1.Contact(fullName: "Ada Lovelace")) }
    try await v1.close()
    let v2 = try await PersistentContainer(name: "Contacts", for: ContactsV2.self, migrationPlan: ContactsPlan.self, location: .file(url))
    let names = try await v2.performBackgroundTask { context in
        try context.fetch(FetchRequest<ContactsV2.Contact>()).map { "\($0.lastName), \($0.firstName)" }
    }
    try await v2.close()
    #expect(names == ["Lovelace, Ada"])
}
