import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import Testing

/// The schema of a hierarchy: what `@Model` on a class and its subclasses describes, what the
/// schema knows of it, its version hash, and the models it refuses.
@Suite("Inheritance: schema")
struct InheritanceSchemaTests {
    @Test("A subclass's entity inherits its superclass's properties first, in their positions")
    func subentityInheritsProperties() {
        #expect(Trip.entity.superentity == nil)
        #expect(BusinessTrip.entity.superentity === Trip.entity)
        #expect(ConferenceTrip.entity.superentity === BusinessTrip.entity)
        #expect(ConferenceTrip.entity.attributes.map(\.name) == ["name", "days", "company", "talk"])
        #expect(ConferenceTrip.entity.inheritedPropertyCount == 3)
        #expect(PersonalTrip.entity.attributes.map(\.name) == ["name", "days", "reason"])
        #expect(ConferenceTrip.entity.indexes == [["name"]])
        #expect(ConferenceTrip.entity.isKind(of: Trip.entity))
        #expect(!PersonalTrip.entity.isKind(of: BusinessTrip.entity))
        #expect(ConferenceTrip.entity.rootEntity === Trip.entity)
    }

    @Test("Each class answers with its own entity, statically and through a generic")
    func entityDispatchesOnTheClass() {
        func entity<M: PersistentModel>(_: M.Type) -> String { M.entity.name }
        #expect(entity(Trip.self) == "Trip")
        #expect(entity(BusinessTrip.self) == "BusinessTrip")
        #expect(entity(ConferenceTrip.self) == "ConferenceTrip")
        let types: [any PersistentModel.Type] = tripModels
        #expect(types.map { $0.entity.name } == ["Trip", "BusinessTrip", "ConferenceTrip", "PersonalTrip"])
    }

    @Test("Abstract entities are marked; their concrete entities are their sub-entities")
    func abstractEntities() throws {
        #expect(Vehicle.entity.isAbstract)
        #expect(!Bicycle.entity.isAbstract)
        #expect(!Trip.entity.isAbstract)
        let schema = try Schema(tripModels + vehicleModels)
        #expect(schema.subentities(of: Vehicle.entity).map(\.name) == ["Bicycle", "Car"])
        #expect(schema.concreteEntities(of: Vehicle.entity).map(\.name) == ["Bicycle", "Car"])
        #expect(schema.concreteEntities(of: Vehicle.entity, includingSubentities: false).isEmpty)
        #expect(schema.concreteEntities(of: Trip.entity).map(\.name) == ["Trip", "BusinessTrip", "PersonalTrip", "ConferenceTrip"])
        #expect(schema.concreteEntities(of: BusinessTrip.entity).map(\.name) == ["BusinessTrip", "ConferenceTrip"])
        #expect(schema.concreteEntities(of: ConferenceTrip.entity).map(\.name) == ["ConferenceTrip"])
        #expect(schema.subentities(of: ConferenceTrip.entity).isEmpty)
    }

    @Test("Key paths of inherited properties are rooted at the subclass")
    func inheritedKeyPaths() {
        #expect(BusinessTrip._loomPropertyName(for: \BusinessTrip.name) == "name")
        #expect(BusinessTrip._loomPropertyName(for: \BusinessTrip.company) == "company")
        #expect(ConferenceTrip._loomPropertyName(for: \ConferenceTrip.days) == "days")
        #expect(ConferenceTrip._loomPropertyName(for: \ConferenceTrip.company) == "company")
        #expect(Trip._loomPropertyName(for: \Trip.name) == "name")
        #expect(ConferenceTrip._loomKeyPath(for: "name", optionalChained: false) == \ConferenceTrip.name)
        #expect(ConferenceTrip._loomKeyPath(for: "talk", optionalChained: true) == \ConferenceTrip?.?.talk)
        #expect(ConferenceTrip._loomKeyPath(for: "missing", optionalChained: false) == nil)
        #expect(Trip._loomKeyPath(for: "company", optionalChained: false) == nil)
    }

    @Test("The version hash includes the hierarchy, is stable, and survives the saved record")
    func versionHashIncludesHierarchy() throws {
        let schema = try Schema(tripModels + vehicleModels)
        // Pinned: a change of this value is a change of every store's saved hash.
        #expect(schema.versionHash == Self.pinnedHash)
        let reread = try Schema(record: schema.record)
        #expect(reread.versionHash == schema.versionHash)
        #expect(reread.entity(named: "ConferenceTrip")?.superentity?.name == "BusinessTrip")
        #expect(reread.entity(named: "ConferenceTrip")?.attributes.map(\.name) == ["name", "days", "company", "talk"])
        #expect(reread.entity(named: "Vehicle")?.isAbstract == true)
        #expect(reread.entity(named: "Bicycle")?.isAbstract == false)
        #expect(reread.record == schema.record)

        // The same columns without the hierarchy are another schema.
        var flatRecord = schema.record
        for i in flatRecord.entities.indices {
            flatRecord.entities[i].superentity = nil
            flatRecord.entities[i].isAbstract = nil
        }
        let flat = try Schema(record: flatRecord)
        #expect(flat.versionHash != schema.versionHash)
        #expect(flat.record.differences(from: schema.record).contains("BusinessTrip inherits from nothing in the store but from Trip in the model"))
        #expect(flat.record.differences(from: schema.record).contains("Vehicle is not abstract in the store but abstract in the model"))
    }

