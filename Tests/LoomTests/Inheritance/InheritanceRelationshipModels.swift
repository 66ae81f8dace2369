import Foundation
import Loom

// A hierarchy whose leaves have relationships, to flat entities and to each other:
//
//   Media (concrete parent) ◀── Podcast, Film (leaves)
//   Host    1 ─cascade─▶ * Podcast            (a flat entity's to-many of a leaf)
//   Podcast 1 ─cascade─▶ [Episode]            (a leaf's ordered to-many of a flat entity)
//   Podcast * ───────── 1 Film                (leaf to leaf: basedOn / adaptations, nullify)
//   Film    * ───────── * Theme               (many-to-many)

@Model class Media {
    var title: String = ""
    var year: Int = 0

    init(title: String, year: Int) {
        self.title = title
        self.year = year
    }
}

@Model final class Podcast: Media {
    var host: Host?
    @Relationship(deleteRule: .cascade, inverse: \Episode.podcast) var episodes: [Episode] = []
    var basedOn: Film?

    init(title: String, year: Int, host: Host?) {
        super.init(title: title, year: year)
        self.host = host
    }
}

@Model final class Film: Media {
    var minutes: Int = 0
    @Relationship(inverse: \Theme.films) var themes: Set<Theme> = []
    @Relationship(deleteRule: .nullify, inverse: \Podcast.basedOn) var adaptations: Set<Podcast> = []

    init(title: String, year: Int, minutes: Int) {
        super.init(title: title, year: year)
        self.minutes = minutes
    }
}

@Model final class Host {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Podcast.host) var podcasts: Set<Podcast> = []

    init(name: String) { self.name = name }
}

@Model final class Episode {
    var number: Int
    var podcast: Podcast?

    init(number: Int) { self.number = number }
}

@Model final class Theme {
    var name: String
    var films: Set<Film> = []

    init(name: String) { self.name = name }
}

/// Every model of the media graph.
var mediaModels: [any PersistentModel.Type] { [Media.self, Podcast.self, Film.self, Host.self, Episode.self, Theme.self] }

extension StoreKind {
    /// A fresh, empty container of this kind for the media graph.
    func makeMediaContainer() throws -> PersistentContainer {
        try makeContainer(models: mediaModels)
    }
}

/// The media graph, saved: hosts Ann (podcasts P1 2021, P2 2018) and Bob (P3 2022); films F1
/// (2019, 120 min, drama and crime) and F2 (2015, 95 min, drama); P1 is based on F1; P1 has
/// episodes 1, 2, 3 in that order, P3 has episode 1; a plain Media M1 (2020).
func seedMedia(_ context: ManagedObjectContext) throws {
    let ann = Host(name: "Ann"), bob = Host(name: "Bob")
    let drama = Theme(name: "drama"), crime = Theme(name: "crime")
    let f1 = Film(title: "F1", year: 2019, minutes: 120), f2 = Film(title: "F2", year: 2015, minutes: 95)
    let p1 = Podcast(title: "P1", year: 2021, host: ann), p2 = Podcast(title: "P2", year: 2018, host: ann)
    let p3 = Podcast(title: "P3", year: 2022, host: bob)
    for object in [ann, bob] as [any PersistentModel] { context.insert(object) }
    for object in [drama, crime] as [any PersistentModel] { context.insert(object) }
    for object in [f1, f2, p1, p2, p3] as [any PersistentModel] { context.insert(object) }
    context.insert(Media(title: "M1", year: 2020))
    f1.themes = [drama, crime]
    f2.themes = [drama]
    p1.basedOn = f1
    for number in 1...3 {
        let episode = Episode(number: number)
        context.insert(episode)
        p1.episodes.append(episode)
    }
    let single = Episode(number: 1)
    context.insert(single)
    single.podcast = p3
    try context.save()
}
