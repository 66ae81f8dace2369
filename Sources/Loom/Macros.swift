public import LoomCore

/// Makes a class a persistent model, whose stored properties Loom keeps in the store.
///
/// Every stored instance `var` is persistent unless it is marked ``Transient()``; it needs an
/// explicit type, and its initial value, if any, becomes the attribute's default value. A
/// property typed with another `@Model` class is a relationship: `Author?` (to-one), `Author`
/// (required to-one), `Set<Book>` (to-many) or `[Book]` (ordered to-many); see
/// `Relationship(deleteRule:inverse:)`. `static`, `lazy` and computed properties are not
/// persistent. `@Model` adds the `PersistentModel` conformance (models are `Hashable` by
/// identity, and `Observable`: see `PersistentModel`), the entity description `entity`,
/// `init(backing:)` and `init(context:)`.
///
/// ```swift
/// @Model final class Book {
///     @Attribute(.unique) var isbn: String
///     var title: String
///     var pages: Int = 0
///     @Transient var isExpanded = false
///     #Index<Book>([\.title])
///
///     init(isbn: String, title: String) {
///         self.isbn = isbn
///         self.title = title
///     }
/// }
///
/// let book = Book(context: context)
/// ```
@attached(member, conformances: PersistentModel, names: named(_loomSlot), named(_loomBacking), named(_loomWithBacking), named(_loomObservation), named(_loomMayBeObserved), named(_loomPropertyDidChange), named(entity), named(_loomEntityDescription), named(_loomSuperentity), named(_loomPropertyOffset), named(init), named(_loomPropertyName), named(_loomKeyPath))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Hashable)
public macro Model() = #externalMacro(module: "LoomMacros", type: "ModelMacro")

/// ``Model()`` for a class whose entity had another name in the previous model version: a store
/// saved with `originalName` keeps its objects (and their links) when migrated.
///
/// ```swift
/// @Model(originalName: "Item") final class Product { var name: String; init(name: String) { self.name = name } }
/// ```
@attached(member, conformances: PersistentModel, names: named(_loomSlot), named(_loomBacking), named(_loomWithBacking), named(_loomObservation), named(_loomMayBeObserved), named(_loomPropertyDidChange), named(entity), named(_loomEntityDescription), named(_loomSuperentity), named(_loomPropertyOffset), named(init), named(_loomPropertyName), named(_loomKeyPath))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Hashable)
public macro Model(originalName: String) = #externalMacro(module: "LoomMacros", type: "ModelMacro")

/// ``Model()`` for the root of a hierarchy whose entity is abstract (Core Data's `isAbstract`)
/// or not: an abstract entity has no objects of its own, only those of its sub-entities, the
/// `@Model` subclasses of the class. `@Model(abstract: true)` generates no `init(context:)`, and
/// inserting an object of the class otherwise is refused with `LoomError.Code.abstractEntity`.
///
/// ```swift
/// @Model(abstract: true) class Vehicle { var wheels: Int = 4; init() {} }
/// @Model final class Bicycle: Vehicle { var gears: Int = 1 }
/// ```
///
/// A subclass of a `@Model` class is written with `@Model` too (SwiftData's
/// `@Model class BusinessTrip: Trip`); its entity inherits the superclass's attributes,
/// constraints and indexes, and a fetch of the superclass returns objects of every subclass
/// (see `FetchRequest.includesSubentities`). The argument is a literal.
@attached(member, conformances: PersistentModel, names: named(_loomSlot), named(_loomBacking), named(_loomWithBacking), named(_loomObservation), named(_loomMayBeObserved), named(_loomPropertyDidChange), named(entity), named(_loomEntityDescription), named(_loomSuperentity), named(_loomPropertyOffset), named(init), named(_loomPropertyName), named(_loomKeyPath))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Hashable)
public macro Model(abstract: Bool) = #externalMacro(module: "LoomMacros", type: "ModelMacro")

