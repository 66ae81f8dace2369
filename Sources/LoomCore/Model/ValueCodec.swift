import Foundation

/// Converts one attribute's Swift values to and from ``StoredValue``s.
///
/// Built once per attribute, when its description is created, by looking at the Swift type:
/// optionals unwrap to their wrapped type, ``PersistentValue`` types convert directly,
/// `RawRepresentable` types go through their raw value, and `Codable` types through JSON.
///
/// `@unchecked Sendable`: a codec is immutable after creation, and its closures capture only
/// metatypes and other codecs, which are never mutated.
struct ValueCodec: @unchecked Sendable {
    let attributeType: AttributeType
    let isOptional: Bool
    let encode: (Any) throws(LoomError) -> StoredValue
    /// Returns the Swift value boxed in `Any`, or `nil` when the stored value cannot be one.
    let decode: (StoredValue) -> Any?
    /// Why this type cannot be stored, when it cannot.
    let unsupportedReason: String?
    /// A stored value that decodes to the type's "zero" (0, "", false, empty data…), shown by
    /// objects whose row was found deleted; `nil` when the type has none.
    var placeholder: StoredValue? = nil

    static func make<T>(for type: T.Type) -> ValueCodec {
        if let optional = T.self as? any LoomOptional.Type {
            return optional.makeOptionalCodec()
        }
        return makeNonOptional(for: T.self)
    }

    static func makeNonOptional(for type: Any.Type) -> ValueCodec {
        if type is any PersistentModel.Type {
            return ValueCodec(
                attributeType: .codable, isOptional: false,
                encode: { _ throws(LoomError) in throw LoomError(.unsupportedType, "\(type) cannot be stored as an attribute") },
                decode: { _ in nil },
                unsupportedReason: "\(type) is a model, not a value: declare the relationship as a property of type \(type)?, \(type), Set<\(type)> or [\(type)]")
        }
        if let persistent = type as? any PersistentValue.Type {
            return direct(persistent)
        }
        if let raw = type as? any RawRepresentable.Type, let codec = rawRepresentable(raw) {
            return codec
        }
        if let codable = type as? any Codable.Type {
            return json(codable)
        }
        return ValueCodec(
            attributeType: .codable, isOptional: false,
            encode: { _ throws(LoomError) in throw LoomError(.unsupportedType, "\(type) cannot be stored") },
            decode: { _ in nil },
            unsupportedReason: "\(type) is not a type Loom can store: use a PersistentValue type, a RawRepresentable enum, or make it Codable")
    }

    private static func direct<P: PersistentValue>(_: P.Type) -> ValueCodec {
        ValueCodec(
            attributeType: P.attributeType, isOptional: false,
            encode: { value throws(LoomError) in
                guard let v = value as? P else { throw LoomError(.typeMismatch, "expected \(English.a(P.self)), got \(English.a(type(of: value)))") }
                return v.storedValue
            },
            decode: { P(storedValue: $0) },
            unsupportedReason: nil,
            placeholder: zeroCandidates(P.attributeType).first { P(storedValue: $0) != nil })
    }

    /// Stored values that mean "zero" for an attribute type, most natural first.
    static func zeroCandidates(_ type: AttributeType) -> [StoredValue] {
        switch type {
        case .bool, .integer16, .integer32, .integer64: [.integer(0)]
        case .double, .float, .date: [.real(0)]
        case .string: [.text("")]
        case .binary: [.blob(Data())]
        case .uuid: [.blob(Data(count: 16))]
        case .url: [.text("about:blank")]
        case .decimal: [.text("0")]
        case .codable: ["{}", "[]", "0", "\"\"", "false", "null"].map { .blob(Data($0.utf8)) }
        }
    }

    private static func rawRepresentable<R: RawRepresentable>(_: R.Type) -> ValueCodec? {
        guard let rawType = R.RawValue.self as? any PersistentValue.Type else { return nil }
        return rawCodec(R.self, rawType)
    }

