import SwiftSyntax
import SwiftSyntaxMacros

/// `@Attribute(...)`: a marker that `@Model` reads for a property's options; it adds no code.
enum AttributeMacro: PeerMacro {
    static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

/// `@Relationship(deleteRule:inverse:)`: a marker that `@Model` reads for a relationship's delete
/// rule and inverse; it adds no code.
enum RelationshipMacro: PeerMacro {
    static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
