import Foundation
import Loom
@_spi(LoomStore) import LoomCore

// The versioned schemas whose stages drop data, or refuse to.

/// Items with an optional note, and tags with an optional color: what the stages below drop.
enum KeepV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self, Tag.self] }

    @Model final class Item {
        var name: String
        var note: String?
        init(name: String, note: String?) {
            self.name = name
            self.note = note
        }
    }

    @Model final class Tag {
        var label: String
        var color: String?
        init(label: String, color: String?) {
            self.label = label
            self.color = color
        }
    }
}

/// The entity `Tag` dropped.
enum KeepV2WithoutTags: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self] }

    @Model final class Item {
        var name: String
        var note: String?
        init(name: String, note: String?) {
            self.name = name
            self.note = note
        }
    }
}

/// The attribute `Item.note` dropped.
enum KeepV2WithoutNotes: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self, Tag.self] }

    @Model final class Item {
        var name: String
        init(name: String) { self.name = name }
    }

    @Model final class Tag {
        var label: String
        var color: String?
        init(label: String, color: String?) {
            self.label = label
            self.color = color
        }
    }
}

/// `Item.name` made unique: refused over the duplicated names of ``DataLossTests/fill(_:)``.
enum KeepV2UniqueNames: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self, KeepV1.Tag.self] }

    @Model final class Item {
        @Attribute(.unique) var name: String
        var note: String?
        init(name: String, note: String?) {
            self.name = name
            self.note = note
        }
    }
}

/// `Item.note` made required without a default: refused over the items without a note.
enum KeepV2RequiredNotes: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Item.self, KeepV1.Tag.self] }

    @Model final class Item {
        var name: String
        var note: String
        init(name: String, note: String) {
            self.name = name
            self.note = note
        }
    }
}
