import Foundation
@_spi(LoomStore) import LoomCore

/// A literal as written in a text query, before it takes the type of what it is compared with.
enum TextQueryLiteral: Equatable {
    case string(String)
    case integer(Int64, text: String)
    case real(Double, text: String)
    case bool(Bool)
    case null
}

/// One side of a comparison, with the token it starts at.
struct Operand {
    enum Value {
        case path(ResolvedPath)
        case literal(TextQueryLiteral)
    }

    let value: Value
    let token: TextQueryToken

    var description: String {
        switch value {
        case .path(let p): "'\(p.text)'"
        case .literal: token.quoted
        }
    }
}

/// A comparison operator with its `[c]`/`[cd]` options.
struct ComparisonOperator {
    enum Kind {
        case compare(PredicateNode.ComparisonOperator)
        case string(PredicateNode.StringOperator)
        case isIn
    }

    let kind: Kind
    let token: TextQueryToken
    var ignoresCase = false
    var ignoresDiacritics = false
}

extension TextQueryParser {
    static let comparisonSymbols: [String: PredicateNode.ComparisonOperator] = [
        "==": .equal, "=": .equal, "!=": .notEqual, "<": .less, "<=": .lessOrEqual, ">": .greater, ">=": .greaterOrEqual,
    ]
    /// The names that are literals unless written in backquotes.
    static let literalKeywords: Set<String> = ["true", "false", "yes", "no", "nil", "null"]
    static let stringKeywords: [String: PredicateNode.StringOperator] = [
        "contains": .contains, "beginswith": .hasPrefix, "hasprefix": .hasPrefix, "endswith": .hasSuffix, "hassuffix": .hasSuffix,
    ]

    /// Reads a comparison operator, if one is next.
    mutating func comparisonOperator() throws(TextQueryError) -> ComparisonOperator? {
        let token = current
        var op: ComparisonOperator
        switch token.kind {
        case .symbol(let s):
            guard let compare = Self.comparisonSymbols[s] else { return nil }
            op = ComparisonOperator(kind: .compare(compare), token: token)
        case .identifier(let name, quoted: false):
            if name.lowercased() == "in" {
                position += 1
                return ComparisonOperator(kind: .isIn, token: token)
            }
            guard let string = Self.stringKeywords[name.lowercased()] else { return nil }
            op = ComparisonOperator(kind: .string(string), token: token)
        default:
            return nil
        }
        position += 1
        // `[c]`, `[cd]`: NSPredicate's options, written right after the operator.
        if current.isSymbol("["), current.column == token.column + operatorLength(token) {
            let open = next()
            let flags = next()
            guard case .identifier(let text, quoted: false) = flags.kind, Set(text.lowercased()).isSubset(of: ["c", "d"]), accept("]") else {
                throw error(.syntax, "expected an option in brackets after the operator: [c] (ignore case) or [cd] (ignore case and diacritics)", at: open)
            }
            op.ignoresCase = text.lowercased().contains("c")
            op.ignoresDiacritics = text.lowercased().contains("d")
        }
        return op
    }

    func operatorLength(_ token: TextQueryToken) -> Int {
        switch token.kind {
        case .symbol(let s): s.count
        case .identifier(let name, _): name.count
        default: 0
        }
    }

    // MARK: Operands

