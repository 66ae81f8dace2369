import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

/// `@Model` on the classes of a hierarchy: a subclass of a model class (for which the compiler
/// asks for no `PersistentModel` conformance) and an abstract root. A non-final root is
/// `ModelMacroTests.publicClassGetsPublicRequiredMembers`.
@Suite struct ModelHierarchyMacroTests {
    /// `@Model` on a subclass of a `@Model` class: the compiler passes no conformances, as the
    /// class already has them.
    static let subclassMacros: [String: MacroSpec] = loomMacros.merging(
        ["Model": MacroSpec(type: ModelMacro.self, conformances: [])]) { $1 }

    @Test func subclassOfAModelOverridesItsSuperclass() {
        assertLoomExpansion(
            #"""
            @Model final class BusinessTrip: Trip {
                var company: String
            }
            """#,
            expandedSource: #"""
                final class BusinessTrip: Trip {
                    var company: String {
                        get {
                            _loomObservation.access(self, keyPath: \.company)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: String.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.company) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }

                    override func _loomPropertyDidChange(at index: Int) {
                        switch index - BusinessTrip._loomPropertyOffset {
                        case 0: _loomObservation.didChange(self, keyPath: \.company)
                        default: super._loomPropertyDidChange(at: index)
                        }
                    }

                    private static let _loomEntityDescription: EntityDescription = EntityDescription(
                        name: "BusinessTrip",
                        modelType: BusinessTrip.self,
                        properties: [
                            .property(name: "company", valueType: String.self),
                        ],
                        superentity: _loomSuperentity()
                    )

                    private static func _loomSuperentity() -> EntityDescription { super.entity }

                    override class var entity: EntityDescription { _loomEntityDescription }

                    private static let _loomPropertyOffset = _loomEntityDescription.inheritedPropertyCount

                    required init(backing: _ObjectBacking) {
                        super.init(backing: backing)
                    }

                    convenience init(context: ManagedObjectContext) {
                        self.init(backing: _ObjectBacking(entity: Self.entity))
                        context.insert(self)
                    }

                    override class func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        _loomPropertyName(in: Self.self, for: keyPath) ?? super._loomPropertyName(for: keyPath)
                    }

                    private static func _loomPropertyName<Root: BusinessTrip>(in root: Root.Type, for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Root.company { return "company" }
                        return nil
                    }

                    override class func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "company": optionalChained ? \BusinessTrip?.?.company : \BusinessTrip.company
                        default: super._loomKeyPath(for: name, optionalChained: optionalChained)
                        }
                    }
                }
                """#,
            macros: Self.subclassMacros)
    }

    @Test func abstractRootHasNoContextInitializer() {
        assertLoomExpansion(
            #"""
            @Model(abstract: true) class Vehicle {
                var wheels: Int = 4
            }
            """#,
            expandedSource: #"""
                class Vehicle {
                    var wheels: Int {
                        init(initialValue) {
                        }
                        get {
                            _loomObservation.access(self, keyPath: \.wheels)
                            return _loomWithBacking {
                                $0.value(at: Self._loomPropertyOffset &+ 0, as: Int.self)
                            }
                        }
                        set {
                            _loomObservation.withMutation(of: self, keyPath: \.wheels) {
                                _loomWithBacking {
                                    $0.setValue(newValue, at: Self._loomPropertyOffset &+ 0, of: self)
                                }
                            }
                        }
                    }

                    @exclusivity(unchecked) final var _loomSlot = _ObjectSlot()

                    final var _loomBacking: _ObjectBacking {
                        if let backing = _loomSlot.current { return backing }
                        return _loomSlot.makeBacking(for: type(of: self).entity)
                    }

                    @inline(__always) final func _loomWithBacking<Result>(_ body: (_ObjectBacking) -> Result) -> Result {
                        if let result = _loomSlot.withCurrentBacking(body) { return result }
                        return body(_loomBacking)
                    }

                    @exclusivity(unchecked) final var _loomObservation = _ObservationSlot()

                    var _loomMayBeObserved: Bool { _loomObservation.mayBeObserved }

                    func _loomPropertyDidChange(at index: Int) {
                        switch index {
                        case 0: _loomObservation.didChange(self, keyPath: \.wheels)
                        default: break
                        }
                    }

                    private static let _loomEntityDescription: EntityDescription = EntityDescription(
                        name: "Vehicle",
                        modelType: Vehicle.self,
                        properties: [
                            .property(name: "wheels", valueType: Int.self, defaultValue: { 4 }),
                        ],
                        isAbstract: true
                    )

                    class var entity: EntityDescription { _loomEntityDescription }

                    private static var _loomPropertyOffset: Int { 0 }

                    required init(backing: _ObjectBacking) {
                        self._loomSlot = _ObjectSlot(backing)
                    }

                    class func _loomPropertyName(for keyPath: AnyKeyPath) -> String? {
                        _loomPropertyName(in: Self.self, for: keyPath)
                    }

                    private static func _loomPropertyName<Root: Vehicle>(in root: Root.Type, for keyPath: AnyKeyPath) -> String? {
                        if keyPath == \Root.wheels { return "wheels" }
                        return nil
                    }

                    class func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        if Self.self == Vehicle.self {
                            return _loomKeyPath(ownPropertyNamed: name, optionalChained: optionalChained)
                        }
                        return _loomKeyPath(in: Self.self, for: name, optionalChained: optionalChained)
                    }

                    private static func _loomKeyPath(ownPropertyNamed name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "wheels": optionalChained ? \Vehicle?.?.wheels : \Vehicle.wheels
                        default: nil
                        }
                    }

                    private static func _loomKeyPath<Root: Vehicle>(in root: Root.Type, for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        case "wheels": optionalChained ? \Root?.?.wheels : \Root.wheels
                        default: nil
                        }
                    }
                }

                extension Vehicle: PersistentModel, Hashable {}
                """#)
    }
}