    static let pinnedHash = "ca257b3e8d258ff3b2d70c085c35dcd6"

    @Test("A model without a hierarchy keeps the version hash it had before inheritance")
    func flatHashUnchanged() throws {
        // Computed with the canonical form as it was before entities had superentities.
        let schema = try Schema([EntityDescription(name: "Note", modelType: nil, attributes: [
            AttributeDescription(name: "text", valueType: String.self),
        ])])
        #expect(schema.versionHash == Self.flatPinnedHash)
    }

    static let flatPinnedHash = "12da7e9601db0b8da7d2e9811cc51c1a"

    @Test("A sub-entity whose superentity is missing from the model is refused, naming both")
    func missingSuperentity() {
        let error = #expect(throws: LoomError.self) { try Schema(BusinessTrip.self) }
        #expect(error?.code == .invalidModel)
        #expect(error?.message.contains("BusinessTrip inherits from Trip, which is not in this model") == true)
    }

    @Test("A saved record whose hierarchy has a loop or a missing parent is an error, not a trap")
    func corruptRecordHierarchy() throws {
        var record = try Schema(tripModels).record
        for i in record.entities.indices where record.entities[i].name == "Trip" { record.entities[i].superentity = "ConferenceTrip" }
        let loop = #expect(throws: LoomError.self) { try Schema(record: record) }
        #expect(loop?.code == .invalidModel)
        for i in record.entities.indices where record.entities[i].name == "Trip" { record.entities[i].superentity = "Nowhere" }
        let missing = #expect(throws: LoomError.self) { try Schema(record: record) }
        #expect(missing?.code == .invalidModel)
        #expect(missing?.message.contains("Nowhere") == true)
    }

    @Test("A property a sub-entity declares again is refused")
    func redeclaredProperty() {
        let parent = EntityDescription(name: "Parent", modelType: nil, attributes: [AttributeDescription(name: "name", valueType: String.self)])
        let child = EntityDescription(name: "Child", modelType: nil, attributes: [AttributeDescription(name: "name", valueType: Int.self)], superentity: parent)
        let error = #expect(throws: LoomError.self) { try Schema([parent, child]) }
        #expect(error?.message.contains("Child.name is declared twice") == true)
    }

    @Test("A relationship declared on a parent is its sub-entities' too, with the parent's inverse and a foreign key at each entity's own slot")
    func relationshipOfAParent() throws {
        let owner = EntityDescription(name: "Owner", modelType: nil, attributes: [], relationships: [
            RelationshipDescription(name: "pets", destination: "Pet", kind: .toMany, inverse: "owner"),
        ])
        let pet = EntityDescription(name: "Pet", modelType: nil, attributes: [], relationships: [
            RelationshipDescription(name: "owner", destination: "Owner", kind: .toOne, inverse: "pets"),
        ])
        let dog = EntityDescription(name: "Dog", modelType: nil, attributes: [AttributeDescription(name: "breed", valueType: String.self)], superentity: pet)
        let schema = try Schema([owner, pet, dog])
        let pets = try #require(schema.relationship(RelationshipReference(entityName: "Owner", name: "pets")))
        #expect(pets.leadsToSubentities)
        #expect(pets.concreteDestinations(in: schema).map(\.destination.name) == ["Pet", "Dog"])
        // The dog's foreign key comes after its own attribute: the narrowed relationship reads it there.
        #expect(pets.concreteDestinations(in: schema).map(\.storage) == [.inverseForeignKey(slot: 0), .inverseForeignKey(slot: 1)])
        let dogOwner = schema.relationship(0, of: dog)
        #expect(dogOwner.storage == .foreignKey(slot: 1))
        #expect(dogOwner.inverse.name == "pets")
        #expect(!dogOwner.leadsToSubentities)
        // An inverse must still lead back to the entity or one of its parents.
        let stranger = EntityDescription(name: "Stranger", modelType: nil, attributes: [], relationships: [
            RelationshipDescription(name: "owner", destination: "Owner", kind: .toOne, inverse: "pets"),
        ])
        let error = #expect(throws: LoomError.self) { try Schema([owner, pet, dog, stranger]) }
        #expect(error?.message.contains("Stranger.owner names Owner.pets as its inverse, but that leads to Pet, not back to Stranger") == true, "\(error?.message ?? "")")
    }

