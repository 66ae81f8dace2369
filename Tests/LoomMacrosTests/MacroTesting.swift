@testable import LoomMacroExpansion
import SwiftSyntax
import SwiftSyntaxMacros
import SwiftSyntaxMacroExpansion
import SwiftSyntaxMacrosGenericTestSupport
import Testing

// The macros' types as the compiler plugin (`LoomMacros/LoomMacrosPlugin.swift`) declares them:
// the tests depend on the plain library, not on the macro target (see `Package.swift`).
enum ModelMacro: ModelMacroExpansion {}
enum PersistedPropertyMacro: PersistedPropertyMacroExpansion {}
enum AttributeMacro: MarkerMacro {}
enum RelationshipMacro: MarkerMacro {}
enum TransientMacro: MarkerMacro {}
enum UniqueMacro: UniqueMacroExpansion {}
enum IndexMacro: IndexMacroExpansion {}

/// Every Loom macro, under the names `Loom/Macros.swift` declares them with.
let loomMacros: [String: MacroSpec] = [
    "Model": MacroSpec(type: ModelMacro.self, conformances: ["PersistentModel", "Hashable"]),
    "_PersistedProperty": MacroSpec(type: PersistedPropertyMacro.self),
    "Attribute": MacroSpec(type: AttributeMacro.self),
    "Relationship": MacroSpec(type: RelationshipMacro.self),
    "Transient": MacroSpec(type: TransientMacro.self),
    "Unique": MacroSpec(type: UniqueMacro.self),
    "Index": MacroSpec(type: IndexMacro.self),
]

/// Expands `source` with Loom's macros and records an issue where the expansion, diagnostics or
/// Fix-Its differ from the expected ones.
func assertLoomExpansion(
    _ source: String,
    expandedSource: String,
    diagnostics: [DiagnosticSpec] = [],
    macros: [String: MacroSpec] = loomMacros,
    applyFixIts: [String]? = nil,
    fixedSource: String? = nil,
    fileID: StaticString = #fileID,
    filePath: StaticString = #filePath,
    line: UInt = #line,
    column: UInt = #column
) {
    assertMacroExpansion(
        source,
        expandedSource: expandedSource,
        diagnostics: diagnostics,
        macroSpecs: macros,
        applyFixIts: applyFixIts,
        fixedSource: fixedSource,
        failureHandler: { failure in
            Issue.record(
                Comment(rawValue: failure.message),
                sourceLocation: SourceLocation(
                    fileID: failure.location.fileID, filePath: failure.location.filePath,
                    line: failure.location.line, column: failure.location.column))
        },
        fileID: fileID, filePath: filePath, line: line, column: column)
}

/// `@Model`'s member-attribute role alone, to see the attributes it adds before they expand.
enum ModelMemberAttributeRole: MemberAttributeMacro {
    static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        try ModelMacro.expansion(of: node, attachedTo: declaration, providingAttributesFor: member, in: context)
    }
}

/// `@Model`'s member role, keeping only `static let entity`, for tests about the entity alone
/// (of a class with no model superclass: the specs using it pass the `PersistentModel` conformance).
enum ModelEntityOnly: MemberMacro {
    static var formatMode: FormatMode { ModelMacro.formatMode }

    static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        try modelMembers(named: "entity", of: node, declaration, protocols, context)
    }
}

/// `@Model`'s member role on a subclass of a model class (the specs using it pass no
/// conformance), keeping only the entity description it builds.
enum ModelSubentityDescriptionOnly: MemberMacro {
    static var formatMode: FormatMode { ModelMacro.formatMode }

    static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        try modelMembers(named: "_loomEntityDescription", of: node, declaration, protocols, context)
    }
}

/// The stored properties named `name` among the members `@Model` adds.
private func modelMembers(
    named name: String, of node: AttributeSyntax, _ declaration: some DeclGroupSyntax, _ protocols: [TypeSyntax],
    _ context: some MacroExpansionContext
) throws -> [DeclSyntax] {
    let members = try ModelMacro.expansion(of: node, providingMembersOf: declaration, conformingTo: protocols, in: context)
    return members.filter { member in
        member.as(VariableDeclSyntax.self)?.bindings.contains { $0.pattern.trimmedDescription == name } == true
    }
}