    /// A key path (through to-one relationships), `count(PATH)`, or a literal.
    mutating func operand(in entity: EntityDescription) throws(TextQueryError) -> Operand {
        let token = current
        switch token.kind {
        case .string(let s):
            position += 1
            return Operand(value: .literal(.string(s)), token: token)
        case .integer(let v, let text):
            position += 1
            return Operand(value: .literal(.integer(v, text: text)), token: token)
        case .real(let v, let text):
            position += 1
            return Operand(value: .literal(.real(v, text: text)), token: token)
        case .symbol("-"):
            position += 1
            switch next().kind {
            case .integer(let v, let text): return Operand(value: .literal(.integer(-v, text: "-" + text)), token: token)
            case .real(let v, let text): return Operand(value: .literal(.real(-v, text: "-" + text)), token: token)
            default: throw error(.syntax, "expected a number after '-'", at: token)
            }
        case .identifier(let name, quoted: false) where ["true", "false", "yes", "no"].contains(name.lowercased()):
            position += 1
            return Operand(value: .literal(.bool(["true", "yes"].contains(name.lowercased()))), token: token)
        case .identifier(let name, quoted: false) where ["nil", "null"].contains(name.lowercased()):
            position += 1
            return Operand(value: .literal(.null), token: token)
        case .identifier(let name, quoted: false) where name.lowercased() == "count" && tokens[position + 1].isSymbol("("):
            position += 2
            var names = try pathNames()
            guard accept(")") else { throw error(.syntax, "expected ')' to close 'count(', found \(current.quoted)", at: current) }
            names.append(("@count", token.column))
            return try pathOperand(try resolve(names, in: entity), token: token)
        case .identifier:
            return try pathOperand(try path(in: entity), token: token)
        default:
            throw error(.syntax, "expected a property name or a value, found \(token.quoted)", at: token)
        }
    }

    /// A path read outside `any`/`all`, which may not cross a to-many relationship.
    func pathOperand(_ path: ResolvedPath, token: TextQueryToken) throws(TextQueryError) -> Operand {
        if let (relationship, column) = path.toMany {
            let name = relationship.description.name
            throw TextQueryError(.invalidPath, "'\(name)' is a to-many relationship of \(relationship.source.name): test its objects with 'any \(path.text) …' or 'all \(path.text) …', or count them with \(name).@count", query: query, column: column)
        }
        return Operand(value: .path(path), token: token)
    }

    // MARK: Comparisons

    /// The node comparing `left` with what follows `op`. Inside `any`/`all` (`literalOnly`), the
    /// right-hand side must be a literal: the test runs on the related objects, whose paths
    /// cannot reach back to the object being fetched.
    mutating func comparison(_ left: Operand, _ op: ComparisonOperator, in entity: EntityDescription, literalOnly: Bool) throws(TextQueryError) -> PredicateNode {
        if case .isIn = op.kind { return try membership(left, op) }
        if literalOnly { try requireLiteral("inside 'any' or 'all', compare with a literal: the test runs on each related object", .unsupported) }
        let right = try operand(in: entity)
        var l = try node(left, comparedWith: right, op)
        var r = try node(right, comparedWith: left, op)
        if op.ignoresCase {
            l = .lowercase(l)
            r = .lowercase(r)
        }
        switch op.kind {
        case .compare(let compare):
            if op.ignoresDiacritics {
                throw error(.unsupported, "[d] (ignoring diacritics) is only available as contains[cd]", at: op.token)
            }
            if op.ignoresCase, compare != .equal, compare != .notEqual {
                throw error(.unsupported, "[c] (ignoring case) applies to ==, !=, contains, beginswith and endswith", at: op.token)
            }
            return .compare(compare, l, r)
        case .string(let string):
            if op.ignoresDiacritics {
                guard string == .contains else {
                    throw error(.unsupported, "[d] (ignoring diacritics) is only available as contains[cd]", at: op.token)
                }
                return .string(.containsIgnoringCaseAndDiacritics, try node(left, comparedWith: right, op), try node(right, comparedWith: left, op))
            }
            return .string(string, l, r)
        case .isIn:
            preconditionFailure("handled above")
        }
    }

    /// Throws when the next token starts a key path rather than a literal.
    func requireLiteral(_ message: String, _ code: TextQueryError.Code = .syntax) throws(TextQueryError) {
        if case .identifier(let name, let quoted) = current.kind, quoted || !Self.literalKeywords.contains(name.lowercased()) {
            throw error(code, message, at: current)
        }
    }

