import Foundation
import Loom
@_spi(LoomTesting) @_spi(LoomStore) @testable import LoomCore
import Testing

/// Relationships of the leaves of a hierarchy (entities without sub-entities), on every store:
/// to flat entities and to each other, read through a fetch of their parent, followed by
/// predicates and sorts, kept by delete rules, batch deletes, merges and prefetching.
@Suite("Inheritance: relationships of leaves", .timeLimit(.minutes(5)))
struct InheritanceRelationshipTests {
    @Test("A leaf's relationships come back through a fetch of its parent, each end of its own class", arguments: StoreKind.allCases)
    func relationshipsThroughTheParent(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        try container.newBackgroundContext().performAndWait { context in
            let media = try context.fetch(FetchRequest<Media>(sortBy: [SortDescriptor(\.title)]))
            #expect(media.map { "\($0.title):\(type(of: $0))" } == ["F1:Film", "F2:Film", "M1:Media", "P1:Podcast", "P2:Podcast", "P3:Podcast"])
            let p1 = try #require(media[3] as? Podcast)
            #expect(p1.objectID.erased.entityName == "Podcast")
            #expect(p1.host?.name == "Ann")
            #expect(p1.episodes.map(\.number) == [1, 2, 3])
            #expect(p1.episodes.allSatisfy { $0.podcast === p1 })
            let f1 = try #require(media[0] as? Film)
            #expect(p1.basedOn === f1)
            #expect(f1.adaptations.map(\.title) == ["P1"])
            #expect(Set(f1.themes.map(\.name)) == ["drama", "crime"])
            #expect((media[1] as? Film)?.adaptations.isEmpty == true)
            #expect((media[5] as? Podcast)?.episodes.map(\.number) == [1])
            // From the flat side: the destinations are objects of the leaf's class, registered
            // once (the same instances the parent's fetch made).
            let ann = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Ann" })).first)
            #expect(Set(ann.podcasts.map(\.title)) == ["P1", "P2"])
            #expect(ann.podcasts.contains { $0 === p1 })
            let drama = try #require(try context.fetch(FetchRequest<Theme>(predicate: #Predicate { $0.name == "drama" })).first)
            #expect(Set(drama.films.map(\.title)) == ["F1", "F2"])
            // A fault made from the parent's ID is the leaf, with its relationships.
            let widened = try #require(ObjectID<Media>(p1.objectID.erased))
            let other = container.newBackgroundContext()
            try other.performAndWait { other in
                let fault = try #require(try other.existingObject(with: widened) as? Podcast)
                #expect(fault.host?.name == "Ann")
                #expect(fault.basedOn?.title == "F1")
            }
        }
    }

