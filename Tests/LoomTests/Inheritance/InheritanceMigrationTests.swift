import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomPostgreSQL
import Testing

// Three versions of one model, for the inferred migrations that change a hierarchy.

/// A flat entity.
enum ShapesV1 {
    @Model final class Shape {
        var name: String = ""
        var sides: Int = 0
    }

    static var models: [any PersistentModel.Type] { [Shape.self] }
}

/// The flat entity made the parent of two new sub-entities; a circle carries a colour.
enum ShapesV2 {
    @Model class Shape {
        var name: String = ""
        var sides: Int = 0
    }

    @Model final class Circle: Shape {
        var radius: Double = 1
        var color: String?
    }

    @Model final class Square: Shape {
        var side: Double = 1
    }

    static var models: [any PersistentModel.Type] { [Shape.self, Circle.self, Square.self] }
}

/// The colour moved up to the parent, and a third sub-entity added.
enum ShapesV3 {
    @Model class Shape {
        var name: String = ""
        var sides: Int = 0
        var color: String?
    }

    @Model final class Circle: Shape {
        var radius: Double = 1
    }

    @Model final class Square: Shape {
        var side: Double = 1
    }

    @Model final class Triangle: Shape {
        var base: Double = 1
    }

    static var models: [any PersistentModel.Type] { [Shape.self, Circle.self, Square.self, Triangle.self] }
}

/// Two flat entities, later made siblings under a new abstract parent.
enum PiecesV1 {
    @Model final class Pawn {
        var square: String = ""
    }

    @Model final class Rook {
        var square: String = ""
    }

    static var models: [any PersistentModel.Type] { [Pawn.self, Rook.self] }
}

enum PiecesV2 {
    @Model(abstract: true) class Piece {
        var square: String = ""
    }

    @Model final class Pawn: Piece {}

    @Model final class Rook: Piece {}

    static var models: [any PersistentModel.Type] { [Piece.self, Pawn.self, Rook.self] }
}

/// The pieces' parent with a unique square: two pieces cannot stand on one square.
enum PiecesV3 {
    @Model(abstract: true) class Piece {
        @Attribute(.unique) var square: String = ""
    }

    @Model final class Pawn: Piece {}

    @Model final class Rook: Piece {}

    static var models: [any PersistentModel.Type] { [Piece.self, Pawn.self, Rook.self] }
}

/// A flat entity with a unique email, made the parent of staff, whose table then changes.
/// A flat entity with relationships (to a flat entity, many-to-many, and to itself) that
/// becomes a parent: its relationships become the sub-entities' too, and the other sides lead
/// to a parent.
enum KennelsV1 {
    @Model final class Hound {
        var name: String = ""
        var kennel: Kennel?
        @Relationship(inverse: \Bone.hounds) var bones: Set<Bone> = []
        var leader: Hound?
        @Relationship(inverse: \Hound.leader) var pack: Set<Hound> = []
    }

    @Model final class Kennel {
        var name: String = ""
        @Relationship(deleteRule: .cascade, inverse: \Hound.kennel) var hounds: Set<Hound> = []
    }

    @Model final class Bone {
        var size: Int = 0
        var hounds: Set<Hound> = []
    }

    static var models: [any PersistentModel.Type] { [Hound.self, Kennel.self, Bone.self] }
}

enum KennelsV2 {
    @Model class Hound {
        var name: String = ""
        var kennel: Kennel?
        @Relationship(inverse: \Bone.hounds) var bones: Set<Bone> = []
        var leader: Hound?
        @Relationship(inverse: \Hound.leader) var pack: Set<Hound> = []
    }

    @Model final class Beagle: Hound {
        var voice: Int = 0
    }

    @Model final class Kennel {
        var name: String = ""
        @Relationship(deleteRule: .cascade, inverse: \Hound.kennel) var hounds: Set<Hound> = []
    }

    @Model final class Bone {
        var size: Int = 0
        var hounds: Set<Hound> = []
    }

    static var models: [any PersistentModel.Type] { [Hound.self, Beagle.self, Kennel.self, Bone.self] }
}

enum MembersV1 {
    @Model final class Member {
        @Attribute(.unique) var email: String = ""
    }

    static var models: [any PersistentModel.Type] { [Member.self] }
}

enum MembersV2 {
    @Model class Member {
        @Attribute(.unique) var email: String = ""
    }

    @Model final class Staff: Member {
        var desk: String = ""
    }

    static var models: [any PersistentModel.Type] { [Member.self, Staff.self] }
}

enum MembersV3 {
    @Model class Member {
        @Attribute(.unique) var email: String = ""
    }

    @Model final class Staff: Member {
        @Attribute(originalName: "desk") var office: String = ""
        var floor: Int? = 1
    }

    @Model final class Visitor: Member {}

