import SwiftDiagnostics
public import SwiftSyntax
public import SwiftSyntaxMacros

/// `#Unique` and `#Index`: markers that `@Model` reads from the class body; they add no code.
///
/// `@Model` checks their key paths, since only it knows the persistent properties. These check
/// only that they stand in the body of a `@Model` class, where `@Model` can see them. The compiler
/// plugin (`LoomMacros`) declares `UniqueMacro` and `IndexMacro` conforming to
/// ``UniqueMacroExpansion`` and ``IndexMacroExpansion``. Nonisolated and static, like every
/// macro expansion: the compiler's plugin process runs them.
public protocol ConstraintMacro: DeclarationMacro {
    /// The macro's name, without `#`.
    static var name: String { get }
}

extension ConstraintMacro {
    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        let enclosingClass = context.lexicalContext.first?.as(ClassDeclSyntax.self)
        if enclosingClass?.attributes.attribute(named: "Model") == nil {
            context.diagnose(Diagnostic(node: node, message: LoomDiagnostic.notInModel(name)))
        }
        return []
    }
}

/// `#Unique<Model>([\.a, \.b], ...)`: a uniqueness constraint over one or more properties.
public protocol UniqueMacroExpansion: ConstraintMacro {}

extension UniqueMacroExpansion {
    public static var name: String { "Unique" }
}

/// `#Index<Model>([\.a, \.b], ...)`: an index over one or more properties.
public protocol IndexMacroExpansion: ConstraintMacro {}

extension IndexMacroExpansion {
    public static var name: String { "Index" }
}
