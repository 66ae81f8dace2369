import ArgumentParser
import Foundation
import LoomTools

/// `loom dump STORE`: every object of a store as NDJSON on standard output.
struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Write every object of a Loom store (SQLite or PostgreSQL) as NDJSON (one object per line).",
        discussion: """
            The first line is a header (format version, store identifier, schema version hash, \
            the key allocator and the saved schema), then one line per object, by entity and key: \
            {"uri":"loom://<store>/Book/12","entity":"Book","version":3,"attributes":{…},\
            "relationships":{"author":"loom://<store>/Author/4","tags":[…]}}. \
            Dates are seconds since 2001-01-01 UTC, data is base64, UUIDs, decimals, URLs and \
            Codable values are strings, nil is null; relationships appear on both sides, a to-one \
            as a URI or null, a to-many as an array of URIs (an ordered one in its order). \
            Every stored byte is kept: a value that does not fit its type is an object naming its \
            storage class ({"text": …}, {"real": "inf"}), text that is not valid UTF-8 is \
            {"textBytes": "<base64>"}. \
            A SQLite store is read read-only, in one snapshot, while other processes use it; a \
            PostgreSQL store (postgres://user@host:port/db?schema=name) through the store, \
            entity by entity.

            Example:
              loom dump Library.loom > library.ndjson
              loom load library.ndjson Copy.loom
              loom dump 'postgres://app@db:5432/library?schema=books' > library.ndjson
            """)

    @Argument(help: "The store file, or a PostgreSQL URL.")
    var path: String

    func run() throws {
        let progress = ProgressLine(verb: "dumped")
        let count = try LoomTools.dump(location: path, to: STDOUT_FILENO, progress: progress.report)
        progress.finish(count)
    }
}

/// `loom load FILE STORE`: a new store from a dump.
struct LoadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Make a new Loom store (SQLite or PostgreSQL) from a dump made by loom dump.",
        discussion: """
            The store is made from the schema in the dump's header (no application model needed) \
            and keeps the dumped store's identifier, keys and versions, so that the dump's URIs \
            name the same objects. STORE must not exist. The store is built in a temporary file \
            and renamed at the end: on any error (reported with the line and field) nothing is \
            left at STORE. No history transaction is written. Lines may end with LF or CRLF; \
            blank lines, a UTF-8 byte order mark and a last line without a newline are fine. \
            A PostgreSQL store (postgres://user@host:port/db?schema=name) is made in the URL's \
            schema, which must hold no objects; the load is one transaction, so a failed one \
            leaves no objects there.

            Example:
              loom dump Library.loom > library.ndjson
              loom load library.ndjson Copy.loom
              loom dump Library.loom | loom load - Copy.loom
              loom load library.ndjson 'postgres://app@db:5432/library?schema=books'
            """)

    @Argument(help: "The dump file, or - for standard input.")
    var file: String

    @Argument(help: "The store file to make, or a PostgreSQL URL.")
    var path: String

    func run() throws {
        let handle: FileHandle
        if file == "-" {
            handle = FileHandle.standardInput
        } else if let opened = FileHandle(forReadingAtPath: file) {
            handle = opened
        } else {
            let reason = FileManager.default.fileExists(atPath: file) ? "cannot be read (check its permissions)" : "does not exist"
            throw LoomToolError(.badInput, "The dump \(file) \(reason); nothing was loaded.")
        }
        defer { try? handle.close() }
        let progress = ProgressLine(verb: "loaded")
        let count = try LoomTools.load(from: handle.fileDescriptor, into: path, progress: progress.report)
        progress.finish(count)
    }
}

/// A progress line on standard error, rewritten in place, only when standard error is a terminal.
struct ProgressLine {
    let verb: String
    let isShown = isatty(STDERR_FILENO) != 0

    func report(_ count: Int) {
        guard isShown else { return }
        FileHandle.standardError.write(Data("\r\(verb) \(count) objects".utf8))
    }

    func finish(_ count: Int) {
        guard isShown else { return }
        FileHandle.standardError.write(Data("\r\(verb) \(count) objects\n".utf8))
    }
}
