/// One version of an application's model: its identifier and its `@Model` types, SwiftData's
/// `VersionedSchema`.
///
/// Declare each version's classes inside an enum of their own: `V1.Book` and `V2.Book` are both
/// the entity `Book` (an entity is named after its class, without the enclosing type).
///
/// ```swift
/// enum LibraryV1: VersionedSchema {
///     static let versionIdentifier = Schema.Version(1, 0, 0)
///     static var models: [any PersistentModel.Type] { [Book.self] }
///     @Model final class Book { var title: String; init(title: String) { self.title = title } }
/// }
/// ```
public protocol VersionedSchema: SendableMetatype {
    /// This version's identifier, saved in the store (``SchemaMigrationPlan`` orders versions by
    /// its `schemas` list, not by this number).
    static var versionIdentifier: Schema.Version { get }
    /// The `@Model` classes of this version.
    static var models: [any PersistentModel.Type] { get }
}

extension Schema {
    /// A model version's identifier, such as 2.1.0.
    public struct Version: Sendable, Hashable, Comparable, CustomStringConvertible, Codable {
        public var major: Int
        public var minor: Int
        public var patch: Int

        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// Reads `"2.1.0"`; `nil` for anything else.
        public init?(_ text: String) {
            let parts = text.split(separator: ".").map { Int($0) }
            guard parts.count == 3, let major = parts[0], let minor = parts[1], let patch = parts[2] else { return nil }
            self.init(major, minor, patch)
        }

        public var description: String { "\(major).\(minor).\(patch)" }

        public static func < (a: Version, b: Version) -> Bool {
            (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
        }
    }

    /// The schema of one model version.
    ///
    /// - Throws: ``LoomError/Code/invalidModel`` when its models do not form a valid schema.
    public init(versionedSchema: any VersionedSchema.Type) throws(LoomError) {
        try self.init(versionedSchema.models)
    }
}

/// How a store saved by any earlier version of the model becomes a store of the current one:
/// the versions, oldest first, and one ``MigrationStage`` from each to the next. SwiftData's
/// `SchemaMigrationPlan`.
///
/// ```swift
/// enum LibraryPlan: SchemaMigrationPlan {
///     static var schemas: [any VersionedSchema.Type] { [LibraryV1.self, LibraryV2.self] }
///     static var stages: [MigrationStage] { [.lightweight(fromVersion: LibraryV1.self, toVersion: LibraryV2.self)] }
/// }
/// let container = try await PersistentContainer(name: "Library", for: LibraryV2.self, migrationPlan: LibraryPlan.self)
/// ```
///
/// A plan is checked when a container opens with it: its stages must go from each version in
/// `schemas` to the next, in order, without skipping or repeating one, and end at the version
/// the container is opened with; two versions may not have the same model. A plan that does not
/// is refused with ``LoomError/Code/invalidMigrationPlan`` before the store is touched.
public protocol SchemaMigrationPlan: SendableMetatype {
    /// Every version a store may have been saved with, oldest first; the last is the current one.
    static var schemas: [any VersionedSchema.Type] { get }
    /// One stage from each version to the next, in the order of `schemas`.
    static var stages: [MigrationStage] { get }
}

/// One step of a ``SchemaMigrationPlan``, from one model version to the next.
///
/// Both kinds migrate the store's tables by inference (`SchemaMigration`) in one transaction:
/// renames need `@Attribute(originalName:)`. A `.custom` stage also runs code of yours:
/// `willMigrate` on a context of the old version before the tables change (to remove or fix what
/// the new model would refuse, such as duplicates under a new uniqueness constraint), and
/// `didMigrate` on a context of the new version after (to fill what the new model adds). Each
/// closure runs on its own context's queue inside one write transaction that saves its changes
/// and records the step as done, so a crash either loses all of a step or none of it, and a
/// reopen resumes after the last step done; a step never runs twice to completion.
///
/// No stage drops saved data unannounced: a stage whose new version lacks an entity that still
/// holds objects, or an attribute (of an entity it keeps) that still holds values, fails with
/// ``LoomError/Code/migrationFailed`` naming the entity (and the attribute) before anything of
/// the stage runs, unless it says `allowsDataLoss: true`. A transform stage's own entity is read
/// by its transform, so its attributes may go; the links of a dropped relationship are not
/// counted. Opening without a plan migrates by inference as Core Data's lightweight migration
/// does, dropping what the model no longer has.
public enum MigrationStage: Sendable {
    /// A stage whose changes are inferred: Core Data's lightweight migration. Without
    /// `allowsDataLoss`, it refuses to drop an entity or attribute that still holds data (see
    /// ``MigrationStage``).
    case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type, allowsDataLoss: Bool = false)
    /// A stage with code before and after the inferred change of tables. Throwing from either
    /// closure stops the migration with your error; what was done before stays, and the next
    /// open resumes from there. Without `allowsDataLoss`, a stage whose new version drops an
    /// entity or attribute that still holds data fails before `willMigrate` runs (see
    /// ``MigrationStage``): what the closures do with it cannot be seen, so say that it may go.
    case custom(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
        willMigrate: (@Sendable (ManagedObjectContext) throws -> Void)?,
        didMigrate: (@Sendable (ManagedObjectContext) throws -> Void)?,
        allowsDataLoss: Bool = false)