    /// `PATH in [LITERAL, …]`.
    mutating func membership(_ left: Operand, _ op: ComparisonOperator) throws(TextQueryError) -> PredicateNode {
        guard case .path(let path) = left.value else {
            throw error(.syntax, "'in' tests a property: write 'PATH in [values]'", at: left.token)
        }
        guard accept("[") else { throw error(.syntax, "expected '[' to start the list after 'in', found \(current.quoted)", at: current) }
        var values: [StoredValue] = []
        if !accept("]") {
            repeat {
                let token = current
                try requireLiteral("the list after 'in' holds literals only")
                guard case .literal(let literal) = try operand(in: path.terminalOwner).value else { continue }
                values.append(try storedValue(literal, at: token, for: path.valueKind))
            } while accept(",")
            guard accept("]") else { throw error(.syntax, "expected ',' or ']' in the list after 'in', found \(current.quoted)", at: current) }
        }
        return .isIn(ResolvedPath.wrap(path.prefix, path.terminalNode), values)
    }

    /// The node for one side of a comparison, checking it against the operator and reading a
    /// literal as the type of the other side.
    func node(_ operand: Operand, comparedWith other: Operand, _ op: ComparisonOperator) throws(TextQueryError) -> PredicateNode {
        switch operand.value {
        case .path(let path):
            switch (op.kind, path.valueKind) {
            case (.string, .attribute(let a, let owner)) where a.type != .string && a.type != .url:
                throw error(.typeMismatch, "\(owner.name).\(a.name) is \(English.a(a.type.rawValue)) attribute; \(op.token.quoted) tests text", at: operand.token)
            case (.string, .object), (.string, .count):
                throw error(.typeMismatch, "'\(path.text)' is not text; \(op.token.quoted) tests text", at: operand.token)
            case (.compare(let c), .attribute(let a, let owner)) where c != .equal && c != .notEqual && !Self.isOrderable(a.type):
                throw error(.unsupported, "\(owner.name).\(a.name) is \(English.a(a.type.rawValue)) attribute, whose stored form does not sort like its values: compare it with == or != only", at: op.token)
            case (.compare(let c), .object) where c != .equal && c != .notEqual:
                throw error(.unsupported, "'\(path.text)' is a relationship: compare it with == or != only", at: op.token)
            default:
                return ResolvedPath.wrap(path.prefix, path.terminalNode)
            }
        case .literal(let literal):
            if case .string = op.kind, literal != .null {
                guard case .string = literal else { throw error(.typeMismatch, "\(op.token.quoted) tests text: compare with a string in double quotes", at: operand.token) }
            }
            if case .path(let path) = other.value { return .constant(try storedValue(literal, at: operand.token, for: path.valueKind)) }
            return .constant(try storedValue(literal, at: operand.token, for: nil))
        }
    }

    /// A literal as the store keeps a value of `kind` (as written when `kind` is `nil`).
    func storedValue(_ literal: TextQueryLiteral, at token: TextQueryToken, for kind: TextQueryValueKind?) throws(TextQueryError) -> StoredValue {
        if literal == .null { return .null }
        func mismatch(_ expected: String) -> TextQueryError {
            let what: String = switch kind {
            case .attribute(let a, let owner)?: "\(owner.name).\(a.name) is \(English.a(a.type.rawValue)) attribute"
            case .object(let destination)?: "a relationship to \(destination.name)"
            case .count?: "a count"
            case nil: "this"
            }
            return error(.typeMismatch, "\(what): compare it with \(expected), not \(token.quoted)", at: token)
        }
        switch kind {
        case nil:
            return Self.plainValue(literal)
        case .count?:
            switch literal {
            case .integer(let v, _): return .integer(v)
            case .real(let v, _): return .real(v)
            default: throw mismatch("a number")
            }
        case .object(let destination)?:
            switch literal {
            case .integer(let v, _): return .integer(v)
            case .string(let text):
                guard let url = URL(string: text), let id = try? AnyObjectID(uriRepresentation: url), id.entityName == destination.name else {
                    throw mismatch("nil, a primary key, or the URI of \(English.a(destination.name)) (loom://…/\(destination.name)/<key>)")
                }
                return .integer(id.primaryKey)
            default: throw mismatch("nil, a primary key, or an object URI")
            }
        case .attribute(let a, _)?:
            return try attributeValue(literal, a.type, mismatch)
        }
    }

