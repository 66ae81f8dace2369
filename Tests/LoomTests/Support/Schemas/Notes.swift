import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

// The versions of the notes model that the migration tests (SQLite and PostgreSQL) move between.

/// Two versions of one model: the same entities (`Note`), declared in one enum per version.
enum NotesV1 {
    @Model final class Note {
        var title: String
        var subtitle: String?
        var draft: String?
        var count: Int16 = 0
        var weight: Float = 0

        init(title: String, subtitle: String? = nil, count: Int16 = 0) {
            self.title = title
            self.subtitle = subtitle
            self.count = count
        }
    }

    static func schema() throws -> Schema { try Schema([Note.self]) }
}

extension NotesV1 {
    /// Three notes (one without a subtitle) and a duplicated title, saved; closes the container.
    static func fill(_ container: PersistentContainer) async throws {
        try await container.save { context in
            context.insert(Note(title: "Groceries", subtitle: "weekly", count: 3))
            context.insert(Note(title: "Ideas", count: 300))
            let draft = Note(title: "Ideas", subtitle: "second")
            draft.draft = "half-written"
            draft.weight = 1.5
            context.insert(draft)
        }
        try await container.close()
    }
}

extension NotesV2 {
    /// Every note as one line (heading, subtitle, count, weight, body, priority, no folder, tags).
    static func summaries(_ container: PersistentContainer) async throws -> [String] {
        try await container.performBackgroundTask { context in
            try context.fetch(FetchRequest<Note>(sortBy: [SortDescriptor(\.heading), SortDescriptor(\.subtitle)]))
                .map { "\($0.heading)|\($0.subtitle)|\($0.count)|\($0.weight)|\($0.body ?? "nil")|\($0.priority ?? -1)|\($0.folder == nil)|\($0.tags.count)" }
        }
    }

    /// ``NotesV1/fill(_:)``'s notes after the migration to V2.
    static let migratedSummaries = ["Groceries|weekly|3|0.0|nil|2|true|0", "Ideas|none|300|0.0|nil|2|true|0", "Ideas|second|0|1.5|nil|2|true|0"]

    /// Files the Groceries note in a new folder with a new tag, gives it a body and a count only
    /// V2 can hold, and saves.
    static func useNewRelationships(_ container: PersistentContainer) async throws {
        try await container.save { context in
            let note = try #require(try context.fetch(FetchRequest<Note>(predicate: #Predicate { $0.heading == "Groceries" })).first)
            let folder = Folder(name: "Home")
            let tag = Tag(name: "errand")
            context.insert(folder)
            context.insert(tag)
            note.folder = folder
            note.tags.insert(tag)
            note.body = "milk"
            note.count = 70_000
        }
    }

    /// The Groceries note's body, folder, tags and count.
    static func groceries(_ container: PersistentContainer) async throws -> String {
        try await container.performBackgroundTask { context in
            let note = try #require(try context.fetch(FetchRequest<Note>(predicate: #Predicate { $0.heading == "Groceries" })).first)
            return "\(note.body ?? "nil")|\(note.folder?.name ?? "nil")|\(note.tags.map(\.name))|\(note.count)"
        }
    }

    static let groceriesAfterUse = #"milk|Home|["errand"]|70000"#
}

enum NotesV2 {
    /// `title` renamed `heading`; `subtitle` required with a default; `draft` removed; `count`
    /// and `weight` widened; `body` added, and `priority` with a default (existing rows take it);
    /// a to-one, a to-many and a many-to-many added.
    @Model final class Note {
        @Attribute(originalName: "title") var heading: String
        var subtitle: String = "none"
        var count: Int = 0
        var weight: Double = 0
        var body: String?
        var priority: Int? = 2
        var folder: Folder?
        @Relationship(inverse: \Tag.notes) var tags: Set<Tag> = []

        init(heading: String) { self.heading = heading }
    }

    @Model final class Folder {
        var name: String
        @Relationship(inverse: \Note.folder) var notes: Set<Note> = []

        init(name: String) { self.name = name }
    }

    @Model final class Tag {
        @Attribute(.unique) var name: String
        var notes: Set<Note> = []

        init(name: String) { self.name = name }
    }

    static func schema() throws -> Schema { try Schema([Note.self, Folder.self, Tag.self]) }
}

/// V1 with `draft` renamed `scratch`: renamed in place, without a rebuild.
enum NotesRenamed {
    @Model final class Note {
        var title: String
        var subtitle: String?
        @Attribute(originalName: "draft") var scratch: String?
        var count: Int16 = 0
        var weight: Float = 0

        init(title: String) { self.title = title }
    }
}

/// Versions that cannot be migrated from V1, each for one reason.
enum NotesBroken {
    /// A new required attribute without a default.
    enum RequiredWithoutDefault {
        @Model final class Note {
            var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0
            var author: String

            init(title: String, author: String) {
                self.title = title
                self.author = author
            }
        }
    }

    /// `title` made unique.
    enum UniqueTitle {
        @Model final class Note {
            @Attribute(.unique) var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0

            init(title: String) { self.title = title }
        }
    }

    /// `subtitle` made required without a default.
    enum RequiredSubtitle {
        @Model final class Note {
            var title: String
            var subtitle: String
            var draft: String?
            var count: Int16 = 0
            var weight: Float = 0

            init(title: String, subtitle: String) {
                self.title = title
                self.subtitle = subtitle
            }
        }
    }

    /// `weight` narrowed from a real number to an integer.
    enum NarrowedWeight {
        @Model final class Note {
            var title: String
            var subtitle: String?
            var draft: String?
            var count: Int16 = 0
            var weight: Int16 = 0

            init(title: String) { self.title = title }
        }
    }
}

/// NotesV2 back to an optional subtitle, with `heading` kept: another rebuild of the same table.
enum NotesRebuiltAgain {
    @Model final class Note {
        var heading: String
        var subtitle: String?
        var count: Int = 0
        var weight: Double = 0
        var body: String?
        var priority: Int? = 2

        init(heading: String) { self.heading = heading }
    }
}