    @Test("A many-to-many declared on a parent has one join table, named after the parent, for every sub-entity")
    func manyToManyOfAParent() throws {
        func vehicles() -> (EntityDescription, EntityDescription, EntityDescription) {
            let vehicle = EntityDescription(name: "Vehicle", modelType: nil, attributes: [AttributeDescription(name: "wheels", valueType: Int.self)],
                                            relationships: [RelationshipDescription(name: "garages", destination: "Garage", kind: .toMany, inverse: "vehicles")],
                                            isAbstract: true)
            let car = EntityDescription(name: "Car", modelType: nil, attributes: [], superentity: vehicle)
            return (vehicle, car, EntityDescription(name: "Bus", modelType: nil, attributes: [], superentity: vehicle))
        }
        let (vehicle, car, bus) = vehicles()
        let garage = EntityDescription(name: "Garage", modelType: nil, attributes: [], relationships: [
            RelationshipDescription(name: "vehicles", destination: "Vehicle", kind: .toMany, inverse: nil),
        ])
        let schema = try Schema([vehicle, car, bus, garage])
        #expect(schema.joinTables.map(\.name) == ["Z_Garage_vehicles"])
        for entity in [vehicle, car, bus] {
            guard case .joinTable(let table, let own, _) = schema.relationship(0, of: entity).storage else {
                Issue.record("\(entity.name).garages is not a join table")
                continue
            }
            #expect(table.name == "Z_Garage_vehicles")
            #expect(table.targetEntityName == "Vehicle")
            #expect(own == JoinTable.targetColumn)
        }
        // The abstract parent has no table of rows: the relationship reaches its two sub-entities.
        let vehicles = schema.relationship(0, of: garage)
        #expect(vehicles.concreteDestinations(in: schema).map(\.destination.name) == ["Car", "Bus"])
    }

    @Test("A uniqueness constraint of an entity with sub-entities holds across them; one of a leaf is its table's own")
    func parentUniquenessAcrossSubentities() throws {
        let uniqueAttribute = EntityDescription(name: "Account", modelType: nil, attributes: [
            AttributeDescription(name: "email", valueType: String.self, isUnique: true),
        ])
        let admin = EntityDescription(name: "Admin", modelType: nil, attributes: [], superentity: uniqueAttribute)
        let described = try Schema([uniqueAttribute, admin])
        #expect(described.hierarchyConstraints.map { "\($0.owner.name)\($0.attributes): \($0.members.map(\.name))" } == ["Account[\"email\"]: [\"Account\", \"Admin\"]"])
        #expect(described.hierarchyConstraint(of: admin, ["email"])?.owner === uniqueAttribute)

        // The same through @Model: `@Attribute(.unique)` on a class that has @Model subclasses.
        let schema = try Schema(accountModels)
        #expect(Admin.entity.uniquenessConstraints == [["email"]])
        #expect(Admin.entity.declaringEntity(ofConstraint: ["email"]) === Account.entity)
        #expect(schema.hierarchyConstraints.map { $0.members.map(\.name) } == [["Account", "Admin", "Guest"]])
        #expect(schema.hierarchyConstraint(of: Badge.entity, ["code"]) == nil)
        // Alone, the parent is flat: its table's unique index holds it.
        #expect(try Schema(Account.self).hierarchyConstraints.isEmpty)

        // A compound constraint on a middle entity of three levels covers it and its
        // sub-entities, not its parent.
        let seats = try Schema(seatModels)
        #expect(seats.hierarchyConstraints.map { "\($0.owner.name)\($0.attributes): \($0.members.map(\.name))" } == ["BoxSeat[\"row\", \"number\"]: [\"BoxSeat\", \"RoyalBoxSeat\"]"])
        #expect(RoyalBoxSeat.entity.declaringEntity(ofConstraint: ["row", "number"]) === BoxSeat.entity)
        #expect(Seat.entity.uniquenessConstraints.isEmpty)

        // On an entity without sub-entities the constraint is its table's own.
        let root = EntityDescription(name: "Root", modelType: nil, attributes: [AttributeDescription(name: "a", valueType: Int.self)])
        let ownLeaf = EntityDescription(name: "Leaf", modelType: nil, attributes: [AttributeDescription(name: "c", valueType: Int.self, isUnique: true)],
                                        uniquenessConstraints: [["a", "c"]], superentity: root)
        let leafSchema = try Schema([root, ownLeaf])
        #expect(leafSchema.entity(named: "Leaf")?.uniquenessConstraints == [["c"], ["a", "c"]])
        #expect(leafSchema.hierarchyConstraints.isEmpty)
        // A saved record comes back with the constraint across the hierarchy.
        let reread = try Schema(record: schema.record)
        #expect(reread.hierarchyConstraints.map { $0.members.map(\.name) } == [["Account", "Admin", "Guest"]])
        #expect(reread.versionHash == schema.versionHash)
    }
}
