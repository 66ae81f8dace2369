@_spi(LoomStore) import LoomCore

/// A recursive-descent parser from a text query's tokens to Loom's predicate tree; the grammar
/// is ``TextQuery``'s. Names are resolved while parsing, so every error has its column.
struct TextQueryParser {
    let query: String
    let schema: Schema
    let tokens: [TextQueryToken]
    var position = 0
    /// How many parentheses and `not`s the parser is inside: each is a level of its recursion,
    /// so a query nested deeper than ``maximumNesting`` is refused instead of overflowing the
    /// stack (SQLite refuses expressions deeper than 1000 levels anyway).
    var nesting = 0
    static let maximumNesting = 256
    /// How many `and`s and `or`s the query has: a chain of them is a loop here but a tree as deep
    /// as the chain is long, which the SQL generator walks recursively. SQLite refuses an
    /// expression deeper than 1000 levels, so a query past ``maximumJunctions`` is refused here,
    /// with its column, instead of overflowing the stack.
    var junctions = 0
    static let maximumJunctions = 1000

    init(_ query: String, schema: Schema) throws(TextQueryError) {
        var lexer = TextQueryLexer(query)
        self.tokens = try lexer.tokens()
        self.query = query
        self.schema = schema
    }

    // MARK: Tokens

    var current: TextQueryToken { tokens[position] }

    mutating func next() -> TextQueryToken {
        let token = tokens[position]
        if position < tokens.count - 1 { position += 1 }
        return token
    }

    /// Consumes the symbol if it is next.
    mutating func accept(_ symbol: String) -> Bool {
        guard current.isSymbol(symbol) else { return false }
        position += 1
        return true
    }

    /// Consumes the keyword if it is next.
    mutating func acceptKeyword(_ keywords: String...) -> Bool {
        guard keywords.contains(where: current.isKeyword) else { return false }
        position += 1
        return true
    }

    func error(_ code: TextQueryError.Code, _ message: String, at token: TextQueryToken) -> TextQueryError {
        TextQueryError(code, message, query: query, column: token.column)
    }

    // MARK: Clauses

    struct Parsed {
        var entity: EntityDescription
        var predicate: PredicateNode?
        var sortKeys: [SortKey] = []
        var limit: Int?
        var offset = 0
    }

    mutating func parseQuery() throws(TextQueryError) -> Parsed {
        let name = next()
        guard case .identifier(let entityName, _) = name.kind else {
            throw error(.syntax, "expected an entity name, found \(name.quoted)", at: name)
        }
        guard let entity = schema.entity(named: entityName) else {
            let names = schema.entities.map(\.name)
            throw error(.unknownEntity, "no entity '\(entityName)' in the store\(Self.suggestion(for: entityName, among: names)) (its entities: \(names.joined(separator: ", ")))", at: name)
        }
        var parsed = Parsed(entity: entity)
        var expected = ["where", "sort", "limit", "offset"]
        if acceptKeyword("where") {
            parsed.predicate = try predicate(in: entity)
            expected = ["and", "or", "sort", "limit", "offset"]
        }
        if acceptKeyword("sort") {
            parsed.sortKeys = try sortKeys(of: entity)
            expected = [",", "limit", "offset"]
        }
        if acceptKeyword("limit") {
            parsed.limit = try count(after: "limit")
            expected = ["offset"]
        }
        if acceptKeyword("offset") {
            parsed.offset = try count(after: "offset") ?? 0
            expected = []
        }
        guard current.kind == .end else {
            let list = expected.map { "'\($0)'" } + ["the end of the query"]
            let text = list.count == 1 ? list[0] : list.dropLast().joined(separator: ", ") + " or " + list.last!
            throw error(.syntax, "expected \(text), found \(current.quoted)", at: current)
        }
        return parsed
    }

    mutating func count(after keyword: String) throws(TextQueryError) -> Int? {
        let token = next()
        guard case .integer(let value, _) = token.kind, let n = Int(exactly: value) else {
            throw error(.syntax, "'\(keyword)' takes a whole number, found \(token.quoted)", at: token)
        }
        return n
    }

    mutating func sortKeys(of entity: EntityDescription) throws(TextQueryError) -> [SortKey] {
        var keys: [SortKey] = []
        repeat {
            let start = current
            let path = try path(in: entity)
            guard path.toMany == nil, case .attribute(let i, let attribute, let owner) = path.terminal else {
                throw error(.invalidPath, "'sort' takes an attribute, of \(entity.name) or through to-one relationships; '\(path.text)' is not one", at: start)
            }
            if !Self.isOrderable(attribute.type) {
                throw error(.unsupported, "\(owner.name).\(attribute.name) is \(English.a(attribute.type.rawValue)) attribute, whose stored form does not sort like its values: it cannot be a sort key", at: start)
            }
            var ascending = true
            if acceptKeyword("desc", "descending") { ascending = false } else { _ = acceptKeyword("asc", "ascending") }
            keys.append(SortKey(attributeIndex: i, ascending: ascending, relationshipPath: path.prefix.map(\.reference)))
        } while accept(",")
        return keys
    }

