/// The kind of value an attribute stores, as recorded in the schema.
///
/// `RawRepresentable` enums are stored as their raw value's type, and `Codable` values as
/// JSON in a binary column (``codable``).
public enum AttributeType: String, Sendable, Hashable, Codable, CaseIterable {
    case bool, integer16, integer32, integer64, double, float, string, date, binary, uuid, url, decimal
    /// A `Codable` value stored as JSON.
    case codable

    /// Whether a stored value has a storage class this attribute type can hold.
    public func accepts(_ value: StoredValue) -> Bool {
        switch (self, value) {
        case (_, .null): true
        case (.bool, .integer), (.integer16, .integer), (.integer32, .integer), (.integer64, .integer): true
        case (.double, .real), (.float, .real), (.date, .real): true
        case (.double, .integer), (.float, .integer), (.date, .integer): true
        case (.string, .text), (.url, .text), (.decimal, .text): true
        case (.binary, .blob), (.codable, .blob): true
        case (.uuid, .blob(let d)): d.count == 16
        default: false
        }
    }

    /// Whether `<`, `>`, sorting and range queries on this type agree between Swift and SQL.
    var isOrderable: Bool {
        switch self {
        case .decimal, .codable, .uuid, .url: false
        default: true
        }
    }
}
