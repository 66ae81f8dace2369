@_spi(LoomStore) import LoomCore

/// A key path of a text query resolved against the schema: the to-one relationships it
/// crosses, at most one to-many (for `any`/`all`), and what it ends at.
struct ResolvedPath {
    /// What a path's last name is.
    enum Terminal {
        /// An attribute of `owner`, by position.
        case attribute(Int, AttributeDescription, owner: EntityDescription)
        /// A to-one relationship, whose value is the related object's key.
        case toOne(ResolvedRelationship)
        /// `books.@count`: how many objects a to-many relationship holds.
        case count(ResolvedRelationship)
    }

    /// The to-one relationships before the to-many one (all of them when there is none).
    var prefix: [ResolvedRelationship] = []
    /// The to-many relationship the path crosses, with the column of its name.
    var toMany: (relationship: ResolvedRelationship, column: Int)?
    /// The to-one relationships after the to-many one.
    var rest: [ResolvedRelationship] = []
    var terminal: Terminal
    /// The column of the path's first name.
    let column: Int
    /// The path as written, `author.name`.
    let text: String

    /// The node reading the terminal on the object at the end of the path's relationships
    /// after the to-many one (the object itself when there is none).
    var terminalNode: PredicateNode {
        let node: PredicateNode = switch terminal {
        case .attribute(let i, _, _): .attribute(i)
        case .toOne(let r): .attribute(r.source.storedValueIndex(ofRelationship: r.index) ?? -1)
        case .count(let r): .relatedCount(r.reference)
        }
        return Self.wrap(rest, node)
    }

    /// `node` evaluated at the end of a chain of to-one relationships.
    static func wrap(_ path: [ResolvedRelationship], _ node: PredicateNode) -> PredicateNode {
        path.reversed().reduce(node) { .toOne($1.reference, $0) }
    }

    /// What the path's value is, for checking the literals compared with it.
    var valueKind: TextQueryValueKind {
        switch terminal {
        case .attribute(_, let a, let owner): .attribute(a, owner: owner)
        case .toOne(let r): .object(r.destination)
        case .count: .count
        }
    }
}

/// What a compared value is, which decides how a literal compared with it is read.
enum TextQueryValueKind {
    case attribute(AttributeDescription, owner: EntityDescription)
    /// A to-one relationship's destination key.
    case object(EntityDescription)
    case count
}

extension TextQueryParser {
    /// Reads and resolves a key path of `entity`'s objects: names joined by dots.
    mutating func path(in entity: EntityDescription) throws(TextQueryError) -> ResolvedPath {
        try resolve(try pathNames(), in: entity)
    }

    /// Reads the names of a key path, with their columns.
    mutating func pathNames() throws(TextQueryError) -> [(name: String, column: Int)] {
        var names: [(name: String, column: Int)] = []
        repeat {
            let token = next()
            guard case .identifier(let name, _) = token.kind else {
                throw error(.syntax, names.isEmpty ? "expected a property name, found \(token.quoted)" : "expected a property name after '.', found \(token.quoted)", at: token)
            }
            names.append((name, token.column))
        } while accept(".")
        return names
    }

    func resolve(_ names: [(name: String, column: Int)], in entity: EntityDescription) throws(TextQueryError) -> ResolvedPath {
        let text = names.map(\.name).joined(separator: ".")
        var owner = entity
        var prefix: [ResolvedRelationship] = [], rest: [ResolvedRelationship] = []
        var toMany: (relationship: ResolvedRelationship, column: Int)?
        var i = 0
        while i < names.count {
            let (name, column) = names[i]
            let isLast = i == names.count - 1
            if let a = owner.attributeIndex(named: name) {
                guard isLast else {
                    throw TextQueryError(.invalidPath, "'\(name)' is an attribute of \(owner.name), not a relationship: nothing can follow it", query: query, column: names[i + 1].column)
                }
                return ResolvedPath(prefix: prefix, toMany: toMany, rest: rest, terminal: .attribute(a, owner.attributes[a], owner: owner), column: names[0].column, text: text)
            }
            guard let j = owner.relationshipIndex(named: name) else {
                if name == "@count" {
                    throw TextQueryError(.invalidPath, "'@count' follows a to-many relationship (as in books.@count)", query: query, column: column)
                }
                let kind = isLast ? "attribute or relationship" : "relationship"
                let candidates = isLast ? owner.attributes.map(\.name) + owner.relationships.map(\.name) : owner.relationships.map(\.name)
                throw TextQueryError(.unknownProperty, "no \(kind) '\(name)' in \(owner.name)\(Self.suggestion(for: name, among: candidates))", query: query, column: column)
            }
            let relationship = schema.relationship(j, of: owner)
            if relationship.description.kind == .toOne {
                if isLast {
                    return ResolvedPath(prefix: prefix, toMany: toMany, rest: rest, terminal: .toOne(relationship), column: names[0].column, text: text)
                }
                if toMany == nil { prefix.append(relationship) } else { rest.append(relationship) }
                owner = relationship.destination
                i += 1
                continue
            }
            if i + 1 < names.count, names[i + 1].name == "@count" {
                guard i + 2 == names.count else {
                    throw TextQueryError(.invalidPath, "nothing can follow '@count'", query: query, column: names[i + 2].column)
                }
                return ResolvedPath(prefix: prefix, toMany: toMany, rest: rest, terminal: .count(relationship), column: names[0].column, text: text)
            }
            if isLast {
                throw TextQueryError(.invalidPath, "'\(name)' is a to-many relationship of \(owner.name): compare its count (\(name).@count) or test its objects with 'any \(name).…' or 'all \(name).…'", query: query, column: column)
            }
            if toMany != nil {
                throw TextQueryError(.unsupported, "a path may cross only one to-many relationship, and '\(name)' is a second one", query: query, column: column)
            }
            toMany = (relationship, column)
            owner = relationship.destination
            i += 1
        }
        preconditionFailure("a path has at least one name")
    }

    /// ` (did you mean 'title'?)` when a candidate is a few edits away from `name`.
    static func suggestion(for name: String, among candidates: [String]) -> String {
        let lowered = name.lowercased()
        let scored = candidates.map { ($0, editDistance(lowered, $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, name.count / 3) else { return "" }
        return " (did you mean '\(best.0)'?)"
    }

    /// Levenshtein distance between two strings, by characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