    /// Whether `<`, `>` and sorting on this type agree with the values' order (as `#Predicate`
    /// translation checks).
    static func isOrderable(_ type: AttributeType) -> Bool {
        switch type {
        case .decimal, .codable, .uuid, .url: false
        default: true
        }
    }

    // MARK: Predicates

    /// `or` binds loosest, then `and`, then `not`.
    mutating func predicate(in entity: EntityDescription) throws(TextQueryError) -> PredicateNode {
        var node = try conjunction(in: entity)
        while case let token = current, acceptKeyword("or") || accept("||") {
            try countJunction(at: token)
            node = .or(node, try conjunction(in: entity))
        }
        return node
    }

    mutating func conjunction(in entity: EntityDescription) throws(TextQueryError) -> PredicateNode {
        var node = try negation(in: entity)
        while case let token = current, acceptKeyword("and") || accept("&&") {
            try countJunction(at: token)
            node = .and(node, try negation(in: entity))
        }
        return node
    }

    /// Counts one more `and` or `or`, `token`; throws past ``maximumJunctions``.
    mutating func countJunction(at token: TextQueryToken) throws(TextQueryError) {
        junctions += 1
        guard junctions <= Self.maximumJunctions else {
            throw error(.unsupported, "the query joins more than \(Self.maximumJunctions) conditions with 'and' and 'or' (SQLite evaluates expressions up to 1000 levels deep); test a list of values with 'in [...]'", at: token)
        }
    }

    mutating func negation(in entity: EntityDescription) throws(TextQueryError) -> PredicateNode {
        let start = current
        if acceptKeyword("not") || accept("!") {
            try enterNesting(at: start)
            defer { nesting -= 1 }
            return .not(try negation(in: entity))
        }
        return try primary(in: entity)
    }

    /// Counts one more level of nesting, opened by `token`; throws past ``maximumNesting``.
    mutating func enterNesting(at token: TextQueryToken) throws(TextQueryError) {
        nesting += 1
        guard nesting <= Self.maximumNesting else {
            throw error(.unsupported, "the query nests parentheses and 'not's more than \(Self.maximumNesting) deep here; write it with fewer levels", at: token)
        }
    }

    mutating func primary(in entity: EntityDescription) throws(TextQueryError) -> PredicateNode {
        let start = current
        if accept("(") {
            try enterNesting(at: start)
            defer { nesting -= 1 }
            let node = try predicate(in: entity)
            guard accept(")") else {
                throw error(.syntax, "expected ')' to close the '(' at column \(start.column), found \(current.quoted)", at: current)
            }
            return node
        }
        if current.isKeyword("any") || current.isKeyword("all"), case .identifier = tokens[position + 1].kind {
            return try quantified(in: entity)
        }
        let left = try operand(in: entity)
        guard let op = try comparisonOperator() else {
            // A bool attribute alone tests for true; `true` and `false` stand for themselves.
            if case .path(let path) = left.value, case .attribute(_, let a, _) = path.terminal, a.type == .bool, path.toMany == nil {
                return .compare(.equal, ResolvedPath.wrap(path.prefix, path.terminalNode), .constant(.integer(1)))
            }
            if case .literal(.bool(let b)) = left.value { return .constant(.integer(b ? 1 : 0)) }
            throw error(.syntax, "expected a comparison (==, !=, <, <=, >, >=, contains, beginswith, endswith, in) after \(left.description), found \(current.quoted)", at: current)
        }
        return try comparison(left, op, in: entity, literalOnly: false)
    }

    /// `any PATH TEST` / `all PATH TEST`: the test runs on the objects of the path's to-many
    /// relationship; the right-hand side must be a literal.
    mutating func quantified(in entity: EntityDescription) throws(TextQueryError) -> PredicateNode {
        let keyword = next()
        let isAny = keyword.isKeyword("any")
        let path = try path(in: entity)
        guard let (relationship, _) = path.toMany else {
            throw error(.invalidPath, "'\(isAny ? "any" : "all")' tests the objects of a to-many relationship, and '\(path.text)' crosses none", at: keyword)
        }
        guard let op = try comparisonOperator() else {
            throw error(.syntax, "expected a comparison after '\(path.text)', found \(current.quoted)", at: current)
        }
        var inner = path
        inner.prefix = []
        inner.toMany = nil
        let test = try comparison(Operand(value: .path(inner), token: keyword), op, in: relationship.destination, literalOnly: true)
        let node: PredicateNode = isAny ? .anyRelated(relationship.reference, test) : .allRelated(relationship.reference, test)
        return ResolvedPath.wrap(path.prefix, node)
    }
}