    /// A stage that hands every object of one entity, as saved by the old version, to your code
    /// together with a context of the new version, in chunks: Loom's own form, which SwiftData
    /// lacks. See ``custom(fromVersion:toVersion:transforming:chunkSize:allowsDataLoss:transform:)``.
    case transform(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type, MigrationTransform)

    /// A stage whose code sees both versions at once: each chunk of `chunkSize` objects of
    /// `Old`'s entity, read from a copy of the store as the old version saved it (with a
    /// read-only context of the old version, for following its relationships), and a context of
    /// the new version to write into, after the store's tables were changed by inference.
    ///
    /// ```swift
    /// .custom(fromVersion: V1.self, toVersion: V2.self, transforming: V1.Person.self, chunkSize: 1_000) { people, old, new in
    ///     for person in people {
    ///         let migrated = try new.migratedObject(person, as: V2.Person.self)   // same object, new model
    ///         let parts = person.fullName.split(separator: " ", maxSplits: 1)
    ///         migrated.firstName = String(parts.first ?? "")
    ///         migrated.lastName = parts.count > 1 ? String(parts[1]) : ""
    ///     }
    /// }
    /// ```
    ///
    /// Each chunk's changes commit in one transaction with the position reached, so a process
    /// killed in the middle resumes after the last committed chunk at the next open; a chunk never
    /// commits twice. The copy (`<store>-migration-source`) is removed when the stage ends.
    /// Objects the new version still has keep their ``ObjectID`` (and primary key).
    ///
    /// - Parameters:
    ///   - fromVersion: the version the stage starts from.
    ///   - toVersion: the version it ends at.
    ///   - transforming: the model type (of `fromVersion`) whose objects `transform` is given.
    ///   - chunkSize: how many objects each call of `transform` gets, and each commit holds.
    ///   - allowsDataLoss: without it, a stage whose new version drops an entity (other
    ///     than `Old`'s, which `transform` sees) that still holds objects, or an attribute of
    ///     such an entity that still holds values, fails with ``LoomError/Code/migrationFailed``
    ///     naming it, before anything changes.
    ///   - transform: called with each chunk of old objects, a context on the old store and one
    ///     on the new; it fills in the new objects (``ManagedObjectContext/migratedObject(_:as:)``).
    public static func custom<Old: PersistentModel & SendableMetatype>(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type, transforming: Old.Type,
        chunkSize: Int = 1_000, allowsDataLoss: Bool = false,
        transform: @escaping @Sendable (_ objects: [Old], _ old: ManagedObjectContext, _ new: ManagedObjectContext) throws -> Void
    ) -> MigrationStage {
        .transform(fromVersion: fromVersion, toVersion: toVersion, MigrationTransform(
            entityName: Old.entity.name, chunkSize: max(1, chunkSize), allowsDataLoss: allowsDataLoss,
            body: { objects, old, new in try transform(objects.compactMap { $0 as? Old }, old, new) }))
    }

    /// The version this stage starts from.
    public var fromVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(let from, _, _), .custom(let from, _, _, _, _), .transform(let from, _, _): from
        }
    }

    /// The version this stage ends at.
    public var toVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(_, let to, _), .custom(_, let to, _, _, _), .transform(_, let to, _): to
        }
    }

    /// Whether the stage may drop entities and attributes that still hold data.
    public var allowsDataLoss: Bool {
        switch self {
        case .lightweight(_, _, let allows), .custom(_, _, _, _, let allows): allows
        case .transform(_, _, let transform): transform.allowsDataLoss
        }
    }

    /// `"lightweight 1.0.0 → 2.0.0"`.
    public var name: String {
        switch self {
        case .lightweight: "lightweight \(fromVersion.versionIdentifier) → \(toVersion.versionIdentifier)"
        case .custom: "custom \(fromVersion.versionIdentifier) → \(toVersion.versionIdentifier)"
        case .transform(_, _, let transform): "transform \(transform.entityName) \(fromVersion.versionIdentifier) → \(toVersion.versionIdentifier)"
        }
    }
}

/// What a chunked ``MigrationStage/transform(fromVersion:toVersion:_:)`` stage runs: made by
/// ``MigrationStage/custom(fromVersion:toVersion:transforming:chunkSize:allowsDataLoss:transform:)``.
public struct MigrationTransform: Sendable {
    /// The entity (of the old version) whose objects are handed over.
    public let entityName: String
    /// How many objects each chunk holds, and commits.
    public let chunkSize: Int
    /// Whether the stage may drop entities and attributes that still hold data.
    public let allowsDataLoss: Bool
    let body: @Sendable (_ objects: [any BackedObject], _ old: ManagedObjectContext, _ new: ManagedObjectContext) throws -> Void
}
