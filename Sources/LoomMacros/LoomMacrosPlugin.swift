import LoomMacroExpansion
import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin that provides Loom's macros.
///
/// The compiler finds a macro's implementation by module and type name (`Loom/Macros.swift`
/// names `LoomMacros.ModelMacro` and so on), so the types are declared here; what they do is in
/// `LoomMacroExpansion`, a plain library the macro tests import. Tests that depend on a macro
/// target directly make the package manager build every test, and all they depend on, a second
/// time for the host.
@main
struct LoomMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [
        ModelMacro.self,
        PersistedPropertyMacro.self,
        AttributeMacro.self,
        RelationshipMacro.self,
        TransientMacro.self,
        UniqueMacro.self,
        IndexMacro.self,
    ]
}

/// `@Model`.
enum ModelMacro: ModelMacroExpansion {}

/// `@_PersistedProperty(index:)`, which `@Model` attaches to each persistent property.
enum PersistedPropertyMacro: PersistedPropertyMacroExpansion {}

/// `@Attribute(...)`.
enum AttributeMacro: MarkerMacro {}

/// `@Relationship(deleteRule:inverse:)`.
enum RelationshipMacro: MarkerMacro {}

/// `@Transient`.
enum TransientMacro: MarkerMacro {}

/// `#Unique<Model>([\.a, \.b], ...)`.
enum UniqueMacro: UniqueMacroExpansion {}

/// `#Index<Model>([\.a, \.b], ...)`.
enum IndexMacro: IndexMacroExpansion {}
