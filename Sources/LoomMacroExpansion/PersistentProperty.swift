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

    /// Whether `@Attribute(.preserveValueOnDeletion)` asks history tombstones to keep the value.
    let preservesValueOnDeletion: Bool

    /// `@Attribute(originalName: "…")`: the name in the previous model version, as written.
    let originalName: ExprSyntax?

    /// The `@Relationship(...)` marking the property, if any: its `deleteRule:` and `inverse:`
    /// arguments are passed on as written, and the type must be a model type.
    let relationship: AttributeSyntax?

    /// The name of the attribute in the store.
    var name: String { identifier.plainName }

    /// Reads the options of the property's `@Attribute(...)`, if it has one.
    init(
        identifier: TokenSyntax, type: TypeSyntax, initialValue: ExprSyntax?, attribute: AttributeSyntax?,
        relationship: AttributeSyntax? = nil
    ) {
        self.identifier = identifier.trimmed
        self.type = type.trimmed
        self.initialValue = initialValue?.trimmed
        self.relationship = relationship?.trimmed
        var options: Set<String> = []
        var originalName: ExprSyntax?
        if case .argumentList(let arguments) = attribute?.arguments {
            for argument in arguments {
                if argument.label?.text == "originalName" {
                    originalName = argument.expression.trimmed
                } else if let member = argument.expression.as(MemberAccessExprSyntax.self) {
                    options.insert(member.declName.baseName.plainName)
                }
            }
        }
        self.isUnique = options.contains("unique")
        self.isIndexed = options.contains("index")
        self.preservesValueOnDeletion = options.contains("preserveValueOnDeletion")
        self.originalName = originalName
    }

    /// The `.property(...)` or `.relationship(...)` expression that describes the property in
    /// the entity.
    ///
    /// The type decides what a `.property` is: the runtime has overloads for model types
    /// (relationships) and for everything else (attributes). Arguments that keep their default
    /// value are left out.
    var propertyDescription: ExprSyntax {
        var arguments = [
            "name: \(StringLiteralExprSyntax(content: name))",
            "valueType: \(type.metatypeOperand).self",
        ]
        var originalName = self.originalName?.trimmedDescription
        if case .argumentList(let list) = relationship?.arguments {
            for argument in list {
                guard let label = argument.label?.text else { continue }
                if label == "deleteRule" || label == "inverse" {
                    arguments.append("\(label): \(argument.expression.trimmedDescription)")
                } else if label == "originalName" {
                    originalName = argument.expression.trimmedDescription
                }
            }
        }
        if isUnique { arguments.append("isUnique: true") }
        if isIndexed { arguments.append("isIndexed: true") }
        if let initialValue { arguments.append("defaultValue: { \(initialValue) }") }
        if let originalName { arguments.append("originalName: \(originalName)") }
        if preservesValueOnDeletion { arguments.append("preservesValueOnDeletion: true") }
        let function = relationship == nil ? "property" : "relationship"
        return ".\(raw: function)(\(raw: arguments.joined(separator: ", ")))"
    }
}
