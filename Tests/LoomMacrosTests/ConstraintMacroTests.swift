import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

@Suite struct ConstraintMacroTests {
    /// `@Model` with only `static let entity`, where the constraints show.
    static let entityOnly: [String: MacroSpec] = [
        "Model": MacroSpec(type: ModelEntityOnly.self, conformances: ["PersistentModel"]),
        "Unique": loomMacros["Unique"]!,
        "Index": loomMacros["Index"]!,
        "Transient": loomMacros["Transient"]!,
    ]

    @Test func uniqueAndIndexAreReadInDeclarationOrder() {
        assertLoomExpansion(
            #"""
            @Model final class Edition {
                var title: String
                var number: Int
                var isbn: String
                #Unique<Edition>([\.isbn])
                #Index<Edition>([\.title, \.number])
                #Unique<Edition>([\Edition.title, \Edition.number])
                #Index<Edition>([\.isbn])
            }
            """#,
            expandedSource: #"""
                final class Edition {
                    var title: String
                    var number: Int
                    var isbn: String

                    static let entity: EntityDescription = EntityDescription(
                        name: "Edition",
                        modelType: Edition.self,
                        properties: [
                            .property(name: "title", valueType: String.self),
                            .property(name: "number", valueType: Int.self),
                            .property(name: "isbn", valueType: String.self),
                        ],
                        uniquenessConstraints: [["isbn"], ["title", "number"]],
                        indexes: [["title", "number"], ["isbn"]]
                    )
                }
                """#,
            macros: Self.entityOnly)
    }

    /// A sub-entity's constraint may name what it inherits, which its body does not show: the
    /// names are kept, without a diagnostic, for its entity description to check against the
    /// inherited properties when the schema is built.
    @Test func subentityConstraintMayNameInheritedProperties() {
        assertLoomExpansion(
            #"""
            @Model class BoxSeat: Seat {
                var box: String
                #Unique<BoxSeat>([\.row, \.number])
                #Index<BoxSeat>([\.box, \.row])
            }
            """#,
            expandedSource: #"""
                class BoxSeat: Seat {
                    var box: String

                    private static let _loomEntityDescription: EntityDescription = EntityDescription(
                        name: "BoxSeat",
                        modelType: BoxSeat.self,
                        properties: [
                            .property(name: "box", valueType: String.self),
                        ],
                        uniquenessConstraints: [["row", "number"]],
                        indexes: [["box", "row"]],
                        superentity: _loomSuperentity()
                    )
                }
                """#,
            macros: [
                "Model": MacroSpec(type: ModelSubentityDescriptionOnly.self, conformances: []),
                "Unique": loomMacros["Unique"]!,
                "Index": loomMacros["Index"]!,
            ])
    }

    @Test func constraintOnAPropertyThatIsNotPersistentIsAnError() {
        assertLoomExpansion(
            #"""
            @Model final class Edition {
                var title: String
                @Transient var scratch: Int = 0
                #Unique<Edition>([\.title, \.scratch])
                #Index<Edition>([\.missing])
            }
            """#,
            expandedSource: #"""
                final class Edition {
                    var title: String
                    var scratch: Int = 0

                    static let entity: EntityDescription = EntityDescription(
                        name: "Edition",
                        modelType: Edition.self,
                        properties: [
                            .property(name: "title", valueType: String.self),
                        ],
                        uniquenessConstraints: [["title"]]
                    )
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: "#Unique can't use 'scratch': it is not a persistent property of 'Edition'",
                    line: 4, column: 32),
                DiagnosticSpec(
                    message: "#Index can't use 'missing': it is not a persistent property of 'Edition'",
                    line: 5, column: 22),
            ],
            macros: Self.entityOnly)
    }

    @Test func malformedConstraintsAreErrors() {
        assertLoomExpansion(
            #"""
            @Model final class Edition {
                var title: String
                #Unique<Edition>([\.title.count])
                #Unique<Edition>(titles)
                #Index<Edition>([])
                #Index<Book>([\.title])
            }
            """#,
            expandedSource: #"""
                final class Edition {
                    var title: String

                    static let entity: EntityDescription = EntityDescription(
                        name: "Edition",
                        modelType: Edition.self,
                        properties: [
                            .property(name: "title", valueType: String.self),
                        ],
                        indexes: [["title"]]
                    )
                }
                """#,
            diagnostics: [
                DiagnosticSpec(
                    message: #"#Unique key paths must name one property of the model, such as \.title"#,
                    line: 3, column: 23),
                DiagnosticSpec(
                    message: #"each argument of #Unique must be an array of key paths, such as [\.title, \.author]"#,
                    line: 4, column: 22),
                DiagnosticSpec(message: "#Index needs at least one key path in each array", line: 5, column: 21),
                DiagnosticSpec(
                    message: "#Index<Book> in 'Edition' must name its own class: write #Index<Edition>",
                    line: 6, column: 12),
            ],
            macros: Self.entityOnly)
    }

    @Test(arguments: ["Unique", "Index"])
    func constraintOutsideAModelClassIsAnError(macro: String) {
        assertLoomExpansion(
            #"""
            final class Edition {
                var title: String
                #\#(macro)<Edition>([\.title])
            }
            #\#(macro)<Edition>([\.title])
            """#,
            expandedSource: """
                final class Edition {
                    var title: String
                }
                """,
            diagnostics: [
                DiagnosticSpec(message: "#\(macro) can only be used in the body of a @Model class", line: 3, column: 5),
                DiagnosticSpec(message: "#\(macro) can only be used in the body of a @Model class", line: 5, column: 1),
            ])
    }
}