    static var models: [any PersistentModel.Type] { [Member.self, Staff.self, Visitor.self] }
}

/// Inferred migrations that change a hierarchy, on the stores that outlive their instance, on
/// data: a flat entity made a parent of new sub-entities, an attribute moved up to the parent,
/// a sub-entity added. Each keeps every saved value, fetches of the parent cover the new
/// sub-entities, and new objects take keys no saved object has.
@Suite("Inheritance: migrations", .timeLimit(.minutes(5)))
struct InheritanceMigrationTests {
    /// Where a test's store lives, reopened with each version.
    enum Place {
        case file(URL)
        case postgres(PostgreSQLStore.Configuration)

        init(_ kind: StoreKind) throws {
            switch kind {
            case .postgres: self = .postgres(try PostgresServer.configuration())
            default: self = .file(TemporaryDirectory.make().appending(path: "shapes.loom"))
            }
        }

        func open(_ models: [any PersistentModel.Type]) throws -> PersistentContainer {
            let schema = try Schema(models)
            return switch self {
            case .file(let url): PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
            case .postgres(let configuration): PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
            }
        }
    }

    /// Every shape as "class name sides", by name.
    static func describe<Shape: PersistentModel>(_ context: ManagedObjectContext, _ model: Shape.Type, _ detail: (Shape) -> String) throws -> [String] {
        try context.fetch(FetchRequest<Shape>()).map { "\(type(of: $0)) \(detail($0))" }.sorted()
    }

