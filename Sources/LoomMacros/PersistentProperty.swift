import SwiftSyntax
import SwiftSyntaxBuilder

/// A stored property of a `@Model` class that Loom keeps in the store, as one entity attribute.
struct PersistentProperty {
    /// The name as written, backticks included, for generated code.
    let identifier: TokenSyntax

    /// The type as written.
    let type: TypeSyntax

    /// The initial value, which becomes the attribute's default value.
    let initialValue: ExprSyntax?

    /// Whether `@Attribute(.unique)` asks for a unique value.
    let isUnique: Bool

    /// Whether `@Attribute(.index)` asks for an index.
    let isIndexed: Bool

    /// The name of the attribute in the store.
    var name: String { identifier.plainName }

    /// Reads the options of the property's `@Attribute(...)`, if it has one.
    init(identifier: TokenSyntax, type: TypeSyntax, initialValue: ExprSyntax?, attribute: AttributeSyntax?) {
        self.identifier = identifier.trimmed
        self.type = type.trimmed
        self.initialValue = initialValue?.trimmed
        var options: Set<String> = []
        if case .argumentList(let arguments) = attribute?.arguments {
            for argument in arguments {
                if let member = argument.expression.as(MemberAccessExprSyntax.self) {
                    options.insert(member.declName.baseName.plainName)
                }
            }
        }
        self.isUnique = options.contains("unique")
        self.isIndexed = options.contains("index")
    }

    /// The `AttributeDescription(...)` expression that describes the property in the entity.
    ///
    /// Arguments that keep their default value are left out.
    var attributeDescription: ExprSyntax {
        var arguments = [
            "name: \(StringLiteralExprSyntax(content: name))",
            "valueType: \(type.metatypeOperand).self",
        ]
        if isUnique { arguments.append("isUnique: true") }
        if isIndexed { arguments.append("isIndexed: true") }
        if let initialValue { arguments.append("defaultValue: { \(initialValue) }") }
        return "AttributeDescription(\(raw: arguments.joined(separator: ", ")))"
    }
}
