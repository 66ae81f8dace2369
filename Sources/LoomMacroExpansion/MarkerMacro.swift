public import SwiftSyntax
public import SwiftSyntaxMacros

/// A macro that `@Model` reads and that adds no code itself: `@Attribute(...)` (a property's
/// options), `@Relationship(deleteRule:inverse:)` (a relationship's delete rule and inverse) and
/// `@Transient` (a property kept out of the store).
///
/// The compiler plugin (`LoomMacros`) declares one type per macro conforming to this protocol,
/// since the compiler finds a macro's type by its module and name. Nonisolated and static, like
/// every macro expansion: the compiler's plugin process runs it.
public protocol MarkerMacro: PeerMacro {}

extension MarkerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