/// ``Model(abstract:)`` for an entity renamed since the previous model version (see ``Model(originalName:)``).
@attached(member, conformances: PersistentModel, names: named(_loomSlot), named(_loomBacking), named(_loomWithBacking), named(_loomObservation), named(_loomMayBeObserved), named(_loomPropertyDidChange), named(entity), named(_loomEntityDescription), named(_loomSuperentity), named(_loomPropertyOffset), named(init), named(_loomPropertyName), named(_loomKeyPath))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Hashable)
public macro Model(abstract: Bool, originalName: String) = #externalMacro(module: "LoomMacros", type: "ModelMacro")

/// Stores a property of a ``Model()`` class in its object backing; `@Model` writes it, you don't.
///
/// `index` is the property's place among the persistent properties of its class, in
/// declaration order, which is also its place in the entity's attributes.
///
/// ```swift
/// @_PersistedProperty(index: 2) var pages: Int = 0
/// ```
@attached(accessor, names: named(init), named(get), named(set))
public macro _PersistedProperty(index: Int) =
    #externalMacro(module: "LoomMacros", type: "PersistedPropertyMacro")

/// Sets options of a persistent property of a ``Model()`` class, such as uniqueness, and the
/// name it had in the previous model version when it was renamed.
///
/// ```swift
/// @Attribute(.unique) var isbn: String
/// @Attribute(.index) var title: String
/// @Attribute(originalName: "name") var fullName: String   // was `name`: values are kept
/// ```
@attached(peer)
public macro Attribute(_ options: AttributeOption..., originalName: String? = nil) =
    #externalMacro(module: "LoomMacros", type: "AttributeMacro")

/// Declares a relationship of a ``Model()`` class: its delete rule and its inverse.
///
/// A property typed with a model class is a relationship even without this attribute: `Author?`
/// is an optional to-one, `Author` a required to-one, `Set<Book>` a to-many and `[Book]` an
/// ordered to-many. Every relationship needs an inverse, named on at least one side:
///
/// ```swift
/// @Model final class Author {
///     var name: String
///     @Relationship(deleteRule: .cascade, inverse: \Book.author) var books: Set<Book> = []
/// }
/// @Model final class Book {
///     var title: String
///     var author: Author?          // the inverse of Author.books
/// }
/// ```
///
/// Setting either side updates the other at once. Delete rules run when the context processes
/// pending changes (see `DeleteRule`). `originalName` is the relationship's name in the
/// previous model version: a store saved with that name keeps its links when migrated.
@attached(peer)
public macro Relationship(deleteRule: DeleteRule = .nullify, inverse: AnyKeyPath? = nil, originalName: String? = nil) =
    #externalMacro(module: "LoomMacros", type: "RelationshipMacro")

/// Keeps a stored property of a ``Model()`` class out of the store; it needs an initial value.
///
/// ```swift
/// @Transient var isExpanded = false
/// ```
@attached(peer)
public macro Transient() = #externalMacro(module: "LoomMacros", type: "TransientMacro")

/// Declares that no two objects of a ``Model()`` class have equal values for the listed properties.
///
/// Each array is one constraint; a constraint over several properties forbids only equal
/// combinations. It must stand in the body of the class, and name persistent properties.
///
/// ```swift
/// @Model final class Book {
///     var title: String
///     var edition: Int
///     #Unique<Book>([\.title, \.edition])
/// }
/// ```
@freestanding(declaration)
public macro Unique<T>(_ keyPaths: [PartialKeyPath<T>]...) =
    #externalMacro(module: "LoomMacros", type: "UniqueMacro")

/// Declares indexes of a ``Model()`` class, to speed up fetches that filter or sort on them.
///
/// Each array is one index, over one property or several. It must stand in the body of the
/// class, and name persistent properties.
///
/// ```swift
/// @Model final class Book {
///     var title: String
///     var rating: Double?
///     var pages: Int
///     #Index<Book>([\.title], [\.rating, \.pages])
/// }
/// ```
@freestanding(declaration)
public macro Index<T>(_ keyPaths: [PartialKeyPath<T>]...) =
    #externalMacro(module: "LoomMacros", type: "IndexMacro")
