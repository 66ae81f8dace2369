import SwiftSyntaxMacroExpansion
import Testing

@Suite struct ModelMacroTests {
    @Test func bookExpandsToTheContract() {
        assertLoomExpansion(
            #"""
            @Model final class Book {
                @Attribute(.unique) var isbn: String
                var title: String
                var pages: Int = 0
                var rating: Double?
                var status: Status = .draft
                @Transient var scratch: Int = 0
                static var shared = 1
                var computed: Int { pages * 2 }
                #Unique<Book>([\.title, \.pages])
                #Index<Book>([\.title], [\.rating, \.pages])
                init(isbn: String, title: String) { self.isbn = isbn; self.title = title }
            }
            """#,
            expandedSource: #"""
                final class Book {
                    var isbn: String {
                        get {
                            _loomObservation.access(self, keyPath: \.isbn)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.isbn) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }
                    var title: String {
                        get {
                            _loomObservation.access(self, keyPath: \.title)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 1, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.title) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 1, of: self)
                                }
                            }
                        }
                    }
                    var pages: Int {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.pages)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 2, as: Int.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.pages) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 2, of: self)
                                }
                            }
                        }
                    }
                    var rating: Double? {
                        get {
                            _loomObservation.access(self, keyPath: \.rating)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 3, as: Double?.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.rating) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 3, of: self)
                                }
                            }
                        }
                    }
                    var status: Status {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.status)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 4, as: Status.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.status) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 4, of: self)
                                }
                            }
                        }
                    }
                    var scratch: Int = 0
                    static var shared = 1
                    var computed: Int { pages * 2 }
                    init(isbn: String, title: String) { self.isbn = isbn; self.title = title }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Book.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.isbn)
                        case 1: _loomObservation.didChange(self, keyPath: \.title)
                        case 2: _loomObservation.didChange(self, keyPath: \.pages)
                        case 3: _loomObservation.didChange(self, keyPath: \.rating)
                        case 4: _loomObservation.didChange(self, keyPath: \.status)
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: [
                            .property(name: "isbn", valueType: String.self, isUnique: true),
                            .property(name: "title", valueType: String.self),
                            .property(name: "pages", valueType: Int.self, defaultValue: { 0 }),
                            .property(name: "rating", valueType: Double?.self),
                            .property(name: "status", valueType: Status.self, defaultValue: { .draft }),
                        ],
                        uniquenessConstraints: [["title", "pages"]],
                        indexes: [["title"], ["rating", "pages"]]
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Book.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Book.isbn { return "isbn" }
                        if keyPath == \Book.title { return "title" }
                        if keyPath == \Book.pages { return "pages" }
                        if keyPath == \Book.rating { return "rating" }
                        if keyPath == \Book.status { return "status" }
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "isbn": optionalChained ? \Book?.?.isbn : \Book.isbn
                        case "title": optionalChained ? \Book?.?.title : \Book.title
                        case "pages": optionalChained ? \Book?.?.pages : \Book.pages
                        case "rating": optionalChained ? \Book?.?.rating : \Book.rating
                        case "status": optionalChained ? \Book?.?.status : \Book.status
                        default: nil
                        }
                    }
                }

                extension Book: PersistentModel, Hashable {}
                """#)
    }

    @Test func memberAttributeRoleNumbersPersistentPropertiesInDeclarationOrder() {
        assertLoomExpansion(
            """
            @Model final class Book {
                @Attribute(.unique) var isbn: String
                @Transient var scratch: Int = 0
                static var shared = 1
                var title: String
                lazy var cache: [String] = []
                var computed: Int { 0 }
                var pages: Int = 0
            }
            """,
            expandedSource: """
                final class Book {
                    @Attribute(.unique)
                    @_PersistedProperty(index: 0) var isbn: String
                    @Transient var scratch: Int = 0
                    static var shared = 1
                    @_PersistedProperty(index: 1)
                    var title: String
                    lazy var cache: [String] = []
                    var computed: Int { 0 }
                    @_PersistedProperty(index: 2)
                    var pages: Int = 0
                }
                """,
            macros: ["Model": MacroSpec(type: ModelMemberAttributeRole.self)])
    }

    @Test func publicClassGetsPublicRequiredMembers() {
        assertLoomExpansion(
            #"""
            @Model public class Author {
                public var name: String
            }
            """#,
            expandedSource: #"""
                public class Author {
                    public var name: String {
                        get {
                            _loomObservation.access(self, keyPath: \.name)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.name) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) final var _loomSlot = _ObjectSlot()

                    public final var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: type(of: self).entity)
                    }

                    @inline(__always) final func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) final var _loomObservation = _ObservationSlot()

                    public var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    public func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.name)
                        default: break
                        }
                    }

                    private static let _loomEntityDescription: EntityDescription = EntityDescription(
                        name: "Author",
                        modelType: Author.self,
                        properties: [
                            .property(name: "name", valueType: String.self),
                        ]
                    )

                    public class var entity: EntityDescription { _loomEntityDescription }

                    private static var _loomPropertyOffset: Int { 0 }

                    public required init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    public convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Self.entity))
                        context.insert(self)
                    }

                    public class func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        _loomPropertyName(in: Self.self, for: keyPath)
                    }

                    private static func _loomPropertyName<Root: Author>(in root: Root.Type, for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Root.name { return "name" }
                        return nil
                    }

                    public class func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        if Self.self == Author.self {
                            return _loomKeyPath(ownPropertyNamed: name, optionalChained: optionalChained)
                        }
                        return _loomKeyPath(in: Self.self, for: name, optionalChained: optionalChained)
                    }

                    private static func _loomKeyPath(ownPropertyNamed name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "name": optionalChained ? \Author?.?.name : \Author.name
                        default: nil
                        }
                    }

                    private static func _loomKeyPath<Root: Author>(in root: Root.Type, for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "name": optionalChained ? \Root?.?.name : \Root.name
                        default: nil
                        }
                    }
                }

                extension Author: PersistentModel, Hashable {}
                """#)
    }

    @Test(arguments: [
        ("public final", "public "),
        ("package final", "package "),
        ("final", ""),
        ("private final", ""),
    ])
    func membersMatchTheAccessOfTheClass(modifiers: String, access: String) {
        assertLoomExpansion(
            """
            @Model \(modifiers) class Tag {
            }
            """,
            expandedSource: #"""
                \#(modifiers) class Tag {

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    \#(access)var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Tag.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    \#(access)var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    \#(access)func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        default: break
                        }
                    }

                    \#(access)static let entity: EntityDescription = EntityDescription(
                        name: "Tag",
                        modelType: Tag.self,
                        properties: []
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    \#(access)init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    \#(access)convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Tag.entity))
                        context.insert(self)
                    }

                    \#(access)static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        return nil
                    }

                    \#(access)static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        default: nil
                        }
                    }
                }

                extension Tag: PersistentModel, Hashable {}
                """#)
    }

    @Test func optionalTypesAreKeptAsWritten() {
        assertLoomExpansion(
            """
            @Model final class Reader {
                var nickname: String?
                var email: Optional<String>
                var lastSeen: Date? = nil
                var favorite: Int!
            }
            """,
            expandedSource: #"""
                final class Reader {
                    var nickname: String? {
                        get {
                            _loomObservation.access(self, keyPath: \.nickname)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String?.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.nickname) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }
                    var email: Optional<String> {
                        get {
                            _loomObservation.access(self, keyPath: \.email)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 1, as: Optional<String>.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.email) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 1, of: self)
                                }
                            }
                        }
                    }
                    var lastSeen: Date? {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.lastSeen)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 2, as: Date?.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.lastSeen) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 2, of: self)
                                }
                            }
                        }
                    }
                    var favorite: Int! {
                        get {
                            _loomObservation.access(self, keyPath: \.favorite)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 3, as: Int?.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.favorite) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 3, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Reader.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.nickname)
                        case 1: _loomObservation.didChange(self, keyPath: \.email)
                        case 2: _loomObservation.didChange(self, keyPath: \.lastSeen)
                        case 3: _loomObservation.didChange(self, keyPath: \.favorite)
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Reader",
                        modelType: Reader.self,
                        properties: [
                            .property(name: "nickname", valueType: String?.self),
                            .property(name: "email", valueType: Optional<String>.self),
                            .property(name: "lastSeen", valueType: Date?.self, defaultValue: { nil }),
                            .property(name: "favorite", valueType: Int?.self),
                        ]
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Reader.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Reader.nickname { return "nickname" }
                        if keyPath == \Reader.email { return "email" }
                        if keyPath == \Reader.lastSeen { return "lastSeen" }
                        if keyPath == \Reader.favorite { return "favorite" }
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "nickname": optionalChained ? \Reader?.?.nickname : \Reader.nickname
                        case "email": optionalChained ? \Reader?.?.email : \Reader.email
                        case "lastSeen": optionalChained ? \Reader?.?.lastSeen : \Reader.lastSeen
                        case "favorite": optionalChained ? \Reader?.?.favorite : \Reader.favorite
                        default: nil
                        }
                    }
                }

                extension Reader: PersistentModel, Hashable {}
                """#)
    }

    @Test func classWithoutPersistentPropertiesHasAnEntityWithoutAttributes() {
        assertLoomExpansion(
            """
            @Model final class Session {
                @Transient var openedAt: Int = 0
                @Transient var note: String?
                static let shared = 1
                var uptime: Int { openedAt }
            }
            """,
            expandedSource: """
                final class Session {
                    var openedAt: Int = 0
                    var note: String?
                    static let shared = 1
                    var uptime: Int { openedAt }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Session.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Session",
                        modelType: Session.self,
                        properties: []
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Session.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        default: nil
                        }
                    }
                }

                extension Session: PersistentModel, Hashable {}
                """)
    }

    /// `@Loom.Attribute` stays in the expected source only because the test expander knows macros
    /// by their plain name; the compiler resolves it, and `@Model` reads it either way.
    @Test func attributeOptionsBecomeEntityArguments() {
        assertLoomExpansion(
            """
            @Model final class Account {
                @Attribute(.index, originalName: "fullName") var name: String
                @Attribute(.unique, .index) var email: String = ""
                @Loom.Attribute(AttributeOption.unique) var handle: String
            }
            """,
            expandedSource: #"""
                final class Account {
                    var name: String {
                        get {
                            _loomObservation.access(self, keyPath: \.name)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.name) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }
                    var email: String {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.email)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 1, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.email) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 1, of: self)
                                }
                            }
                        }
                    }
                    @Loom.Attribute(AttributeOption.unique)
                    var handle: String {
                        get {
                            _loomObservation.access(self, keyPath: \.handle)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 2, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.handle) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 2, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Account.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.name)
                        case 1: _loomObservation.didChange(self, keyPath: \.email)
                        case 2: _loomObservation.didChange(self, keyPath: \.handle)
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Account",
                        modelType: Account.self,
                        properties: [
                            .property(name: "name", valueType: String.self, isIndexed: true, originalName: "fullName"),
                            .property(name: "email", valueType: String.self, isUnique: true, isIndexed: true, defaultValue: { "" }),
                            .property(name: "handle", valueType: String.self, isUnique: true),
                        ]
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Account.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Account.name { return "name" }
                        if keyPath == \Account.email { return "email" }
                        if keyPath == \Account.handle { return "handle" }
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "name": optionalChained ? \Account?.?.name : \Account.name
                        case "email": optionalChained ? \Account?.?.email : \Account.email
                        case "handle": optionalChained ? \Account?.?.handle : \Account.handle
                        default: nil
                        }
                    }
                }

                extension Account: PersistentModel, Hashable {}
                """#)
    }

    @Test func backtickedNamesAreStoredWithoutBackticks() {
        assertLoomExpansion(
            """
            @Model final class Setting {
                var `default`: Bool = false
            }
            """,
            expandedSource: #"""
                final class Setting {
                    var `default`: Bool {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.`default`)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: Bool.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.`default`) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Setting.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.`default`)
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Setting",
                        modelType: Setting.self,
                        properties: [
                            .property(name: "default", valueType: Bool.self, defaultValue: { false }),
                        ]
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Setting.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Setting.`default` { return "default" }
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "default": optionalChained ? \Setting?.?.`default` : \Setting.`default`
                        default: nil
                        }
                    }
                }

                extension Setting: PersistentModel, Hashable {}
                """#)
    }
}

@Suite struct RelationshipMacroTests {
    @Test func relationshipsAreDescribedByTheirTypeAndAttribute() {
        assertLoomExpansion(
            #"""
            @Model final class Author {
                var name: String
                @Relationship(deleteRule: .cascade, inverse: \Book.author) var books: Set<Book> = []
                var mentor: Author?
            }
            """#,
            expandedSource: #"""
                final class Author {
                    var name: String {
                        get {
                            _loomObservation.access(self, keyPath: \.name)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.name) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }
                    var books: Set<Book> {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.books)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 1, as: Set<Book>.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.books) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 1, of: self)
                                }
                            }
                        }
                    }
                    var mentor: Author? {
                        get {
                            _loomObservation.access(self, keyPath: \.mentor)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 2, as: Author?.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.mentor) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 2, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) private var _loomSlot = _ObjectSlot()

                    var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: Author.entity)
                    }

                    @inline(__always) private func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) private var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.name)
                        case 1: _loomObservation.didChange(self, keyPath: \.books)
                        case 2: _loomObservation.didChange(self, keyPath: \.mentor)
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Author",
                        modelType: Author.self,
                        properties: [
                            .property(name: "name", valueType: String.self),
                            .relationship(name: "books", valueType: Set<Book>.self, deleteRule: .cascade, inverse: \Book.author, defaultValue: { [] }),
                            .property(name: "mentor", valueType: Author?.self),
                        ]
                    )

                    private static var _loomPropertyOffset: Int { 0 }

                    init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Author.entity))
                        context.insert(self)
                    }

                    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Author.name { return "name" }
                        if keyPath == \Author.books { return "books" }
                        if keyPath == \Author.mentor { return "mentor" }
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "name": optionalChained ? \Author?.?.name : \Author.name
                        case "books": optionalChained ? \Author?.?.books : \Author.books
                        case "mentor": optionalChained ? \Author?.?.mentor : \Author.mentor
                        default: nil
                        }
                    }
                }

                extension Author: PersistentModel, Hashable {}
                """#)
    }
}
