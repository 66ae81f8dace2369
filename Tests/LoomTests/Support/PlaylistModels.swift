import Foundation
import Loom

// Playlists and songs: an ordered many-to-many relationship.

@Model final class Playlist {
    var title: String
    @Relationship(inverse: \Song.playlists) var songs: [Song] = []   // ordered, many-to-many

    init(title: String) { self.title = title }
}

@Model final class Song {
    var name: String
    var playlists: Set<Playlist> = []

    init(name: String) { self.name = name }
}
