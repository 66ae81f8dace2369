import SwiftSyntax
import SwiftSyntaxMacros

/// `@Transient`: a marker that keeps a property out of the store; it adds no code.
enum TransientMacro: PeerMacro {
    static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}
