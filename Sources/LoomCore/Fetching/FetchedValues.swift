/// One row of a ``PropertyFetchRequest``'s results: values by name (Core Data's result
/// dictionary), `Sendable`, so it can leave the context's isolation.
///
/// ```swift
/// let row = try context.fetch(request)[0]
/// let pages = try row["pages", as: Int.self]         // throws if absent, NULL or not an Int
/// let rating = try row["rating", as: Double?.self]   // nil for NULL
/// ```
public struct FetchedValues: Sendable, Hashable {
    /// The results' names, in the request's order.
    public let names: [String]
    /// The values as stored, one per name.
    public let values: [StoredValue]

    public init(names: [String], values: [StoredValue]) {
        self.names = names
        self.values = values
    }

    /// The stored value named `name`; `nil` when the request had no such result.
    public subscript(name: String) -> StoredValue? {
        names.firstIndex(of: name).map { values[$0] }
    }

    /// The value named `name` as a Swift value: any type an attribute can have (a
    /// ``PersistentValue``, a `RawRepresentable` enum, a `Codable` value) or an optional of one,
    /// which is `nil` for NULL.
    ///
    /// - Throws: ``LoomError/Code/invalidRequest`` when there is no result of that name;
    ///   ``LoomError/Code/typeMismatch`` when the value is NULL and `T` is not optional, or is
    ///   not a `T` (an average is always a `Double`).
    public subscript<T>(name: String, as type: T.Type) -> T {
        get throws(LoomError) {
            guard let value = self[name] else {
                throw LoomError(.invalidRequest, "No result is named \"\(name)\"; the results are \(names.joined(separator: ", ")).")
            }
            let codec = ValueCodec.make(for: T.self)
            if value.isNull && !codec.isOptional {
                throw LoomError(.typeMismatch, "The result \"\(name)\" is NULL (no value, or an aggregate of no values); read it as \(T.self)? instead.")
            }
            guard let decoded = codec.decode(value) as? T else {
                throw LoomError(.typeMismatch, "The result \"\(name)\" holds a stored \(value.kindName), which is not \(English.a(T.self)).")
            }
            return decoded
        }
    }

    /// The row as a dictionary from name to stored value.
    public var dictionary: [String: StoredValue] {
        Dictionary(zip(names, values), uniquingKeysWith: { first, _ in first })
    }
}
