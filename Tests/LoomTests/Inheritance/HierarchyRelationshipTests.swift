import Foundation
import Loom
@_spi(LoomTesting) @_spi(LoomStore) @testable import LoomCore
import Testing

/// Relationships declared on an entity with sub-entities, and relationships leading to one, on
/// every store: their objects of every sub-entity, inverses, delete rules, predicates, sorts,
/// unsaved changes, child contexts and merges.
@Suite("Inheritance: relationships of a parent and to a parent", .timeLimit(.minutes(5)))
struct HierarchyRelationshipTests {
    /// `name:ClassName` of each object, sorted.
    static func kinds(_ objects: some Sequence<Animal>) -> [String] {
        objects.map { "\($0.name):\(type(of: $0))" }.sorted()
    }

    @Test("Relationships to a parent hold objects of its sub-entities, each of its own class, both ways", arguments: StoreKind.allCases)
    func readBack(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            let keepers = try context.fetch(FetchRequest<Keeper>(sortBy: [SortDescriptor(\.name)]))
            #expect(keepers.map(\.name) == ["Ann", "Bob"])
            #expect(Self.kinds(keepers[0].animals) == ["Max:GuideDog", "Rex:Dog", "Tom:Cat"])
            #expect(Self.kinds(keepers[1].animals) == ["Lou:Animal"])
            let rex = try #require(keepers[0].animals.first { $0.name == "Rex" } as? Dog)
            #expect(rex.keeper === keepers[0])
            #expect(rex.breed == "collie")
            #expect(rex.visits.map(\.reason) == ["vaccine", "check-up"])
            #expect(rex.visits.allSatisfy { $0.animal === rex })
            #expect(rex.toys.map(\.name).sorted() == ["ball", "rope"])
            #expect(Self.kinds(rex.offspring) == ["Max:GuideDog"])
            #expect(rex.walks.map(\.minutes) == [30])
            let max = try #require(rex.offspring.first as? GuideDog)
            #expect(max.mother === rex)
            #expect(max.handler == "Eve")
            // From the flat side, a to-one to the parent gives the sub-entity's object.
            let visits = try context.fetch(FetchRequest<Visit>(sortBy: [SortDescriptor(\.reason)]))
            #expect(visits.map { "\($0.reason):\($0.animal.map { "\(type(of: $0))" } ?? "-")" } == ["check-up:Dog", "teeth:Cat", "vaccine:Dog"])
            #expect(visits[0].animal === rex)
            let toys = try context.fetch(FetchRequest<Toy>(sortBy: [SortDescriptor(\.name)]))
            #expect(Self.kinds(toys[0].animals) == ["Rex:Dog", "Tom:Cat"])
            #expect(Self.kinds(toys[1].animals) == ["Max:GuideDog", "Rex:Dog"])
            let lou = try #require(keepers[1].animals.first)
            #expect(lou.mother.map { "\($0.name):\(type(of: $0))" } == "Tom:Cat")
        }
        // Faults made from a fresh context: a relationship's fault is of the right class before
        // it fires.
        try container.newBackgroundContext().performAndWait { context in
            let visit = try #require(try context.fetch(FetchRequest<Visit>(predicate: #Predicate { $0.reason == "teeth" })).first)
            let cat = try #require(visit.animal as? Cat)
            #expect(cat.lives == 7)
            #expect(cat.keeper?.name == "Ann")
        }
    }

    @Test("Changing a relationship to a parent keeps both sides in step, unsaved and saved", arguments: StoreKind.allCases)
    func changesKeepInversesInStep(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            let keepers = try context.fetch(FetchRequest<Keeper>(sortBy: [SortDescriptor(\.name)]))
            let (ann, bob) = (keepers[0], keepers[1])
            let tom = try #require(ann.animals.first { $0.name == "Tom" } as? Cat)
            let max = try #require(ann.animals.first { $0.name == "Max" })
            // From the sub-entity's side: both keepers' lists follow.
            tom.keeper = bob
            #expect(Self.kinds(ann.animals) == ["Max:GuideDog", "Rex:Dog"])
            #expect(Self.kinds(bob.animals) == ["Lou:Animal", "Tom:Cat"])
            // From the flat side.
            bob.animals.insert(max)
            #expect(max.keeper === bob)
            #expect(Self.kinds(ann.animals) == ["Rex:Dog"])
            // A new object of a sub-entity, related before the save.
            let fido = Dog(name: "Fido", breed: "pug")
            context.insert(fido)
            let visit = Visit(reason: "new")
            context.insert(visit)
            visit.animal = fido
            fido.mother = tom
            #expect(fido.visits.map(\.reason) == ["new"])
            #expect(Self.kinds(tom.offspring) == ["Fido:Dog", "Lou:Animal"])
            // A many-to-many from the parent's side of a sub-entity.
            let ball = try #require(try context.fetch(FetchRequest<Toy>(predicate: #Predicate { $0.name == "ball" })).first)
            fido.toys.insert(ball)
            #expect(Self.kinds(ball.animals) == ["Fido:Dog", "Rex:Dog", "Tom:Cat"])
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { context in
            let keepers = try context.fetch(FetchRequest<Keeper>(sortBy: [SortDescriptor(\.name)]))
            #expect(Self.kinds(keepers[0].animals) == ["Rex:Dog"])
            #expect(Self.kinds(keepers[1].animals) == ["Lou:Animal", "Max:GuideDog", "Tom:Cat"])
            let fido = try #require(try context.fetch(FetchRequest<Dog>(predicate: #Predicate { $0.name == "Fido" })).first)
            #expect(fido.visits.map(\.reason) == ["new"])
            #expect(fido.mother.map { "\($0.name):\(type(of: $0))" } == "Tom:Cat")
            #expect(fido.toys.map(\.name) == ["ball"])
            let ball = try #require(try context.fetch(FetchRequest<Toy>(predicate: #Predicate { $0.name == "ball" })).first)
            #expect(Self.kinds(ball.animals) == ["Fido:Dog", "Rex:Dog", "Tom:Cat"])
        }
    }

    @Test("Delete rules reach objects of every sub-entity: cascade, nullify and deny", arguments: StoreKind.allCases)
    func deleteRules(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            // Deny: Rex still has a walk.
            let ann = try #require(try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Ann" })).first)
            context.delete(ann)
            let denied = #expect(throws: LoomError.self) { try context.save() }
            #expect(denied?.code == .deleteDenied)
            context.rollback()
            for walk in try context.fetch(FetchRequest<Walk>()) { context.delete(walk) }
            context.delete(ann)
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { context in
            // Ann's cat, dog and guide dog went with her, and their visits with them.
            #expect(Self.kinds(try context.fetch(FetchRequest<Animal>())) == ["Lou:Animal"])
            #expect(try context.fetch(FetchRequest<Visit>()).isEmpty)
            // Nullify: the toys lost them; Lou lost its mother.
            #expect(try context.fetch(FetchRequest<Toy>()).allSatisfy { $0.animals.isEmpty })
            let lou = try #require(try context.fetch(FetchRequest<Animal>()).first)
            #expect(lou.mother == nil)
            #expect(lou.keeper?.name == "Bob")
        }
    }

    @Test("Predicates and sorts follow relationships to a parent, in the store and over unsaved changes", arguments: StoreKind.allCases)
    func predicatesAndSorts(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            func check() throws {
                let rexVisits = try context.fetch(FetchRequest<Visit>(predicate: #Predicate { $0.animal?.name == "Rex" }, sortBy: [SortDescriptor(\.reason)]))
                #expect(rexVisits.map(\.reason) == ["check-up", "vaccine"])
                let byAnimal = try context.fetch(FetchRequest<Visit>(sortBy: [SortDescriptor(\.animal?.name), SortDescriptor(\.reason)]))
                #expect(byAnimal.map { "\($0.animal?.name ?? "-")/\($0.reason)" } == ["Rex/check-up", "Rex/vaccine", "Tom/teeth"])
                let withCat = try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { keeper in keeper.animals.contains { $0.name == "Tom" } }))
                #expect(withCat.map(\.name) == ["Ann"])
                #expect(try context.count(for: FetchRequest<Keeper>(predicate: #Predicate { $0.animals.count >= 3 })) == 1)
                let mothers = try context.fetch(FetchRequest<Animal>(predicate: #Predicate { $0.mother?.name == "Rex" }))
                #expect(Self.kinds(mothers) == ["Max:GuideDog"])
                let rexToys = try context.fetch(FetchRequest<Toy>(predicate: #Predicate { toy in toy.animals.contains { $0.name == "Rex" } }, sortBy: [SortDescriptor(\.name)]))
                #expect(rexToys.map(\.name) == ["ball", "rope"])
            }
            try check()
            // Unsaved: a renamed dog, and a visit moved to it; then the same answers after the
            // save.
            let rex = try #require(try context.fetch(FetchRequest<Dog>(predicate: #Predicate { $0.name == "Rex" })).first)
            let tom = try #require(try context.fetch(FetchRequest<Cat>()).first)
            rex.name = "Rox"
            let teeth = try #require(tom.visits.first)
            teeth.animal = rex
            let rexVisits = try context.fetch(FetchRequest<Visit>(predicate: #Predicate { $0.animal?.name == "Rox" }, sortBy: [SortDescriptor(\.reason)]))
            #expect(rexVisits.map(\.reason) == ["check-up", "teeth", "vaccine"])
            let tomVisits = try context.fetch(FetchRequest<Visit>(predicate: #Predicate { $0.animal?.name == "Tom" }))
            #expect(tomVisits.isEmpty)
            let withRox = try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { keeper in keeper.animals.contains { $0.name == "Rox" } }))
            #expect(withRox.map(\.name) == ["Ann"])
            try context.save()
            let saved = try context.fetch(FetchRequest<Visit>(predicate: #Predicate { $0.animal?.name == "Rox" }))
            #expect(saved.count == 3)
            // A sort through a to-one to Dog (whose sub-entity GuideDog has its own table) by
            // `name`, which Dog inherits from Animal: no dog first, in the store and over an
            // unsaved rename.
            let max = try #require(try context.fetch(FetchRequest<GuideDog>()).first)
            let toMax = Walk(minutes: 45), alone = Walk(minutes: 5)
            context.insert(toMax)
            context.insert(alone)
            toMax.dog = max
            try context.save()
            let byDog = FetchRequest<Walk>(sortBy: [SortDescriptor(\.dog?.name), SortDescriptor(\.minutes)])
            #expect(try context.fetch(byDog).map(\.minutes) == [5, 45, 30])   // -, Max, Rox
            rex.name = "Abe"
            #expect(try context.fetch(byDog).map(\.minutes) == [5, 30, 45])
            try context.save()
            #expect(try context.fetch(byDog).map(\.minutes) == [5, 30, 45])
            let live = try context.liveQuery(byDog, sectionedBy: \.dog?.name)
            #expect(try live.channel.poll()?.sections.map(\.key) == [nil, "Abe", "Max"])
        }
    }

    @Test("A child context's relationships to a parent reach its parent context, and a save's merge reaches other contexts", arguments: StoreKind.allCases)
    func childContextsAndMerges(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        let observer = container.newBackgroundContext()
        let bobAnimals = try observer.performAndWait { context in
            let bob = try #require(try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Bob" })).first)
            return Self.kinds(bob.animals)
        }
        #expect(bobAnimals == ["Lou:Animal"])
        let parent = container.newBackgroundContext()
        try parent.performAndWait { parent in
            let child = parent.newChildContext()
            try child.performAndWait { child in
                let bob = try #require(try child.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Bob" })).first)
                let puppy = GuideDog(name: "Bo", breed: "lab", handler: "Sam")
                child.insert(puppy)
                puppy.keeper = bob
                let rex = try #require(try child.fetch(FetchRequest<Dog>(predicate: #Predicate { $0.name == "Rex" })).first)
                puppy.mother = rex
                try child.save()
            }
            // The parent sees the child's object through both relationships, unsaved.
            let bob = try #require(try parent.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Bob" })).first)
            #expect(Self.kinds(bob.animals) == ["Bo:GuideDog", "Lou:Animal"])
            let rex = try #require(try parent.fetch(FetchRequest<Dog>(predicate: #Predicate { $0.name == "Rex" })).first)
            #expect(Self.kinds(rex.offspring) == ["Bo:GuideDog", "Max:GuideDog"])
            // A second child sees the first's object, and the inherited relationship's key.
            let second = parent.newChildContext()
            try second.performAndWait { child in
                let bo = try #require(try child.fetch(FetchRequest<GuideDog>(predicate: #Predicate { $0.name == "Bo" })).first)
                #expect(bo.keeper?.name == "Bob")
                #expect(bo.mother.map { "\($0.name):\(type(of: $0))" } == "Rex:Dog")
            }
            try parent.save()
        }
        try observer.performAndWait { context in
            let bob = try #require(try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Bob" })).first)
            #expect(Self.kinds(bob.animals) == ["Bo:GuideDog", "Lou:Animal"])
        }
    }

    @Test("Batch requests follow relationships to a parent: relating to a sub-entity's object, and deleting with every rule", arguments: StoreKind.allCases)
    func batchRequests(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            let tom = try #require(try context.fetch(FetchRequest<Cat>()).first)
            let tomID = try #require(ObjectID<Animal>(tom.objectID.erased))
            // A batch insert of a sub-entity relating its new objects to the cat through the
            // parent's relationship, by the cat's ID as an Animal; a missing key is refused.
            _ = try context.execute(BatchInsertRequest<GuideDog>(rows: [[.set(\.name, to: "Kit"), .relate(\.mother, to: tomID)]]))
            try context.refreshAllObjects()
            #expect(Self.kinds(tom.offspring) == ["Kit:GuideDog", "Lou:Animal"])
            let gone = try #require(ObjectID<Animal>(AnyObjectID(storeIdentifier: tomID.erased.storeIdentifier, entityName: "Animal", primaryKey: 999_999)))
            let missing = #expect(throws: LoomError.self) { try context.execute(BatchInsertRequest<Cat>(rows: [[.set(\.name, to: "Nobody"), .relate(\.mother, to: gone)]])) }
            #expect(missing?.code == .objectNotFound)
            #expect(try context.count(for: FetchRequest<Animal>()) == 5)
            // Deny: Rex's walk holds Ann back, and nothing is deleted.
            let denied = #expect(throws: LoomError.self) { try context.execute(BatchDeleteRequest<Keeper>(predicate: #Predicate { $0.name == "Ann" })) }
            #expect(denied?.code == .deleteDenied)
            #expect(try context.count(for: FetchRequest<Animal>()) == 5)
            _ = try context.execute(BatchDeleteRequest<Walk>())
            let result = try context.execute(BatchDeleteRequest<Keeper>(predicate: #Predicate { $0.name == "Ann" }))
            // Ann, her cat, dog and guide dog, and their three visits.
            #expect(result.deletedCount == 7)
            #expect(Set(result.deleted.map(\.entityName)) == ["Keeper", "Cat", "Dog", "GuideDog", "Visit"])
        }
        try container.newBackgroundContext().performAndWait { context in
            // Kit had no keeper; Lou and Kit lost their mother, nullified.
            let animals = try context.fetch(FetchRequest<Animal>())
            #expect(Self.kinds(animals) == ["Kit:GuideDog", "Lou:Animal"])
            #expect(animals.allSatisfy { $0.mother == nil })
            #expect(try context.count(for: FetchRequest<Visit>()) == 0)
            #expect(try context.fetch(FetchRequest<Toy>()).allSatisfy { $0.animals.isEmpty })
        }
    }

    @Test("Prefetching relationships to a parent loads objects of every sub-entity with the fetch", arguments: StoreKind.allCases)
    func prefetching(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            var visits = FetchRequest<Visit>(sortBy: [SortDescriptor(\.reason)])
            visits.relationshipKeyPathsForPrefetching = [\.animal]
            #expect(try context.fetch(visits).map { "\($0.reason):\($0.animal.map { "\(type(of: $0))" } ?? "-")" } == ["check-up:Dog", "teeth:Cat", "vaccine:Dog"])
            var keepers = FetchRequest<Keeper>(sortBy: [SortDescriptor(\.name)])
            keepers.relationshipKeyPathsForPrefetching = [\.animals]
            #expect(try context.fetch(keepers).map { Self.kinds($0.animals) } == [["Max:GuideDog", "Rex:Dog", "Tom:Cat"], ["Lou:Animal"]])
            var animals = FetchRequest<Animal>(sortBy: [SortDescriptor(\.name)])
            animals.relationshipKeyPathsForPrefetching = [\.mother, \.offspring, \.toys]
            let all = try context.fetch(animals)
            #expect(all.map { $0.mother?.name ?? "-" } == ["Tom", "Rex", "-", "-"])
            #expect(all.map(\.offspring.count) == [0, 0, 1, 1])
            #expect(all.map(\.toys.count) == [0, 1, 2, 1])
        }
    }

    @Test("A live query through a relationship to a parent follows changes to objects of its sub-entities", arguments: StoreKind.allCases)
    func liveQuery(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        let context = container.newBackgroundContext()
        let live = try context.performAndWait { context in
            context.automaticallyMergesChanges = true
            return try context.liveQuery(FetchRequest<Visit>(predicate: #Predicate { $0.animal?.name == "Rex" }, sortBy: [SortDescriptor(\.reason)]))
        }
        func reasons(_ context: ManagedObjectContext) throws -> [String]? {
            try live.channel.poll().map { try $0.items.map { try context.object(with: $0).reason } }
        }
        let tomID = try context.performAndWait { context in
            #expect(try reasons(context) == ["check-up", "vaccine"])
            let tom = try #require(try context.fetch(FetchRequest<Cat>()).first)
            tom.name = "Rex"                                 // the sub-entity's object changes
            context.processPendingChanges()
            #expect(try reasons(context) == ["check-up", "teeth", "vaccine"])
            try context.save()
            return tom.objectID
        }
        // Another context renames the cat: merged here, its visit leaves.
        try container.newBackgroundContext().performAndWait { other in
            try other.existingObject(with: tomID).name = "Tom"
            try other.save()
        }
        let merged = try context.performAndWait { try reasons($0) }
        #expect(merged == ["check-up", "vaccine"])
    }

    @Test("Undo and redo of relationship changes to a parent restore both sides, each object of its own class", arguments: StoreKind.allCases)
    func undoAndRedo(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            let keepers = try context.fetch(FetchRequest<Keeper>(sortBy: [SortDescriptor(\.name)]))
            let (ann, bob) = (keepers[0], keepers[1])
            let toys = try context.fetch(FetchRequest<Toy>(sortBy: [SortDescriptor(\.name)]))
            context.undoManager = UndoStack()
            let max = try #require(ann.animals.first { $0.name == "Max" })
            max.keeper = bob                                 // a sub-entity's inherited to-one
            toys[0].animals.insert(max)                      // a many-to-many to the parent
            context.processPendingChanges()
            #expect(Self.kinds(bob.animals) == ["Lou:Animal", "Max:GuideDog"])
            context.undo()
            #expect(max.keeper === ann)
            #expect(Self.kinds(ann.animals) == ["Max:GuideDog", "Rex:Dog", "Tom:Cat"])
            #expect(Self.kinds(bob.animals) == ["Lou:Animal"])
            #expect(Self.kinds(toys[0].animals) == ["Rex:Dog", "Tom:Cat"])
            #expect(!context.hasChanges)
            context.redo()
            #expect(Self.kinds(bob.animals) == ["Lou:Animal", "Max:GuideDog"])
            #expect(Self.kinds(toys[0].animals) == ["Max:GuideDog", "Rex:Dog", "Tom:Cat"])
            try context.save()
        }
        try container.newBackgroundContext().performAndWait { context in
            let bob = try #require(try context.fetch(FetchRequest<Keeper>(predicate: #Predicate { $0.name == "Bob" })).first)
            #expect(Self.kinds(bob.animals) == ["Lou:Animal", "Max:GuideDog"])
        }
    }

    @Test("A key's entity is found among registered objects, then by key in each table; a key found nowhere gets the destination itself", arguments: StoreKind.allCases)
    func keyResolution(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        let keys = try container.newBackgroundContext().performAndWait { context in
            try context.fetch(FetchRequest<Animal>(sortBy: [SortDescriptor(\.name)])).map(\.objectID.erased.primaryKey)   // Lou, Max, Rex, Tom
        }
        try container.newBackgroundContext().performAndWait { context in
            let schema = context.coordinator.schema
            let animal = try #require(schema.relationship(RelationshipReference(entityName: "Visit", name: "animal")))
            let dog = try #require(schema.relationship(RelationshipReference(entityName: "Walk", name: "dog")))
            #expect(animal.leadsToSubentities && dog.leadsToSubentities)
            // Nothing registered here: read from the tables, all at once.
            let found = context.destinationEntities(of: animal.destination, keys: keys + [999_999])
            #expect(keys.map { found[$0]?.name ?? "-" } == ["Animal", "GuideDog", "Dog", "Cat"])
            #expect(found[999_999] == nil)
            #expect(context.destinationEntity(of: animal, key: 999_999).name == "Animal")
            // Through Walk.dog, only dogs: the cat's key is not one of its destinations.
            #expect(context.destinationEntities(of: dog.destination, keys: keys)[keys[3]] == nil)
            #expect(context.destinationEntity(of: dog, key: keys[1]).name == "GuideDog")
            // A key of no object, followed: a fault of the destination that finds no row.
            let ghost = context.object(for: animal, key: 999_999)
            #expect(type(of: ghost) == Animal.self)
        }
    }

    @Test("The coordinator's map of keys to entities is bounded: a hierarchy whose entries reach the capacity starts over")
    func keyEntitiesAreBounded() throws {
        let schema = try Schema(animalModels)
        let (animal, dog, cat) = (try schema.requireEntity(named: "Animal"), try schema.requireEntity(named: "Dog"), try schema.requireEntity(named: "Cat"))
        let map = KeyEntities(capacity: 4)
        map.note(dog, keys: 1...3)
        map.note(cat, keys: [4])
        #expect(map.count(in: animal) == 4)
        #expect(map.entities(in: animal, keys: 1...4).mapValues(\.name) == [1: "Dog", 2: "Dog", 3: "Dog", 4: "Cat"])
        map.note(cat, keys: [5, 6])
        #expect(map.count(in: animal) == 2)
        #expect(map.entity(in: animal, key: 1) == nil)
        #expect(map.entity(in: animal, key: 6)?.name == "Cat")
    }

    @Test("An import links to objects of a parent's sub-entities by an attribute the parent declares", arguments: StoreKind.allCases)
    func importLinksAcrossTheHierarchy(kind: StoreKind) throws {
        let container = try kind.makeAnimalContainer()
        try container.newBackgroundContext().performAndWait { try seedAnimals($0) }
        try container.newBackgroundContext().performAndWait { context in
            // Max is a guide dog, in its own table; Rex a dog. Walk.dog leads to Dog.
            // Sources "name minutes", unique by minutes.
            let sources = ["Max 11", "Rex 12", "Max 13"]
            _ = try context.execute(ImportRequest<Walk, String>(sources, uniquingBy: [\Walk.minutes]) { [.set(\.minutes, to: Int($0.split(separator: " ")[1])!)] }
                .linking(\.dog, to: \Dog.name, by: { String($0.split(separator: " ")[0]) }))
            let walks = try context.fetch(FetchRequest<Walk>(predicate: #Predicate { $0.minutes > 10 && $0.minutes < 20 }))
            #expect(walks.map { "\($0.dog?.name ?? "-"):\($0.dog.map { "\(type(of: $0))" } ?? "-")" }.sorted() == ["Max:GuideDog", "Max:GuideDog", "Rex:Dog"])
            // The cat is not a dog: linking to it by name finds no Dog.
            let refused = #expect(throws: LoomError.self) {
                try context.execute(ImportRequest<Walk, String>(["Tom"], uniquingBy: [\Walk.minutes]) { _ in [.set(\.minutes, to: 1)] }.linking(\.dog, to: \Dog.name, by: { $0 }))
            }
            #expect(refused?.code == .objectNotFound)
        }
    }
}
