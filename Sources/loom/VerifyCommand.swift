import ArgumentParser
import Foundation
import Loom
import LoomTools
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `loom verify PATH`: checks a SQLite store for damage (SQLite's integrity and foreign-key
/// checks, then Loom's invariants) without the model it was made with, and without changing it.
/// Exits 0 when the store is sound, 1 when something is wrong, 2 when it cannot be verified.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a Loom store for damage, read-only.",
        discussion: """
            Runs SQLite's integrity_check (--quick: quick_check) and foreign_key_check, then \
            Loom's own invariants, read from the schema saved in the store: every table and \
            column the schema needs, with its type and nullability; a unique index per \
            uniqueness constraint, and no duplicates; versions >= 1; keys below the key \
            allocator's mark; foreign keys and many-to-many join rows that point at existing \
            objects; both sides of one-to-one relationships agreeing; ordered relationships' \
            saved orders that are whole keys, each listed once; every attribute value of a \
            type its attribute holds (no NULL where required, no text in an integer or date \
            column, Int16/Int32 in range, UUIDs of 16 bytes, valid UTF-8, URLs and decimals that \
            parse, Codable values that are JSON); every history transaction readable, naming \
            only entities and properties of the schema. Findings never show a value.

            The store is opened read-only and never written, not even checkpointed: it may be \
            open in another process. On a store no process has open, SQLite leaves its empty \
            -wal and -shm index files beside it, as any reader does; the store file itself is \
            unchanged. A PostgreSQL store (postgres://user@host:port/db?schema=name) is checked \
            through the store: its tables, constraints and indexes as the server sees them, then \
            keys, versions, values, to-one references and uniqueness on its rows.

            Exit status: 0 when nothing is found, 1 when something is, 2 when the file cannot \
            be verified (missing, not SQLite, not a Loom store), 64 for a wrong command line \
            (as every verb: loom --help). Errors are one `Error: …` message on standard error.

            Text output: one line per finding, `kind URI: sentence`. --json prints one object:
            {"store": path, "storeIdentifier": uuid, "healthy": bool, "objectCount": n,
             "checkCount": n, "isTruncated": bool, "findings": [{"kind": "danglingForeignKey",
             "entity": "Novel", "property": "author", "object": "loom://<uuid>/Novel/12",
             "message": "..."}]}
            (entity, property and object are left out when a finding has none).

            Example:
              $ loom verify Library.loom
              danglingForeignKey loom://7C0E.../Novel/12: Novel 12's author points at Author 99, which does not exist.
              1 problem in 5,000 objects (31 checks).
            """)

    @Argument(help: "The store file, or a PostgreSQL URL.")
    var path: String

    @Flag(help: "Print JSON (see the shape above) instead of text.")
    var json = false

    @Flag(help: "Run SQLite's quick_check instead of integrity_check (does not match indexes to tables).")
    var quick = false

    @Option(help: "At most this many findings per check.")
    var limit = 100

    func run() throws {
        var verifier = StoreVerifier(location: path)
        verifier.integrityCheck = quick ? .quick : .full
        verifier.findingLimitPerCheck = limit
        let showsProgress = isatty(STDERR_FILENO) == 1
        let progress: ((VerificationProgress) -> Void)? = showsProgress ? { Self.showProgress($0) } : nil
        let report: VerificationReport
        do throws(LoomError) {
            report = try verifier.verify(progress: progress)
        } catch {
            // The error is printed by LoomCommand (exit status 2), on a line of its own.
            if showsProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            throw error
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            for finding in report.findings { print(finding) }
            let problems = report.findings.count == 1 ? "1 problem" : "\(report.findings.count) problems"
            let found = report.healthy ? "No problems" : problems + (report.isTruncated ? " (more left out: raise --limit)" : "")
            print("\(found) in \(report.objectCount) objects (\(report.checkCount) checks) of \(report.store).")
        }
        if !report.healthy { throw ExitCode(1) }
    }

    /// One line on standard error, rewritten in place, cleared once done.
    private static func showProgress(_ progress: VerificationProgress) {
        let line = progress.completed == progress.total ? "\r\u{1B}[K" : "\r\u{1B}[K[\(progress.completed + 1)/\(progress.total)] \(progress.step)…"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
