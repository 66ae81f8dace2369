import SwiftDiagnostics
public import SwiftSyntax
public import SwiftSyntaxMacros

/// `#Unique` and `#Index`: markers that `@Model` reads from the class body; they add no code.
///
/// `@Model` checks their key paths, since only it knows the persistent properties. These check
/// only that they stand in the body of a `@Model` class, where `@Model` can see them. The compiler
/// plugin (`LoomMacros`) declares `UniqueMacro` and `IndexMacro` conforming to it.
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