    static func plainValue(_ literal: TextQueryLiteral) -> StoredValue {
        switch literal {
        case .string(let s): .text(s)
        case .integer(let v, _): .integer(v)
        case .real(let v, _): .real(v)
        case .bool(let b): .integer(b ? 1 : 0)
        case .null: .null
        }
    }

    func attributeValue(_ literal: TextQueryLiteral, _ type: AttributeType, _ mismatch: (String) -> TextQueryError) throws(TextQueryError) -> StoredValue {
        switch (type, literal) {
        case (.bool, .bool(let b)): return .integer(b ? 1 : 0)
        case (.bool, .integer(let v, _)) where v == 0 || v == 1: return .integer(v)
        case (.bool, _): throw mismatch("true or false")
        case (.integer16, .integer(let v, _)), (.integer32, .integer(let v, _)), (.integer64, .integer(let v, _)),
             (.double, .integer(let v, _)), (.float, .integer(let v, _)):
            return .integer(v)
        case (.integer16, .real(let v, _)), (.integer32, .real(let v, _)), (.integer64, .real(let v, _)),
             (.double, .real(let v, _)), (.float, .real(let v, _)):
            return .real(v)
        case (.integer16, _), (.integer32, _), (.integer64, _), (.double, _), (.float, _): throw mismatch("a number")
        case (.string, .string(let s)), (.url, .string(let s)): return .text(s)
        case (.string, _), (.url, _): throw mismatch("a string in double quotes")
        case (.date, .string(let s)):
            guard let date = Self.date(s) else { throw mismatch("an ISO-8601 date (\"2024-05-01\" or \"2024-05-01T12:30:00Z\")") }
            return .real(date.timeIntervalSinceReferenceDate)
        case (.date, _): throw mismatch("an ISO-8601 date in double quotes (\"2024-05-01\" or \"2024-05-01T12:30:00Z\")")
        case (.uuid, .string(let s)):
            guard let uuid = UUID(uuidString: s) else { throw mismatch("a UUID in double quotes") }
            return uuid.storedValue
        case (.uuid, _): throw mismatch("a UUID in double quotes")
        case (.decimal, .string(let text)), (.decimal, .integer(_, let text)), (.decimal, .real(_, let text)):
            guard let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { throw mismatch("a decimal number") }
            return decimal.storedValue
        case (.decimal, _): throw mismatch("a decimal number")
        case (.binary, _), (.codable, _): throw mismatch("nil (its bytes cannot be written as a literal)")
        }
    }

    /// An ISO-8601 date: a full date (midnight UTC) or a date and time, with or without
    /// fractional seconds; a time without a zone is UTC.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        let candidates: [(String, ISO8601DateFormatter.Options)] = [
            (text, [.withInternetDateTime, .withFractionalSeconds]), (text, [.withInternetDateTime]),
            (text + "Z", [.withInternetDateTime, .withFractionalSeconds]), (text + "Z", [.withInternetDateTime]),
            (text, [.withFullDate]),
        ]
        for (candidate, options) in candidates {
            formatter.formatOptions = options
            if let date = formatter.date(from: candidate) { return date }
        }
        return nil
    }
}

extension ResolvedPath {
    /// The entity whose object holds the terminal.
    var terminalOwner: EntityDescription {
        switch terminal {
        case .attribute(_, _, let owner): owner
        case .toOne(let r), .count(let r): r.source
        }
    }
}