    @Test("Predicates and sorts follow a leaf's relationships; through as? from the parent too", arguments: StoreKind.allCases)
    func predicatesThroughLeafRelationships(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        try container.newBackgroundContext().performAndWait { context in
            // A sort through a to-one whose destination is a leaf, by the leaf's own relationship.
            let episodes = try context.fetch(FetchRequest<Episode>(sortBy: [SortDescriptor(\.podcast?.host?.name, order: .reverse), SortDescriptor(\.number)]))
            #expect(episodes.map { "\($0.podcast?.title ?? "-")/\($0.number)" } == ["P3/1", "P1/1", "P1/2", "P1/3"])
            // By an attribute the leaf inherits from its parent (`title`, `year` are Media's),
            // saved and then with an unsaved change the in-memory sort must see.
            let byTitle = try context.fetch(FetchRequest<Episode>(sortBy: [SortDescriptor(\.podcast?.title, order: .reverse), SortDescriptor(\.number)]))
            #expect(byTitle.map { "\($0.podcast?.title ?? "-")/\($0.number)" } == ["P3/1", "P1/1", "P1/2", "P1/3"])
            let byBasis = FetchRequest<Podcast>(sortBy: [SortDescriptor(\.basedOn?.year, order: .reverse), SortDescriptor(\.title)])
            #expect(try context.fetch(byBasis).map(\.title) == ["P1", "P2", "P3"])
            let p2 = try #require(try context.fetch(FetchRequest<Podcast>(predicate: #Predicate { $0.title == "P2" })).first)
            let f2 = try #require(try context.fetch(FetchRequest<Film>(predicate: #Predicate { $0.title == "F2" })).first)
            p2.basedOn = f2
            f2.year = 2023
            #expect(try context.fetch(byBasis).map(\.title) == ["P2", "P1", "P3"])
            context.rollback()
            // A key path past a stored attribute is still refused.
            let refused = #expect(throws: LoomError.self) { try context.fetch(FetchRequest<Episode>(sortBy: [SortDescriptor(\.podcast?.title.count)])) }
            #expect(refused?.code == .unsupportedSort)
            // Saved, then with an unsaved change that the predicate must see.
            for pass in 0..<2 {
                let byAnn = try context.fetch(FetchRequest<Podcast>(predicate: #Predicate { $0.host?.name == "Ann" }, sortBy: [SortDescriptor(\.year)]))
                #expect(byAnn.map(\.title) == (pass == 0 ? ["P2", "P1"] : ["P2", "P3", "P1"]), "pass \(pass)")
                let hosts = try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.podcasts.contains { $0.year > 2020 } }, sortBy: [SortDescriptor(\.name)]))
                #expect(hosts.map(\.name) == (pass == 0 ? ["Ann", "Bob"] : ["Ann"]), "pass \(pass)")
                let sortedByHost = try context.fetch(FetchRequest<Podcast>(sortBy: [SortDescriptor(\.host?.name, order: .reverse), SortDescriptor(\.title)]))
                #expect(sortedByHost.map(\.title) == (pass == 0 ? ["P3", "P1", "P2"] : ["P1", "P2", "P3"]), "pass \(pass)")
                let adapted = try context.count(for: FetchRequest<Film>(predicate: #Predicate { !$0.adaptations.isEmpty }))
                #expect(adapted == 1)
                let dramas = try context.count(for: FetchRequest<Film>(predicate: #Predicate { $0.themes.contains { $0.name == "crime" } }))
                #expect(dramas == 1)
                // From the parent, through a cast: the other entities read nil.
                let annsMedia = try context.fetch(FetchRequest<Media>(predicate: #Predicate { ($0 as? Podcast)?.host?.name == "Ann" }, sortBy: [SortDescriptor(\.title)]))
                #expect(annsMedia.map(\.title) == (pass == 0 ? ["P1", "P2"] : ["P1", "P2", "P3"]), "pass \(pass)")
                let notAnns = try context.fetch(FetchRequest<Media>(predicate: #Predicate { ($0 as? Podcast)?.host?.name != "Ann" }, sortBy: [SortDescriptor(\.title)]))
                #expect(notAnns.map(\.title) == (pass == 0 ? ["F1", "F2", "M1", "P3"] : ["F1", "F2", "M1"]), "pass \(pass)")   // nil != "Ann", as in Swift
                let themed = try context.count(for: FetchRequest<Media>(predicate: #Predicate { ($0 as? Film)?.themes.isEmpty == false }))
                #expect(themed == 2)
                if pass == 0 {
                    let p3 = try #require(try context.fetch(FetchRequest<Podcast>(predicate: #Predicate { $0.title == "P3" })).first)
                    let ann = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Ann" })).first)
                    p3.host = ann
                    p3.year = 2020
                }
            }
        }
    }

    @Test("Delete rules reach the leaves: cascade, nullify, and deletes through the parent's fetch", arguments: StoreKind.allCases)
    func deleteRules(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        try container.newBackgroundContext().performAndWait { context in
            // Ann's podcasts go with her (cascade), and P1's episodes with P1 (cascade).
            let ann = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Ann" })).first)
            context.delete(ann)
            try context.save()
            #expect(try context.fetch(FetchRequest<Media>(sortBy: [SortDescriptor(\.title)])).map(\.title) == ["F1", "F2", "M1", "P3"])
            #expect(try context.count(for: FetchRequest<Episode>()) == 1)
            let f1 = try #require(try context.fetch(FetchRequest<Film>(predicate: #Predicate { $0.title == "F1" })).first)
            #expect(f1.adaptations.isEmpty)
        }
        try container.newBackgroundContext().performAndWait { context in
            // A film deleted as an object of the parent's fetch: the podcast based on it keeps
            // living with nil (nullify), and the themes lose it.
            let p3 = try #require(try context.fetch(FetchRequest<Podcast>()).first)
            let f2 = try #require(try context.fetch(FetchRequest<Film>(predicate: #Predicate { $0.title == "F2" })).first)
            p3.basedOn = f2
            try context.save()
            let asMedia = try #require(try context.fetch(FetchRequest<Media>(predicate: #Predicate { $0.title == "F2" })).first)
            #expect(asMedia === f2)
            context.delete(asMedia)
            try context.save()
            #expect(p3.basedOn == nil)
            let drama = try #require(try context.fetch(FetchRequest<Theme>(predicate: #Predicate { $0.name == "drama" })).first)
            #expect(drama.films.map(\.title) == ["F1"])
        }
        // The store agrees, read by a context that saw none of it.
        let (podcasts, hosts, media) = try container.newBackgroundContext().performAndWait { context in
            (try context.fetch(FetchRequest<Podcast>()).map { $0.basedOn == nil }, try context.count(for: FetchRequest<Host>()), try context.count(for: FetchRequest<Media>()))
        }
        #expect(podcasts == [true])
        #expect(hosts == 1)
        #expect(media == 3)
    }

    @Test("A batch delete of the parent applies each leaf's delete rules", arguments: StoreKind.allCases)
    func batchDeleteOfTheParent(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        try container.newBackgroundContext().performAndWait { context in
            // P1 (2021) and P3 (2022) go, with their episodes (cascade); F1 (2019) stays.
            let result = try context.execute(BatchDeleteRequest<Media>(predicate: #Predicate { $0.year > 2020 }))
            #expect(result.deletedCount == 6)   // with the four episodes cascaded to
            #expect(Set(result.deleted.map(\.entityName)) == ["Podcast", "Episode"])
            #expect(try context.count(for: FetchRequest<Episode>()) == 0)
            let f1 = try #require(try context.fetch(FetchRequest<Film>(predicate: #Predicate { $0.title == "F1" })).first)
            #expect(f1.adaptations.isEmpty)
            let ann = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Ann" })).first)
            #expect(ann.podcasts.map(\.title) == ["P2"])
            // Films: their genre links go with them.
            _ = try context.execute(BatchDeleteRequest<Media>(predicate: #Predicate { $0 is Film }))
            let drama = try #require(try context.fetch(FetchRequest<Theme>(predicate: #Predicate { $0.name == "drama" })).first)
            #expect(drama.films.isEmpty)
            #expect(try context.fetch(FetchRequest<Media>(sortBy: [SortDescriptor(\.title)])).map(\.title) == ["M1", "P2"])
        }
    }

    @Test("A relationship changed in one context reaches another's objects by a save's merge", arguments: StoreKind.allCases)
    func mergedRelationshipChanges(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        let reader = container.newBackgroundContext()
        let (p2ID, bobID) = try reader.performAndWait { context in
            context.automaticallyMergesChanges = true
            let p2 = try #require(try context.fetch(FetchRequest<Media>(predicate: #Predicate { $0.title == "P2" })).first as? Podcast)
            let bob = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Bob" })).first)
            #expect(p2.host?.name == "Ann")
            #expect(bob.podcasts.map(\.title) == ["P3"])
            return (p2.objectID, bob.objectID)
        }
        try container.newBackgroundContext().performAndWait { writer in
            let p2 = try writer.existingObject(with: p2ID)
            p2.host = try writer.existingObject(with: bobID)
            let episode = Episode(number: 7)
            writer.insert(episode)
            p2.episodes.append(episode)
            try writer.save()
        }
        try reader.performAndWait { context in
            let p2 = try context.existingObject(with: p2ID)
            let bob = try context.existingObject(with: bobID)
            #expect(p2.host === bob)
            #expect(Set(bob.podcasts.map(\.title)) == ["P2", "P3"])
            #expect(p2.episodes.map(\.number) == [7])
        }
    }

    @Test("Prefetching a leaf's relationships loads them with the fetch", arguments: StoreKind.allCases)
    func prefetching(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        try container.newBackgroundContext().performAndWait { context in
            var request = FetchRequest<Podcast>(sortBy: [SortDescriptor(\.title)])
            request.relationshipKeyPathsForPrefetching = [\.host, \.episodes, \.basedOn]
            let podcasts = try context.fetch(request)
            #expect(podcasts.map { $0.host?.name ?? "-" } == ["Ann", "Ann", "Bob"])
            #expect(podcasts.map(\.episodes.count) == [3, 0, 1])
            #expect(podcasts.map { $0.basedOn?.title ?? "-" } == ["F1", "-", "-"])
        }
    }

    @Test("A live query of the parent through a leaf's relationship follows the related objects' changes, here and merged", arguments: StoreKind.allCases)
    func liveQueryThroughALeafRelationship(kind: StoreKind) throws {
        let container = try kind.makeMediaContainer()
        try container.newBackgroundContext().performAndWait { try seedMedia($0) }
        let context = container.newBackgroundContext()
        let (live, hosts) = try context.performAndWait { context in
            context.automaticallyMergesChanges = true
            let request = FetchRequest<Media>(predicate: #Predicate { ($0 as? Podcast)?.host?.name == "Ann" }, sortBy: [SortDescriptor(\.title)])
            let hosts = FetchRequest<Host>(predicate: #Predicate { $0.podcasts.contains { $0.year > 2021 } }, sortBy: [SortDescriptor(\.name)])
            return (try context.liveQuery(request), try context.liveQuery(hosts))
        }
        func titles(_ context: ManagedObjectContext) throws -> [String]? {
            try live.channel.poll().map { try $0.items.map { try context.object(with: $0).title } }
        }
        func names(_ context: ManagedObjectContext) throws -> [String]? {
            try hosts.channel.poll().map { try $0.items.map { try context.object(with: $0).name } }
        }
        let annID = try context.performAndWait { context in
            #expect(try titles(context) == ["P1", "P2"])
            #expect(try names(context) == ["Bob"])
            let p3 = try #require(try context.fetch(FetchRequest<Podcast>(predicate: #Predicate { $0.title == "P3" })).first)
            let ann = try #require(try context.fetch(FetchRequest<Host>(predicate: #Predicate { $0.name == "Ann" })).first)
            let bob = try #require(p3.host)
            p3.host = ann                                   // the leaf's to-one changes
            context.processPendingChanges()
            #expect(try titles(context) == ["P1", "P2", "P3"])
            #expect(try names(context) == ["Ann"])
            p3.host = bob
            context.processPendingChanges()
            #expect(try titles(context) == ["P1", "P2"])
            bob.name = "Ann"                                // the related object's attribute
            context.processPendingChanges()
            #expect(try titles(context) == ["P1", "P2", "P3"])
            let late = Podcast(title: "P0", year: 2030, host: ann)   // a new leaf object, related
            context.insert(late)
            context.processPendingChanges()
            #expect(try titles(context) == ["P0", "P1", "P2", "P3"])
            #expect(try names(context) == ["Ann", "Ann"])
            try context.save()
            return ann.objectID
        }
        // Another context renames the first Ann and saves: her podcasts leave, merged here.
        try container.newBackgroundContext().performAndWait { other in
            try other.existingObject(with: annID).name = "Zed"
            try other.save()
        }
        var seen: [String]?
        for _ in 0..<500 {
            seen = try context.performAndWait { context in try titles(context) } ?? seen
            if seen == ["P3"] { break }
            Thread.sleep(forTimeInterval: 0.002)
        }
        #expect(seen == ["P3"])
    }
}
