import SwiftSyntax

extension AttributeListSyntax {
    /// The attribute spelled `@name` or `@Loom.name`, if the list has one.
    func attribute(named name: String) -> AttributeSyntax? {
        for element in self {
            guard case .attribute(let attribute) = element else { continue }
            if attribute.attributeName.isLoomName(name) { return attribute }
        }
        return nil
    }
}

extension TypeSyntax {
    /// Whether the type is spelled `name` or `Loom.name`.
    func isLoomName(_ name: String) -> Bool {
        if let identifier = self.as(IdentifierTypeSyntax.self) {
            return identifier.name.identifier?.name == name
        }
        if let member = self.as(MemberTypeSyntax.self),
            let base = member.baseType.as(IdentifierTypeSyntax.self)
        {
            return base.name.identifier?.name == "Loom" && member.name.identifier?.name == name
        }
        return false
    }

    /// The type as it may be written before `.self` in an expression.
    ///
    /// `T!` becomes `T?`, because a value is stored as an optional; existential, opaque,
    /// composition and function types are parenthesized, because `any P.self` would read as
    /// `any (P.self)`. Everything else is kept as written.
    var metatypeOperand: TypeSyntax {
        let trimmed = self.trimmed
        if let unwrapped = trimmed.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
            return TypeSyntax(OptionalTypeSyntax(wrappedType: unwrapped.wrappedType))
        }
        if trimmed.is(SomeOrAnyTypeSyntax.self) || trimmed.is(CompositionTypeSyntax.self)
            || trimmed.is(FunctionTypeSyntax.self)
        {
            return TypeSyntax(TupleTypeSyntax(elements: [TupleTypeElementSyntax(type: trimmed)]))
        }
        return trimmed
    }

    /// Whether a `var` of this type starts out as `nil` when it has no initial value.
    var isImplicitlyNil: Bool {
        self.is(OptionalTypeSyntax.self) || self.is(ImplicitlyUnwrappedOptionalTypeSyntax.self)
    }
}

extension DeclModifierListSyntax {
    /// Whether the list holds one of the given keywords.
    func contains(anyOf keywords: Set<Keyword>) -> Bool {
        contains { modifier in
            if case .keyword(let keyword) = modifier.name.tokenKind { return keywords.contains(keyword) }
            return false
        }
    }
}

extension TokenSyntax {
    /// The identifier without backticks, as a property or type is named in the store.
    var plainName: String {
        identifier?.name ?? trimmedDescription
    }
}

extension AccessorBlockSyntax? {
    /// Whether the binding stores its value: it has no accessors, or only `willSet`/`didSet`.
    var isStored: Bool {
        !isComputed
    }

    /// Whether the binding computes its value with `get`, `set` or other non-observing accessors.
    var isComputed: Bool {
        guard let self else { return false }
        switch self.accessors {
        case .getter:
            return true
        case .accessors(let accessors):
            return accessors.contains { accessor in
                switch accessor.accessorSpecifier.tokenKind {
                case .keyword(.willSet), .keyword(.didSet): false
                default: true
                }
            }
        }
    }
}
