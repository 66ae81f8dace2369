@_spi(LoomStore) package import LoomCore

/// A fetch written as text, parsed against a store's saved schema: what `loom query` runs.
///
/// `#Predicate` is built by the compiler and `NSPredicate(format:)` does not exist on Linux, so a
/// tool that queries stores it was not compiled against needs its own small language. A text
/// query names an entity, then optionally a filter, an order and a window:
///
/// ```text
/// query      := Entity [where PREDICATE] [sort KEY [asc|desc], …] [limit N] [offset N]
/// PREDICATE  := PREDICATE or PREDICATE | PREDICATE and PREDICATE | not PREDICATE
///             | ( PREDICATE ) | COMPARISON | any PATH TEST | all PATH TEST | true | false
/// COMPARISON := OPERAND OPERATOR OPERAND | PATH in [LITERAL, …] | PATH      (a bool attribute)
/// OPERATOR   := == | = | != | < | <= | > | >= | contains | beginswith | hasprefix
///             | endswith | hassuffix, each optionally followed by [c] (ignoring case);
///               contains[cd] also ignores diacritics
/// OPERAND    := PATH | LITERAL | count(PATH)
/// PATH       := name(.name)*   through to-one relationships; PATH.@count counts a to-many
/// LITERAL    := "text" | 42 | -3.5 | true | false | nil
/// ```
///
/// - `and`, `or`, `not` may be written `&&`, `||`, `!`; `not` binds tightest, then `and`, then
///   `or`. Keywords are case-insensitive; a property named like one is written in backquotes.
/// - A predicate nests parentheses and `not`s at most 256 levels deep and joins at most 1000
///   conditions with `and` and `or`: a deeper tree could overflow the stack of the recursion that
///   translates it (an ``TextQueryError/Code/unsupported`` error beyond).
/// - Strings are in double quotes, with the escapes `\"`, `\\`, `\n`, `\t`, `\r` and `\u{…}`.
/// - A literal takes the type of the attribute it is compared with: a date attribute compares
///   with an ISO-8601 string (`born > "1990-01-01"`, `"2024-05-01T12:00:00Z"`), a UUID attribute
///   with its text, a decimal with a number or a string, a to-one relationship with `nil`, a
///   primary key, or an object URI (`loom://…/Author/3`).
/// - `any books.title == "x"` holds when at least one related object passes the test, `all
///   books.pages > 3` when every one does (an empty relationship passes `all`); a path may cross
///   one to-many relationship, inside `any` or `all` only.
/// - `books.@count > 2` and `count(books) > 2` compare how many objects a to-many holds.
/// - `sort` takes attributes of the entity or of objects reached through to-one relationships;
///   ties are broken by primary key, so the order is total.
///
/// The predicate keeps Loom's semantics: `==` and `!=` treat `nil` as a value (`author == nil`),
/// other comparisons with `nil` are unknown (neither true nor false), as with `#Predicate`.
///
/// ```swift
/// let schema = try SQLiteStore.savedSchema(at: url)
/// let query = try TextQuery(parsing: #"Book where author.name == "Ann" sort title limit 10"#, schema: schema)
/// ```
///
/// A `TextQuery` is an immutable value: use it from any isolation.
package struct TextQuery: Sendable {
    /// The query as written.
    package let text: String
    /// The entity whose objects the query fetches.
    package let entity: EntityDescription
    /// The filter; `nil` when the query has no `where`.
    package let predicate: PredicateNode?
    /// The order, first key first; empty when the query has no `sort` (objects then come in
    /// primary-key order).
    package let sortKeys: [SortKey]
    /// The most objects to fetch (`limit`), if any.
    package let limit: Int?
    /// How many matching objects to skip (`offset`).
    package let offset: Int

    /// Parses a text query against a schema (usually one saved in a store, `Schema(record:)`):
    /// entity, attribute and relationship names are resolved now.
    ///
    /// - Throws: ``TextQueryError`` with the column the problem is at: a syntax error, an unknown
    ///   entity or property (with the nearest name when one is close), a literal that does not
    ///   fit the attribute it is compared with, or a construct the predicate tree cannot express.
    package init(parsing text: String, schema: Schema) throws(TextQueryError) {
        var parser = try TextQueryParser(text, schema: schema)
        let parsed = try parser.parseQuery()
        self.text = text
        self.entity = parsed.entity
        self.predicate = parsed.predicate
        self.sortKeys = parsed.sortKeys
        self.limit = parsed.limit
        self.offset = parsed.offset
    }

    /// The query as a store runs it.
    package var storeQuery: StoreQuery {
        StoreQuery(entity: entity, predicate: predicate, sortKeys: sortKeys, fetchOffset: offset, fetchLimit: limit)
    }
}

/// Why a text query could not be parsed, and where: rendered like a compiler's diagnostic, the
/// query's line with a caret under the column.
///
/// ```text
/// error: no attribute 'titel' in Book (did you mean 'title'?)
/// Book where titel == "Dune"
///            ^
/// ```
package struct TextQueryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is; extensible.
    package struct Code: RawRepresentable, Hashable, Sendable {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        /// The text does not follow the grammar (an unexpected or missing token, a bad literal).
        package static let syntax = Code(rawValue: "syntax")
        /// No entity of that name in the schema.
        package static let unknownEntity = Code(rawValue: "unknownEntity")
        /// No attribute or relationship of that name in the entity.
        package static let unknownProperty = Code(rawValue: "unknownProperty")
        /// A path that goes somewhere it cannot (through an attribute, to a to-many as a value).
        package static let invalidPath = Code(rawValue: "invalidPath")
        /// A literal that does not fit what it is compared with (a string for an integer, a date
        /// that is not ISO-8601).
        package static let typeMismatch = Code(rawValue: "typeMismatch")
        /// Valid text that Loom's predicates cannot express (ordering a UUID attribute).
        package static let unsupported = Code(rawValue: "unsupported")
    }

    package let code: Code
    /// What is wrong, and how to fix it when that is not obvious.
    package let message: String
    /// The query that was parsed.
    package let query: String
    /// Where the problem is: 1-based, in characters from the start of the query.
    package let column: Int

    package init(_ code: Code, _ message: String, query: String, column: Int) {
        self.code = code
        self.message = message
        self.query = query
        self.column = column
    }

    /// The query's line holding the column, then a caret under it.
    package var caretDiagram: String {
        var lineStart = 0, index = 0
        var lines: [(start: Int, text: String)] = []
        var current = ""
        for character in query {
            if character == "\n" {
                lines.append((lineStart, current))
                current = ""
                lineStart = index + 1
            } else {
                current.append(character)
            }
            index += 1
        }
        lines.append((lineStart, current))
        let line = lines.last { $0.start <= column - 1 } ?? lines[0]
        let offset = max(0, column - 1 - line.start)
        // Tabs stay tabs under the caret, so that it lines up however the terminal shows them.
        let padding = line.text.prefix(offset).map { $0 == "\t" ? "\t" : " " }.joined()
        return "\(line.text)\n\(padding)^"
    }

    package var description: String { "error: \(message) (column \(column))\n\(caretDiagram)" }
}