    private static func rawCodec<R: RawRepresentable, P: PersistentValue>(_: R.Type, _: P.Type) -> ValueCodec {
        ValueCodec(
            attributeType: P.attributeType, isOptional: false,
            encode: { value throws(LoomError) in
                guard let r = value as? R, let raw = r.rawValue as? P else {
                    throw LoomError(.typeMismatch, "expected \(English.a(R.self)), got \(English.a(type(of: value)))")
                }
                return raw.storedValue
            },
            decode: { stored in
                guard let p = P(storedValue: stored), let raw = p as? R.RawValue else { return nil }
                return R(rawValue: raw)
            },
            unsupportedReason: nil,
            placeholder: rawPlaceholder(R.self, P.self))
    }

    /// The raw value of a zero-like case, or of the first case of a `CaseIterable` enum.
    private static func rawPlaceholder<R: RawRepresentable, P: PersistentValue>(_: R.Type, _: P.Type) -> StoredValue? {
        for candidate in zeroCandidates(P.attributeType) {
            if let p = P(storedValue: candidate), let raw = p as? R.RawValue, R(rawValue: raw) != nil { return candidate }
        }
        if let iterable = R.self as? any CaseIterable.Type, let first = firstCase(iterable) as? R, let raw = first.rawValue as? P {
            return raw.storedValue
        }
        return nil
    }

    private static func firstCase<C: CaseIterable>(_: C.Type) -> Any? { C.allCases.first }

    /// The JSON a `Codable` attribute is stored as: keys sorted, and a `Double` or `Float` that
    /// JSON has no number for (NaN, ±infinity) written as a string, so that a value holding one
    /// is stored and read back instead of failing in the property's setter, which cannot throw.
    private static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return encoder
    }

    /// Reads what ``jsonEncoder()`` writes.
    private static func jsonDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return decoder
    }

    private static func json<C: Codable>(_: C.Type) -> ValueCodec {
        ValueCodec(
            attributeType: .codable, isOptional: false,
            encode: { value throws(LoomError) in
                guard let c = value as? C else { throw LoomError(.typeMismatch, "expected \(English.a(C.self)), got \(English.a(type(of: value)))") }
                do { return .blob(try jsonEncoder().encode(c)) } catch {
                    throw LoomError(.typeMismatch, "\(English.a(C.self)) value could not be encoded as JSON", underlying: error)
                }
            },
            decode: { stored in
                guard case .blob(let data) = stored else { return nil }
                return try? jsonDecoder().decode(C.self, from: data)
            },
            unsupportedReason: nil,
            placeholder: zeroCandidates(.codable).first { stored in
                guard case .blob(let data) = stored else { return false }
                return (try? jsonDecoder().decode(C.self, from: data)) != nil
            })
    }
}

/// Lets the codec see through `Optional<Wrapped>` without knowing `Wrapped` statically.
protocol LoomOptional {
    static func makeOptionalCodec() -> ValueCodec
    var loomWrapped: Any? { get }
}

extension Optional: LoomOptional {
    static func makeOptionalCodec() -> ValueCodec {
        let inner = ValueCodec.makeNonOptional(for: Wrapped.self)
        return ValueCodec(
            attributeType: inner.attributeType, isOptional: true,
            encode: { value throws(LoomError) in
                if let opt = value as? any LoomOptional {
                    guard let wrapped = opt.loomWrapped else { return .null }
                    return try inner.encode(wrapped)
                }
                return try inner.encode(value)
            },
            decode: { stored in
                if stored.isNull { return Wrapped?.none as Any }
                guard let v = inner.decode(stored) as? Wrapped else { return nil }
                return Wrapped?.some(v) as Any
            },
            unsupportedReason: inner.unsupportedReason,
            placeholder: .null)
    }

    var loomWrapped: Any? {
        switch self {
        case .none: nil
        case .some(let w): w
        }
    }
}

extension StoredValue {
    /// Converts a constant from a predicate or a caller (a PersistentValue, an enum with a
    /// storable raw value, or an optional of those) to the value the store compares with.
    ///
    /// A `PersistentValue` (which no `Optional` is) is tried first: it is the common constant,
    /// and each dynamic cast tried before it would be paid by every constant of every
    /// predicate's translation.
    static func converting(_ value: Any) -> StoredValue? {
        if let p = value as? any PersistentValue { return p.storedValue }
        if let opt = value as? any LoomOptional {
            guard let wrapped = opt.loomWrapped else { return .null }
            return converting(wrapped)
        }
        if let r = value as? any RawRepresentable { return converting(r.rawValue) }
        return nil
    }
}
