public import Foundation

/// A Swift type that Loom stores directly in one column.
///
/// Loom conforms `Bool`, the integer types, `Double`, `Float`, `String`, `Date`, `Data`, `UUID`,
/// `URL` and `Decimal`. Optionals of these, `RawRepresentable` enums whose raw value is one of
/// them, and `Codable` values are handled without a conformance.
public protocol PersistentValue: Sendable {
    /// How the schema records this type.
    static var attributeType: AttributeType { get }
    /// The value as the store keeps it.
    var storedValue: StoredValue { get }
    /// Recreates a value from what the store kept; `nil` when the stored value cannot be one.
    init?(storedValue: StoredValue)
}

extension Bool: PersistentValue {
    public static var attributeType: AttributeType { .bool }
    public var storedValue: StoredValue { .integer(self ? 1 : 0) }
    public init?(storedValue: StoredValue) {
        guard case .integer(let v) = storedValue else { return nil }
        self = v != 0
    }
}

extension Int: PersistentValue {
    public static var attributeType: AttributeType { .integer64 }
    public var storedValue: StoredValue { .integer(Int64(self)) }
    public init?(storedValue: StoredValue) {
        guard case .integer(let v) = storedValue, let x = Int(exactly: v) else { return nil }
        self = x
    }
}

extension Int64: PersistentValue {
    public static var attributeType: AttributeType { .integer64 }
    public var storedValue: StoredValue { .integer(self) }
    public init?(storedValue: StoredValue) {
        guard case .integer(let v) = storedValue else { return nil }
        self = v
    }
}

extension Int32: PersistentValue {
    public static var attributeType: AttributeType { .integer32 }
    public var storedValue: StoredValue { .integer(Int64(self)) }
    public init?(storedValue: StoredValue) {
        guard case .integer(let v) = storedValue, let x = Int32(exactly: v) else { return nil }
        self = x
    }
}

extension Int16: PersistentValue {
    public static var attributeType: AttributeType { .integer16 }
    public var storedValue: StoredValue { .integer(Int64(self)) }
    public init?(storedValue: StoredValue) {
        guard case .integer(let v) = storedValue, let x = Int16(exactly: v) else { return nil }
        self = x
    }
}

extension Double: PersistentValue {
    public static var attributeType: AttributeType { .double }
    public var storedValue: StoredValue { .real(self) }
    public init?(storedValue: StoredValue) {
        switch storedValue {
        case .real(let v): self = v
        case .integer(let v): self = Double(v)
        default: return nil
        }
    }
}

extension Float: PersistentValue {
    public static var attributeType: AttributeType { .float }
    public var storedValue: StoredValue { .real(Double(self)) }
    public init?(storedValue: StoredValue) {
        switch storedValue {
        case .real(let v): self = Float(v)
        case .integer(let v): self = Float(v)
        default: return nil
        }
    }
}

extension String: PersistentValue {
    public static var attributeType: AttributeType { .string }
    public var storedValue: StoredValue { .text(self) }
    public init?(storedValue: StoredValue) {
        guard case .text(let v) = storedValue else { return nil }
        self = v
    }
}

extension Date: PersistentValue {
    public static var attributeType: AttributeType { .date }
    /// Dates are stored as seconds since 2001-01-01 00:00:00 UTC, like Core Data.
    public var storedValue: StoredValue { .real(timeIntervalSinceReferenceDate) }
    public init?(storedValue: StoredValue) {
        switch storedValue {
        case .real(let v): self.init(timeIntervalSinceReferenceDate: v)
        case .integer(let v): self.init(timeIntervalSinceReferenceDate: Double(v))
        default: return nil
        }
    }
}

extension Data: PersistentValue {
    public static var attributeType: AttributeType { .binary }
    public var storedValue: StoredValue { .blob(self) }
    public init?(storedValue: StoredValue) {
        guard case .blob(let v) = storedValue else { return nil }
        self = v
    }
}

extension UUID: PersistentValue {
    public static var attributeType: AttributeType { .uuid }
    /// UUIDs are stored as their 16 bytes.
    public var storedValue: StoredValue {
        withUnsafeBytes(of: uuid) { .blob(Data($0)) }
    }
    public init?(storedValue: StoredValue) {
        guard case .blob(let d) = storedValue, d.count == 16 else { return nil }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: d) }
        self.init(uuid: raw)
    }
}

extension URL: PersistentValue {
    public static var attributeType: AttributeType { .url }
    public var storedValue: StoredValue { .text(absoluteString) }
    public init?(storedValue: StoredValue) {
        guard case .text(let v) = storedValue, let url = URL(string: v) else { return nil }
        self = url
    }
}

extension Decimal: PersistentValue {
    public static var attributeType: AttributeType { .decimal }
    /// Decimals are stored as their exact decimal text, so no digit is lost.
    public var storedValue: StoredValue { .text(description) }
    public init?(storedValue: StoredValue) {
        guard case .text(let v) = storedValue, let d = Decimal(string: v, locale: Locale(identifier: "en_US_POSIX")) else {
            return nil
        }
        self = d
    }
}