    @Test("A flat entity becomes the parent of new sub-entities, then its sub-entity's attribute moves up and a sub-entity is added", arguments: StoreKind.persistentCases)
    func hierarchyGrows(kind: StoreKind) async throws {
        let place = try Place(kind)
        // V1: two flat shapes.
        let v1 = try place.open(ShapesV1.models)
        let flatKeys = try await v1.performBackgroundTask { context in
            for (name, sides) in [("s1", 3), ("s2", 4)] {
                let shape = ShapesV1.Shape(context: context)
                shape.name = name
                shape.sides = sides
            }
            try context.save()
            return try context.fetchIDs(FetchRequest<ShapesV1.Shape>()).map(\.erased.primaryKey)
        }
        try await v1.close()

        // V2: Shape is a parent; its saved objects stay Shapes, new circles and squares take
        // keys of the same space.
        let v2 = try place.open(ShapesV2.models)
        let v2Keys = try await v2.performBackgroundTask { context in
            #expect(try Self.describe(context, ShapesV2.Shape.self) { "\($0.name) \($0.sides)" } == ["Shape s1 3", "Shape s2 4"])
            let circle = ShapesV2.Circle(context: context)
            circle.name = "c1"
            circle.radius = 2
            circle.color = "red"
            let plain = ShapesV2.Circle(context: context)
            plain.name = "c2"
            let square = ShapesV2.Square(context: context)
            square.name = "q1"
            square.sides = 4
            square.side = 3
            try context.save()
            #expect(try context.count(for: FetchRequest<ShapesV2.Shape>()) == 5)
            return try context.fetchIDs(FetchRequest<ShapesV2.Shape>()).map(\.erased.primaryKey)
        }
        #expect(Set(v2Keys).count == 5)
        #expect(Set(v2Keys).isSuperset(of: flatKeys))
        try await v2.close()

        // V3: the colour moved up to Shape (circles keep theirs, the others read nil), and
        // triangles added.
        let v3 = try place.open(ShapesV3.models)
        try await v3.performBackgroundTask { context in
            let all = try Self.describe(context, ShapesV3.Shape.self) { shape in
                var text = "\(shape.name) \(shape.sides) \(shape.color ?? "-")"
                if let circle = shape as? ShapesV3.Circle { text += " r\(circle.radius)" }
                if let square = shape as? ShapesV3.Square { text += " a\(square.side)" }
                return text
            }
            #expect(all == ["Circle c1 0 red r2.0", "Circle c2 0 - r1.0", "Shape s1 3 -", "Shape s2 4 -", "Square q1 4 - a3.0"])
            // The moved attribute is the parent's now: predicates over the whole hierarchy read it.
            #expect(try context.fetch(FetchRequest<ShapesV3.Shape>(predicate: #Predicate { $0.color == "red" })).map(\.name) == ["c1"])
            let triangle = ShapesV3.Triangle(context: context)
            triangle.name = "t1"
            triangle.sides = 3
            triangle.color = "blue"
            let s1 = try #require(try context.fetch(FetchRequest<ShapesV3.Shape>(predicate: #Predicate { $0.name == "s1" })).first)
            s1.color = "green"
            try context.save()
            let keys = try context.fetchIDs(FetchRequest<ShapesV3.Shape>()).map(\.erased.primaryKey)
            #expect(Set(keys).count == 6)
            #expect(try context.fetch(FetchRequest<ShapesV3.Shape>(predicate: #Predicate { $0.color != nil }, sortBy: [SortDescriptor(\.name)])).map { "\(type(of: $0)) \($0.name)" }
                    == ["Circle c1", "Shape s1", "Triangle t1"])
        }
        try await v3.close()
        // Reopened with V3: nothing left to migrate, everything kept.
        let reopened = try place.open(ShapesV3.models)
        let count = try await reopened.performBackgroundTask { try $0.count(for: FetchRequest<ShapesV3.Shape>(predicate: #Predicate { $0.sides >= 3 })) }
        #expect(count == 4)
        try await reopened.close()
    }

    @Test("A flat entity with relationships becomes a parent: its saved links stay, and its new sub-entity's objects join them", arguments: StoreKind.persistentCases)
    func flatEntityWithRelationshipsBecomesAParent(kind: StoreKind) async throws {
        let place = try Place(kind)
        let v1 = try place.open(KennelsV1.models)
        try await v1.performBackgroundTask { context in
            let kennel = KennelsV1.Kennel(context: context)
            kennel.name = "North"
            let bone = KennelsV1.Bone(context: context)
            bone.size = 3
            let rex = KennelsV1.Hound(context: context)
            rex.name = "Rex"
            rex.kennel = kennel
            rex.bones = [bone]
            let fay = KennelsV1.Hound(context: context)
            fay.name = "Fay"
            fay.leader = rex
            fay.kennel = kennel
            try context.save()
        }
        try await v1.close()

        let v2 = try place.open(KennelsV2.models)
        try await v2.performBackgroundTask { context in
            let kennel = try #require(try context.fetch(FetchRequest<KennelsV2.Kennel>()).first)
            #expect(kennel.hounds.map(\.name).sorted() == ["Fay", "Rex"])
            let rex = try #require(kennel.hounds.first { $0.name == "Rex" })
            #expect(rex.pack.map(\.name) == ["Fay"])
            #expect(rex.bones.map(\.size) == [3])
            // A new sub-entity's object, through every saved relationship.
            let bea = KennelsV2.Beagle(context: context)
            bea.name = "Bea"
            bea.voice = 5
            bea.kennel = kennel
            bea.leader = rex
            bea.bones = rex.bones
            try context.save()
        }
        try await v2.close()
        let reopened = try place.open(KennelsV2.models)
        let seen = try await reopened.performBackgroundTask { context in
            let kennel = try #require(try context.fetch(FetchRequest<KennelsV2.Kennel>()).first)
            let bone = try #require(try context.fetch(FetchRequest<KennelsV2.Bone>()).first)
            let rex = try #require(kennel.hounds.first { $0.name == "Rex" })
            let names = { (hounds: Set<KennelsV2.Hound>) in hounds.map { "\($0.name):\(type(of: $0))" }.sorted() }
            return [names(kennel.hounds), names(rex.pack), names(bone.hounds)]
        }
        #expect(seen == [["Bea:Beagle", "Fay:Hound", "Rex:Hound"], ["Bea:Beagle", "Fay:Hound"], ["Bea:Beagle", "Rex:Hound"]])
        try await reopened.close()
    }

    @Test("Flat entities made siblings under a new parent keep their objects and keys; new objects take keys past all of them", arguments: StoreKind.persistentCases)
    func flatEntitiesBecomeSiblings(kind: StoreKind) async throws {
        let place = try Place(kind)
        let v1 = try place.open(PiecesV1.models)
        try await v1.performBackgroundTask { context in
            for square in ["a2", "b2"] { PiecesV1.Pawn(context: context).square = square }
            for square in ["a1", "h1"] { PiecesV1.Rook(context: context).square = square }
            try context.save()
        }
        try await v1.close()
        let v2 = try place.open(PiecesV2.models)
        try await v2.performBackgroundTask { context in
            let pieces = try context.fetch(FetchRequest<PiecesV2.Piece>(sortBy: [SortDescriptor(\.square)]))
            #expect(pieces.map { "\(type(of: $0)) \($0.square)" } == ["Rook a1", "Pawn a2", "Pawn b2", "Rook h1"])
            // Each table counted its keys from 1: they are kept (they are in IDs and URIs), so a
            // pawn and a rook share keys, and a live query over the parent says so.
            let refused = #expect(throws: LoomError.self) { try context.liveQuery(FetchRequest<PiecesV2.Piece>()) }
            #expect(refused?.code == .invalidRequest)
            // A new piece takes a key no saved piece has.
            let saved = Set(pieces.map(\.objectID.erased.primaryKey))
            let queen = PiecesV2.Pawn(context: context)
            queen.square = "d1"
            try context.save()
            #expect(!saved.contains(queen.objectID.erased.primaryKey))
        }
        try await v2.close()
    }

    @Test("The forecast of a hierarchy's migration names each step")
    func forecast() throws {
        let v1 = try Schema(ShapesV1.models), v2 = try Schema(ShapesV2.models), v3 = try Schema(ShapesV3.models)
        let first = try SchemaMigration.infer(from: v1.record, to: v2)
        #expect(first.summary.contains("add entity Circle"))
        #expect(first.summary.contains("add entity Square"))
        let second = try SchemaMigration.infer(from: v2.record, to: v3)
        #expect(second.summary.contains("add entity Triangle"))
        #expect(second.summary.contains("add Shape.color"))
        #expect(second.summary.contains("add Square.color"))
        #expect(!second.summary.contains { $0.contains("remove") }, "\(second.summary)")
    }

    @Test("A parent's uniqueness constraint holds across sub-entities added by migrations, and after their tables change", arguments: StoreKind.persistentCases)
    func uniquenessAcrossMigratedHierarchy(kind: StoreKind) async throws {
        let place = try Place(kind)
        let v1 = try place.open(MembersV1.models)
        try await v1.performBackgroundTask { context in
            MembersV1.Member(context: context).email = "a@x"
            try context.save()
        }
        try await v1.close()
        let v2 = try place.open(MembersV2.models)
        try await v2.performBackgroundTask { context in
            let staff = MembersV2.Staff(context: context)
            staff.email = "a@x"                         // the saved member's
            let error = #expect(throws: LoomError.self) { try context.save() }
            #expect(error?.code == .uniquenessViolation)
            staff.email = "b@x"
            try context.save()
        }
        try await v2.close()
        // V3 renames and adds a staff column and adds visitors: the constraint still holds
        // across the three tables.
        let v3 = try place.open(MembersV3.models)
        try await v3.performBackgroundTask { context in
            for (make, email) in [({ MembersV3.Visitor(context: context) as MembersV3.Member }, "a@x"), ({ MembersV3.Visitor(context: context) }, "b@x"), ({ MembersV3.Member(context: context) }, "b@x")] as [(() -> MembersV3.Member, String)] {
                let duplicate = make()
                duplicate.email = email
                let error = #expect(throws: LoomError.self) { try context.save() }
                #expect(error?.code == .uniquenessViolation, "\(type(of: duplicate)) \(email)")
                context.delete(duplicate)
            }
            let staff = try #require(try context.fetch(FetchRequest<MembersV3.Staff>()).first)
            #expect(staff.email == "b@x")
            staff.email = "c@x"                         // frees b@x
            MembersV3.Visitor(context: context).email = "b@x"
            try context.save()
            #expect(try context.fetch(FetchRequest<MembersV3.Member>(sortBy: [SortDescriptor(\.email)])).map { "\(type(of: $0)) \($0.email)" }
                    == ["Member a@x", "Visitor b@x", "Staff c@x"])
        }
        try await v3.close()
    }

    @Test("A migration that makes a parent's attribute unique fails on duplicates in two sub-entities, naming them; the store is unchanged", arguments: StoreKind.persistentCases)
    func uniquenessMigrationRefusesDuplicatesAcrossTables(kind: StoreKind) async throws {
        let place = try Place(kind)
        let v2 = try place.open(PiecesV2.models)
        try await v2.performBackgroundTask { context in
            PiecesV2.Pawn(context: context).square = "a2"
            PiecesV2.Rook(context: context).square = "a2"
            PiecesV2.Rook(context: context).square = "h1"
            try context.save()
        }
        try await v2.close()
        let refused = #expect(throws: LoomError.self) { try place.open(PiecesV3.models) }
        #expect(refused?.code == .migrationFailed)
        #expect(refused?.message.contains("square") == true, "\(refused?.message ?? "")")
        #expect(refused?.message.contains("a2") == true, "\(refused?.message ?? "")")
        // Unchanged: the old model opens it, with every piece.
        let again = try place.open(PiecesV2.models)
        let squares = try await again.performBackgroundTask { context in
            try context.fetch(FetchRequest<PiecesV2.Piece>()).map { "\(type(of: $0)) \($0.square)" }.sorted()
        }
        #expect(squares == ["Pawn a2", "Rook a2", "Rook h1"])
        // Once the duplicate moves, the migration runs, and the constraint holds.
        try await again.performBackgroundTask { context in
            let rook = try #require(try context.fetch(FetchRequest<PiecesV2.Rook>(predicate: #Predicate { $0.square == "a2" })).first)
            rook.square = "a1"
            try context.save()
        }
        try await again.close()
        let v3 = try place.open(PiecesV3.models)
        try await v3.performBackgroundTask { context in
            PiecesV3.Rook(context: context).square = "a2"
            let error = #expect(throws: LoomError.self) { try context.save() }
            #expect(error?.code == .uniquenessViolation)
        }
        try await v3.close()
    }
}
