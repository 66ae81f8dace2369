import Foundation
import Loom

// Relationships declared on a parent entity and leading to one, which its sub-entities
// inherit and whose objects may be of any of them:
//
//   Animal (concrete parent) ◀── Cat, Dog ◀── GuideDog
//   Keeper  1 ─cascade─▶ * Animal           (to-many to a parent; its inverse is inherited)
//   Animal  1 ─cascade─▶ [Visit]            (a parent's ordered to-many; Visit.animal leads to a parent)
//   Animal  * ───────── * Toy               (a parent's many-to-many)
//   Animal  1 ───────── * Animal            (mother / offspring: within the hierarchy)
//   Dog     1 ─deny────▶ * Walk             (a sub-entity's own relationship, for contrast)

@Model class Animal {
    var name: String = ""
    var keeper: Keeper?
    @Relationship(deleteRule: .cascade, inverse: \Visit.animal) var visits: [Visit] = []
    @Relationship(inverse: \Toy.animals) var toys: Set<Toy> = []
    var mother: Animal?
    @Relationship(deleteRule: .nullify, inverse: \Animal.mother) var offspring: Set<Animal> = []

    init(name: String) { self.name = name }
}

@Model final class Cat: Animal {
    var lives: Int = 9

    init(name: String, lives: Int) {
        super.init(name: name)
        self.lives = lives
    }
}

@Model class Dog: Animal {
    var breed: String = ""
    @Relationship(deleteRule: .deny, inverse: \Walk.dog) var walks: Set<Walk> = []

    init(name: String, breed: String) {
        super.init(name: name)
        self.breed = breed
    }
}

@Model final class GuideDog: Dog {
    var handler: String = ""

    init(name: String, breed: String, handler: String) {
        super.init(name: name, breed: breed)
        self.handler = handler
    }
}

@Model final class Keeper {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Animal.keeper) var animals: Set<Animal> = []

    init(name: String) { self.name = name }
}

@Model final class Visit {
    var reason: String
    var animal: Animal?

    init(reason: String) { self.reason = reason }
}

@Model final class Toy {
    var name: String
    var animals: Set<Animal> = []

    init(name: String) { self.name = name }
}

@Model final class Walk {
    var minutes: Int
    var dog: Dog?

    init(minutes: Int) { self.minutes = minutes }
}

/// Every model of the animal graph, parents first.
var animalModels: [any PersistentModel.Type] {
    [Animal.self, Cat.self, Dog.self, GuideDog.self, Keeper.self, Visit.self, Toy.self, Walk.self]
}

extension StoreKind {
    /// A fresh, empty container of this kind for the animal graph.
    func makeAnimalContainer() throws -> PersistentContainer {
        try makeContainer(models: animalModels)
    }
}

/// The animal graph, saved: keeper Ann has Tom (a cat, 7 lives), Rex (a dog, collie) and Max
/// (a guide dog, lab, handled by Eve); keeper Bob has Lou (a plain animal). Rex has visits
/// "vaccine" then "check-up"; Tom has "teeth"; Max has none. Toys: ball (Rex, Tom), rope (Rex,
/// Max). Rex is Max's mother; Tom is Lou's. Rex has one walk of 30 minutes.
func seedAnimals(_ context: ManagedObjectContext) throws {
    let ann = Keeper(name: "Ann"), bob = Keeper(name: "Bob")
    let tom = Cat(name: "Tom", lives: 7), rex = Dog(name: "Rex", breed: "collie")
    let max = GuideDog(name: "Max", breed: "lab", handler: "Eve"), lou = Animal(name: "Lou")
    for object in [ann, bob, tom, rex, max, lou] as [any PersistentModel] { context.insert(object) }
    ann.animals = [tom, rex, max]
    lou.keeper = bob
    for reason in ["vaccine", "check-up"] {
        let visit = Visit(reason: reason)
        context.insert(visit)
        rex.visits.append(visit)
    }
    let teeth = Visit(reason: "teeth")
    context.insert(teeth)
    teeth.animal = tom
    let ball = Toy(name: "ball"), rope = Toy(name: "rope")
    context.insert(ball)
    context.insert(rope)
    ball.animals = [rex, tom]
    max.toys = [rope]
    rope.animals.insert(rex)
    max.mother = rex
    tom.offspring = [lou]
    let walk = Walk(minutes: 30)
    context.insert(walk)
    walk.dog = rex
    try context.save()
}
