import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin that provides Loom's macros.
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
