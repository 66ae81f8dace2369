/// One stored property of an entity: its name, type, optionality, default and options.
///
/// `@Model` writes these for you; build them by hand for a schema made in code:
///
/// ```swift
/// let title = AttributeDescription(name: "title", valueType: String.self)
/// let pages = AttributeDescription(name: "pages", valueType: Int.self, defaultValue: { 0 })
/// ```
public struct AttributeDescription: Sendable {
    /// The property and column name.
    public let name: String
    /// How the value is stored.
    public let type: AttributeType
    /// Whether `nil` is a valid value. Non-optional attributes must have a value at save.
    public let isOptional: Bool
    /// Whether no two objects of the entity may share this attribute's value.
    public let isUnique: Bool
    /// Whether the store keeps an index on this attribute.
    public let isIndexed: Bool
    /// The name the attribute had in the previous version of the model, when it was renamed
    /// (`@Attribute(originalName:)`): a store saved with that name keeps its values under the
    /// new one when it is migrated.
    public let originalName: String?
    /// Whether a deletion's history tombstone keeps this attribute's value
    /// (`@Attribute(.preserveValueOnDeletion)`).
    public let preservesValueOnDeletion: Bool
    /// The Swift type of the property, for messages.
    public let valueTypeName: String
    let codec: ValueCodec
    let makeDefault: (@Sendable () -> StoredValue?)?

    /// Describes an attribute holding values of type `T`.
    ///
    /// - Parameters:
    ///   - name: the property name, also the column name.
    ///   - valueType: the Swift type: a ``PersistentValue`` type, a `RawRepresentable` enum, a
    ///     `Codable` type, or an optional of one of those.
    ///   - isUnique: adds a single-attribute uniqueness constraint.
    ///   - isIndexed: asks the store for an index on this attribute.
    ///   - defaultValue: the value a newly created object starts with.
    ///   - originalName: the attribute's name in the previous model version, if it was renamed.
    ///   - preservesValueOnDeletion: whether a deletion's history tombstone keeps the value.
    public init<T>(
        name: String, valueType: T.Type, isUnique: Bool = false, isIndexed: Bool = false,
        defaultValue: (@Sendable () -> T)? = nil, originalName: String? = nil, preservesValueOnDeletion: Bool = false
    ) {
        let codec = ValueCodec.make(for: T.self)
        self.name = name
        self.type = codec.attributeType
        self.isOptional = codec.isOptional
        self.isUnique = isUnique
        self.isIndexed = isIndexed
        self.originalName = originalName
        self.preservesValueOnDeletion = preservesValueOnDeletion
        self.valueTypeName = String(describing: T.self)
        self.codec = codec
        if let defaultValue {
            self.makeDefault = { try? codec.encode(defaultValue()) }
        } else {
            self.makeDefault = nil
        }
    }

    /// Describes an attribute by its stored type only, for tools that open a store whose model
    /// they were not compiled with. Values are read and written as ``StoredValue``s.
    public init(name: String, type: AttributeType, isOptional: Bool, isUnique: Bool = false, isIndexed: Bool = false, originalName: String? = nil) {
        self.name = name
        self.originalName = originalName
        self.type = type
        self.isOptional = isOptional
        self.isUnique = isUnique
        self.isIndexed = isIndexed
        self.preservesValueOnDeletion = false
        self.valueTypeName = "StoredValue"
        self.codec = ValueCodec(
            attributeType: type, isOptional: isOptional,
            encode: { value throws(LoomError) in
                if let v = value as? StoredValue { return v }
                guard let v = StoredValue.converting(value) else {
                    throw LoomError(.typeMismatch, "\(English.a(Swift.type(of: value))) cannot be stored in \(English.a(type)) attribute")
                }
                return v
            },
            decode: { $0 },
            unsupportedReason: nil,
            placeholder: ValueCodec.zeroCandidates(type).first)
        self.makeDefault = nil
    }

    /// The default value to give a newly created object, as stored.
    var defaultStoredValue: StoredValue? { makeDefault?() }

    /// What an object whose row was found deleted shows: `nil` for an optional, else the
    /// default value, else the type's zero value (`nil` when it has none).
    var placeholderStoredValue: StoredValue? {
        if isOptional { return .null }
        return defaultStoredValue ?? codec.placeholder
    }

    /// The part of the schema's identity that this attribute contributes.
    var signature: String {
        "\(name):\(type.rawValue)\(isOptional ? "?" : "")\(isUnique ? "!" : "")"
    }
}
