import ArgumentParser
import Foundation
import Loom
import LoomTools

/// `loom query STORE QUERY`: prints the objects a text query matches, without the model the
/// store was made with.
struct QueryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Fetch objects from a Loom store with a text query.",
        discussion: """
            QUERY is: Entity [where PREDICATE] [sort KEY [asc|desc], ...] [limit N] [offset N]

            Predicates compare key paths with literals or with each other: == != < <= > >= \
            (= is ==), contains, beginswith (hasprefix), endswith (hassuffix), and \
            PATH in [v1, v2]. Add [c] to ignore case (title contains[c] "dune"), contains[cd] \
            also ignores diacritics. Combine with and/or/not (&&, ||, !) and parentheses; not \
            binds tightest, then and, then or. Literals: "text" (escapes \\" \\\\ \\n \\t \\u{E9}), \
            42, -3.5, true, false, nil. A date attribute compares with an ISO-8601 string \
            ("1990-01-01" or "2024-05-01T12:30:00Z"), a UUID attribute with its text, a to-one \
            relationship with nil, a key or an object URI. A bool attribute alone tests for \
            true.

            Paths cross to-one relationships (author.name). A to-many relationship is tested \
            with any/all (any novels.pages > 300, all novels.pages > 100; all holds for none) \
            or counted (novels.@count >= 2, count(novels) >= 2). == and != treat nil as a \
            value; other comparisons with nil match nothing, as in #Predicate.

            Output: a table (uri, then attributes, then to-one relationships as URIs), or \
            --json (an array of objects {"uri": ..., "<attribute>": ..., ...}), --ndjson (one \
            object per line, streamed) or --csv (RFC 4180). In JSON dates are ISO-8601 strings \
            in UTC, UUIDs and decimals strings, binary data base64, relationships object URIs, \
            nil null. The store is only read: it may be open in another process.

            Examples:
              loom query lib.loom 'Book where author.name == "Ann" sort title limit 10'
              loom query lib.loom 'Author where any books.pages > 300' --json
              loom query lib.loom 'Author where books.@count == 0 or name beginswith "A"'
              loom query lib.loom 'Book where title contains[c] "dune"' --csv
              loom query lib.loom 'Book sort author.name, year desc offset 20' --ndjson
            """)

    @Argument(help: "The store file, or a PostgreSQL URL (postgres://user@host:port/db?schema=name).")
    var store: String

    @Argument(help: "The query, in single quotes so that the shell leaves its double quotes alone.")
    var query: String

    @Flag(help: "Print a JSON array of objects.")
    var json = false

    @Flag(help: "Print one JSON object per line, as the objects are read.")
    var ndjson = false

    @Flag(help: "Print comma-separated values with a header line.")
    var csv = false

    func validate() throws {
        if [json, ndjson, csv].filter({ $0 }).count > 1 {
            throw ValidationError("Choose one of --json, --ndjson and --csv.")
        }
    }

    func run() throws {
        let format: QueryOutputFormat = json ? .json : ndjson ? .ndjson : csv ? .csv : .table
        // A failure (a query it cannot read, a store it cannot open) is printed by LoomCommand.
        let store = try ReadOnlyStore(location: store)
        let parsed = try TextQuery(parsing: query, schema: store.schema)
        var printer = QueryPrinter(format: format, entity: parsed.entity, schema: store.schema,
                                   storeIdentifier: store.storeIdentifier, output: STDOUT_FILENO)
        // A progress line on standard error every 10,000 objects, when it is a terminal and
        // the objects go elsewhere (a file, a pipe).
        let progress = isatty(STDOUT_FILENO) == 0 ? ProgressLine(verb: "read") : nil
        var count = 0
        try store.forEachRow(of: parsed) { key, values in
            try printer.add(key: key, values: values)
            count += 1
            if count % 10_000 == 0 { progress?.report(count) }
        }
        if count >= 10_000 { progress?.finish(count) }
        try printer.finish()
    }
}
