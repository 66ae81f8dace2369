import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

@Suite struct ModelDiagnosticsTests {
    /// `@Model` with only `static let entity`: the diagnostics come from its member role, and
    /// the other members don't matter here.
    static let entityOnly: [String: MacroSpec] = [
        "Model": MacroSpec(type: ModelEntityOnly.self, conformances: ["PersistentModel"]),
        "Transient": loomMacros["Transient"]!,
    ]

    @Test(arguments: ["struct", "enum", "actor"])
    func modelOnANonClassIsAnError(kind: String) {
        assertLoomExpansion(
            """
            @Model \(kind) Book {
                var title: String
            }
            """,
            expandedSource: """
                \(kind) Book {
                    var title: String
                }
                """,
            diagnostics: [DiagnosticSpec(message: "@Model can only be applied to a class", line: 1, column: 1)])
    }

    @Test func persistentLetIsAnErrorWithFixIts() {
        assertLoomExpansion(
            """
            @Model final class Book {
                let isbn: String
            }
            """,
            expandedSource: """
                final class Book {
                    let isbn: String

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "persistent properties must be 'var'; mark it @Transient to keep it out of the store",
                    line: 2, column: 5,
                    fixIts: [FixItSpec(message: "replace 'let' with 'var'"), FixItSpec(message: "mark it @Transient")])
            ],
            macros: Self.entityOnly,
            applyFixIts: ["replace 'let' with 'var'"],
            fixedSource: """
                @Model final class Book {
                    var isbn: String
                }
                """)
    }

    @Test func transientFixItKeepsTheIndentation() {
        assertLoomExpansion(
            """
            @Model final class Book {
                let isbn: String
            }
            """,
            expandedSource: """
                final class Book {
                    let isbn: String

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "persistent properties must be 'var'; mark it @Transient to keep it out of the store",
                    line: 2, column: 5,
                    fixIts: [FixItSpec(message: "replace 'let' with 'var'"), FixItSpec(message: "mark it @Transient")])
            ],
            macros: Self.entityOnly,
            applyFixIts: ["mark it @Transient"],
            fixedSource: """
                @Model final class Book {
                    @Transient let isbn: String
                }
                """)
    }

    @Test func persistentPropertyWithoutTypeIsAnError() {
        assertLoomExpansion(
            """
            @Model final class Book {
                var x = 0
            }
            """,
            expandedSource: """
                final class Book {
                    var x = 0

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "add an explicit type to 'x' so Loom can store it", line: 2, column: 9)
            ],
            macros: Self.entityOnly)
    }

    @Test func transientPropertyWithoutInitialValueIsAnError() {
        assertLoomExpansion(
            """
            @Model final class Book {
                @Transient var x: Int
                @Transient var y: Int?
                @Transient let z: String
            }
            """,
            expandedSource: """
                final class Book {
                    var x: Int
                    var y: Int?
                    let z: String

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "a @Transient property needs an initial value", line: 2, column: 20),
                DiagnosticSpec(message: "a @Transient property needs an initial value", line: 4, column: 20),
            ],
            macros: Self.entityOnly)
    }

    @Test func observedPersistentPropertyIsAnError() {
        assertLoomExpansion(
            """
            @Model final class Book {
                var title: String { didSet { print(title) } }
            }
            """,
            expandedSource: """
                final class Book {
                    var title: String { didSet { print(title) } }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "persistent properties can't have 'willSet' or 'didSet'; mark it @Transient to keep it out of the store",
                    line: 2, column: 23,
                    fixIts: [FixItSpec(message: "mark it @Transient")])
            ],
            macros: Self.entityOnly)
    }

    @Test func severalPropertiesInOneVarAreAnError() {
        assertLoomExpansion(
            """
            @Model final class Book {
                var width: Double = 0, height: Double = 0
            }
            """,
            expandedSource: """
                final class Book {
                    var width: Double = 0, height: Double = 0

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
                    )
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "declare each persistent property in its own 'var' so Loom can store it",
                    line: 2, column: 9)
            ],
            macros: Self.entityOnly)
    }

    @Test func genericClassIsAnErrorAndGetsNoMembers() {
        assertLoomExpansion(
            """
            @Model final class Box<Value> {
                var count: Int
            }
            """,
            expandedSource: """
                final class Box<Value> {
                    var count: Int
                }
                """,
            diagnostics: [
                DiagnosticSpec(
                    message: "@Model can't be applied to a generic class; Loom needs one entity per model class",
                    line: 1, column: 23)
            ])
    }

    @Test func eachMistakeIsReportedOnceWithEveryRole() {
        assertLoomExpansion(
            """
            @Model final class Book {
                var x = 0
            }
            """,
            expandedSource: #"""
                final class Book {
                    var x = 0

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
                        default: break
                        }
                    }

                    static let entity: EntityDescription = EntityDescription(
                        name: "Book",
                        modelType: Book.self,
                        properties: []
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
                        return nil
                    }

                    static func _loomKeyPath(for name: String, optionalChained: Bool) -> AnyKeyPath? {
                        switch name {
                        default: nil
                        }
                    }
                }

                extension Book: PersistentModel, Hashable {}
                """#,
            diagnostics: [
                DiagnosticSpec(message: "add an explicit type to 'x' so Loom can store it", line: 2, column: 9)
            ])
    }
}
