public import Foundation

/// A value as a store keeps it: the five storage classes SQLite knows.
///
/// Every attribute value is converted to a `StoredValue` on its way to a store and back on its
/// way out (see ``PersistentValue``). Stores compare and sort stored values with SQLite's rules,
/// and so does Loom's in-memory predicate evaluator, so that both give the same answer.
public enum StoredValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// Whether this is ``null``.
    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension StoredValue: Comparable {
    /// The storage-class rank SQLite uses when values of different classes are compared:
    /// NULL < numbers < text < blobs.
    @usableFromInline var rank: Int {
        switch self {
        case .null: 0
        case .integer, .real: 1
        case .text: 2
        case .blob: 3
        }
    }

    /// Orders two stored values exactly as SQLite's `ORDER BY` and comparison operators do with
    /// the BINARY collation: by storage class, numbers numerically, text by UTF-8 bytes, blobs by
    /// bytes.
    public static func < (lhs: StoredValue, rhs: StoredValue) -> Bool {
        compare(lhs, rhs) < 0
    }

    /// Three-way comparison with SQLite's rules (see `<`).
    public static func compare(_ lhs: StoredValue, _ rhs: StoredValue) -> Int {
        switch (lhs, rhs) {
        case (.integer(let a), .integer(let b)): return a < b ? -1 : (a == b ? 0 : 1)
        case (.real(let a), .real(let b)): return a < b ? -1 : (a == b ? 0 : 1)
        case (.integer(let a), .real(let b)): return compareIntegerToReal(a, b)
        case (.real(let a), .integer(let b)): return -compareIntegerToReal(b, a)
        case (.text(let a), .text(let b)): return compareText(a, b)
        case (.blob(let a), .blob(let b)): return compareBlobs(a, b)
        case (.null, .null): return 0
        default: return lhs.rank < rhs.rank ? -1 : 1
        }
    }

    static func compareIntegerToReal(_ a: Int64, _ b: Double) -> Int {
        if b.isNaN { return 1 }
        if b >= 9.3e18 { return -1 }
        if b <= -9.3e18 { return 1 }
        let ad = Double(a)
        if ad < b { return -1 }
        if ad > b { return 1 }
        // Same as a double; decide on the integer parts.
        let bi = Int64(b)
        if a < bi { return -1 }
        if a > bi { return 1 }
        let frac = b - Double(bi)
        return frac > 0 ? -1 : (frac < 0 ? 1 : 0)
    }

    /// Byte order of two strings' UTF-8, with `memcmp` on their contiguous storage.
    static func compareText(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { x in b.withUTF8 { y in compareBuffers(UnsafeRawBufferPointer(x), UnsafeRawBufferPointer(y)) } }
    }

    static func compareBlobs(_ a: Data, _ b: Data) -> Int {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in compareBuffers(x, y) } }
    }

    static func compareBuffers(_ x: UnsafeRawBufferPointer, _ y: UnsafeRawBufferPointer) -> Int {
        let common = Swift.min(x.count, y.count)
        if common > 0, let p = x.baseAddress, let q = y.baseAddress {
            let c = memcmp(p, q, common)
            if c != 0 { return c < 0 ? -1 : 1 }
        }
        return x.count < y.count ? -1 : (x.count == y.count ? 0 : 1)
    }

    /// Whether two values are the same stored value: the same storage class and equal (text
    /// and blobs byte for byte). What "changed" means for a save.
    func isIdentical(to other: StoredValue) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case (.integer(let a), .integer(let b)): return a == b
        case (.real(let a), .real(let b)): return a == b
        case (.text(let a), .text(let b)): return StoredValue.compareText(a, b) == 0
        case (.blob(let a), .blob(let b)): return a == b
        default: return false
        }
    }


    /// SQLite's `IS` operator: equality where NULL equals NULL and numbers compare numerically.
    public func isSame(as other: StoredValue) -> Bool {
        StoredValue.compare(self, other) == 0 && (isNull == other.isNull)
    }
}

extension StoredValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let v): String(v)
        case .real(let v): String(v)
        case .text(let v): String(reflecting: v)
        case .blob(let v): "<\(v.count) bytes>"
        }
    }
}

extension StoredValue: Codable {
    private enum Kind: String, Codable { case null, integer, real, text, blob }
    private enum CodingKeys: String, CodingKey { case kind, value }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch try c.decode(Kind.self, forKey: .kind) {
        case .null: self = .null
        case .integer: self = .integer(try c.decode(Int64.self, forKey: .value))
        case .real: self = .real(try c.decode(Double.self, forKey: .value))
        case .text: self = .text(try c.decode(String.self, forKey: .value))
        case .blob: self = .blob(try c.decode(Data.self, forKey: .value))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .null: try c.encode(Kind.null, forKey: .kind)
        case .integer(let v): try c.encode(Kind.integer, forKey: .kind); try c.encode(v, forKey: .value)
        case .real(let v): try c.encode(Kind.real, forKey: .kind); try c.encode(v, forKey: .value)
        case .text(let v): try c.encode(Kind.text, forKey: .kind); try c.encode(v, forKey: .value)
        case .blob(let v): try c.encode(Kind.blob, forKey: .kind); try c.encode(v, forKey: .value)
        }
    }
}
