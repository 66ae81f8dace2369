package import Foundation
@_spi(LoomStore) package import LoomCore
@_spi(LoomStore) import LoomSQLite
import LoomSQL
import GRDB

/// Checks a Loom store for damage: the store's own check of its storage (SQLite's integrity and
/// foreign-key checks), then Loom's invariants, read from the schema saved in the store (no
/// application model needed). A SQLite file is checked as below; a PostgreSQL store (a
/// `postgres://` URL, ``init(location:)``) through the store SPI: the server's view of the
/// store's tables, constraints and indexes, then keys, versions, values, to-one references and
/// uniqueness constraints on the rows the store returns (what the server enforces itself, column
/// types, `NOT NULL` and unique indexes, is trusted while its constraints and indexes are valid).
///
/// ```swift
/// let report = try StoreVerifier(url: URL(filePath: "Library.loom")).verify()
/// for finding in report.findings {
///     print(finding.kind, finding.object ?? "", finding.message)
/// }
/// ```
///
/// What is checked, each finding's ``VerificationFinding/Kind``:
/// - SQLite: `PRAGMA integrity_check` (or `quick_check`) and `PRAGMA foreign_key_check`.
/// - Layout: every entity and join table has its table, with every column, of the type and
///   nullability the saved schema gives it, no extra `NOT NULL` column without a default, and
///   a unique index for each uniqueness constraint; the saved version hash matches the schema.
/// - Objects: versions (`Z_OPT`) are at least 1; keys are between 1 and the key allocator's
///   high-water mark (`loom_keys.next`, exclusive); foreign keys and join rows point at rows
///   that exist; both sides of a one-to-one relationship point at each other; an ordered
///   relationship's saved order is whole keys, each listed once; uniqueness constraints hold.
/// - Values: every attribute value is one Loom reads back as its declared type: not NULL where
///   the attribute is required; of a storage class the type holds (no text in an integer or date
///   column); `Int16` and `Int32` values within their range, `Bool`s 0 or 1, `Float`s within
///   `Float`'s range; UUIDs of 16 bytes; text valid UTF-8; URLs and decimals that parse; `Codable`
///   values that are JSON. The saved schema records each attribute's stored type, not its Swift
///   type, so an enum's raw value is checked as an integer or string (not against its cases), and
///   a `Codable` value as JSON (not against its Swift shape).
/// - History: every history transaction `loom history` reads (those not purged) reads back: its
///   columns have their types, its packed changes decode, and it names only entities and
///   properties of the schema, each entity also in the transaction's entity list.
///
/// Values are never printed: they can be personal data. A finding names the entity, the
/// attribute and the object, and says what is wrong.
///
/// The file is opened as a read-only store (``SQLiteStore/init(readingAt:options:)``, connections
/// opened with `SQLITE_OPEN_READONLY`) and read in one transaction, so the
/// checks see one snapshot and nothing is written, not even a checkpoint: verifying works on a
/// store another process has open and is writing to. On a store no process has open, SQLite
/// leaves its (empty) `-wal` and `-shm` index files beside the store, as any read-only reader
/// of a WAL file does; the store file's bytes and modification time are unchanged.
///
/// Not isolated: call it from any thread; it blocks that thread while it reads.
package struct StoreVerifier: Sendable {
    /// Which of SQLite's whole-file checks runs.
    package enum IntegrityCheck: String, Sendable, Codable {
        /// `PRAGMA integrity_check`: every page, and every index against its table.
        case full
        /// `PRAGMA quick_check`: every page, without matching indexes to tables; faster.
        case quick
    }

    /// The store file (for a PostgreSQL store, the URL as a file URL: use ``location``).
    package let url: URL
    /// The store file's path, or the PostgreSQL store's URL.
    package let location: String
    /// Which SQLite integrity check runs; ``IntegrityCheck/full`` by default.
    package var integrityCheck: IntegrityCheck = .full
    /// At most this many findings of one check are reported; the report says when some were
    /// left out (``VerificationReport/isTruncated``).
    package var findingLimitPerCheck = 100

    /// A verifier of the store at `url`; nothing is opened until ``verify(progress:)``.
    package init(url: URL) {
        self.url = url
        self.location = url.path
    }

    /// A verifier of the store at `location`, a SQLite file path or a PostgreSQL URL
    /// (`postgres://user@host:port/db?schema=name`); nothing is opened until ``verify(progress:)``.
    package init(location: String) {
        self.url = URL(filePath: location)
        self.location = location
    }

    /// Runs every check and returns what it found.
    ///
    /// `progress` is called before each check, on the calling thread.
    ///
    /// - Throws: ``LoomError`` when the file cannot be verified at all: code
    ///   ``LoomError/Code/storeFailure`` when there is no file or it cannot be opened,
    ///   ``LoomError/Code/notADatabase`` when it is not SQLite, ``LoomError/Code/notALoomStore``
    ///   when it is a SQLite database without Loom's saved schema. Damage found inside a Loom
    ///   store is never thrown: it is in the report.
    /// - Complexity: a few scans of each table and index, one of them reading every attribute;
    ///   one to two seconds per million objects (see `Benchmarks/README.md`).
    package func verify(progress: ((VerificationProgress) -> Void)? = nil) throws(LoomError) -> VerificationReport {
        if PostgreSQLLocation.isURL(location) {
            let store = try PostgreSQLLocation.openExisting(location)
            defer { try? store.close() }
            return try verify(store, progress: progress)
        }
        let path = url.path
        let state = try SQLiteStore.savedState(at: url)
        let schema = try Schema(record: state.record)
        guard let identifier = state.metadata["storeIdentifier"].flatMap(UUID.init(uuidString:)) else {
            throw LoomError(.notALoomStore, "\(path) has a saved schema but no readable store identifier; the file is damaged or was not made by Loom.", path: path)
        }
        // The store opened read-only: it writes nothing, and waits for another process
        // committing or checkpointing rather than failing.
        var options = SQLiteStore.Options(maximumReaderCount: 1)
        options.isReadOnly = true
        let store = try SQLiteStore(url: url, schema: schema, options: options)
        defer { try? store.close() }
        var run = VerificationRun(schema: schema, identifier: identifier, state: state, limit: findingLimitPerCheck)
        do {
            // One read transaction: every check sees the same snapshot. Ended by a rollback, as
            // it wrote nothing, which also succeeds on a damaged file (a COMMIT there can fail).
            try store.withReadConnection { db in
                try db.execute(sql: "BEGIN DEFERRED TRANSACTION")
                defer { try? db.execute(sql: "ROLLBACK TRANSACTION") }
                try run.perform(in: db, integrityCheck: integrityCheck, progress: progress)
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw LoomError(.storeFailure, "The store at \(path) could not be read to the end of its checks.", path: path, underlying: error)
        }
        return VerificationReport(
            store: path, storeIdentifier: identifier.uuidString, objectCount: run.objectCount, checkCount: run.checkCount,
            findings: run.findings, isTruncated: run.isTruncated)
    }
}

/// How far ``StoreVerifier/verify(progress:)`` is: the check about to run.
package struct VerificationProgress: Sendable {
    /// How many checks have finished.
    package var completed: Int
    /// How many checks there are.
    package var total: Int
    /// What the next check looks at, e.g. `Novel.author` or `integrity_check`.
    package var step: String
}

/// What ``StoreVerifier`` found in a store.
///
/// Its JSON (``StoreVerifier``'s `--json` output in the `loom` tool) is:
/// ```json
/// {
///   "store": "/path/Library.loom",
///   "storeIdentifier": "7C0E…",
///   "healthy": false,
///   "objectCount": 1200,
///   "checkCount": 31,
///   "isTruncated": false,
///   "findings": [
///     { "kind": "danglingForeignKey", "entity": "Novel", "property": "author",
///       "object": "loom://7C0E…/Novel/12", "message": "Novel.author points at Author 99, which does not exist." }
///   ]
/// }
/// ```
/// `entity`, `property` and `object` are left out when a finding has none (a missing table has
/// no object; SQLite's integrity check names pages, not objects).
package struct VerificationReport: Codable, Sendable {
    /// The store file's path.
    package var store: String
    /// The store's UUID, the host of its objects' URIs.
    package var storeIdentifier: String
    /// Whether nothing was found.
    package var healthy: Bool
    /// How many objects the store holds, over every entity whose table exists.
    package var objectCount: Int
    /// How many checks ran.
    package var checkCount: Int
    /// Whether some check found more than ``StoreVerifier/findingLimitPerCheck`` problems and
    /// the rest were left out.
    package var isTruncated: Bool
    /// Every problem found, in the order the checks ran.
    package var findings: [VerificationFinding]

    package init(store: String, storeIdentifier: String, objectCount: Int, checkCount: Int, findings: [VerificationFinding], isTruncated: Bool) {
        self.store = store
        self.storeIdentifier = storeIdentifier
        self.healthy = findings.isEmpty
        self.objectCount = objectCount
        self.checkCount = checkCount
        self.isTruncated = isTruncated
        self.findings = findings
    }
}

/// One problem in a store: what kind, where, and a sentence that says it.
package struct VerificationFinding: Codable, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of damage ``StoreVerifier`` recognises.
    package enum Kind: String, Codable, Sendable, CaseIterable {
        /// `PRAGMA integrity_check` (or `quick_check`) reported a problem, or a page could not be read.
        case sqliteIntegrity
        /// `PRAGMA foreign_key_check` reported a row.
        case sqliteForeignKey
        /// A server store's check of its storage found a problem: a table the schema needs is
        /// missing, or a constraint or index is not valid.
        case storeIntegrity
        /// The version hash saved in `loom_metadata` is not the saved schema's.
        case schemaHashMismatch
        /// A table the saved schema needs (an entity's, a join table, `loom_keys`) is missing.
        case missingTable
        /// A column the saved schema needs is missing.
        case missingColumn
        /// A column has another type than the saved schema gives it.
        case columnTypeMismatch
        /// A column is `NOT NULL` where the schema allows nil, or the other way round.
        case columnNullabilityMismatch
        /// A column the schema does not know is `NOT NULL` without a default: every insert fails.
        case extraRequiredColumn
        /// A uniqueness constraint has no unique index, so the store no longer enforces it.
        case missingUniqueIndex
        /// An object's version (`Z_OPT`) is below 1.
        case invalidVersion
        /// An object's key is below 1 or not below the key allocator's high-water mark, so a
        /// later insert may be given the same key.
        case keyOutOfRange
        /// A to-one relationship's foreign key points at a row that does not exist.
        case danglingForeignKey
        /// The two sides of a one-to-one relationship do not point at each other.
        case inverseMismatch
        /// A many-to-many join row names an object that does not exist.
        case danglingJoinRow
        /// An ordered relationship's saved order is not a list of whole keys.
        case malformedOrder
        /// An ordered relationship's saved order lists an object twice.
        case duplicateInOrder
        /// Several objects have the same values for a uniqueness constraint.
        case uniquenessViolation
        /// A required attribute is NULL.
        case missingRequiredValue
        /// An attribute's stored value is of a storage class its type cannot hold (text in an
        /// integer or date column, a number in a string column, text in a binary column).
        case wrongValueType
        /// An integer outside its attribute's width (`Int16`, `Int32`), a `Bool` other than 0 and
        /// 1, or a real beyond `Float`'s range.
        case valueOutOfRange
        /// A value of the right storage class that does not read back as its type: a UUID that is
        /// not 16 bytes, text that is not valid UTF-8, a URL or decimal that does not parse, a
        /// `Codable` value that is not JSON.
        case malformedValue
        /// A history transaction that `loom history` and `fetchHistory` cannot read: its packed
        /// changes are damaged, a column has the wrong type, or it names an entity or property the
        /// schema does not have.
        case malformedHistory
    }

    /// What is wrong.
    package var kind: Kind
    /// The entity (or, for a join table, the relationship's entity) concerned.
    package var entity: String?
    /// The attribute, relationship, constraint (`title,author`) or column concerned.
    package var property: String?
    /// The URI of the object concerned (`loom://<store>/<Entity>/<key>`).
    package var object: String?
    /// A sentence that says what is wrong; it never holds attribute values.
    package var message: String

    package init(kind: Kind, entity: String? = nil, property: String? = nil, object: String? = nil, message: String) {
        self.kind = kind
        self.entity = entity
        self.property = property
        self.object = object
        self.message = message
    }

    /// `kind object: message`, as the `loom verify` text output prints it.
    package var description: String {
        "\(kind.rawValue)\(object.map { " " + $0 } ?? ""): \(message)"
    }
}
