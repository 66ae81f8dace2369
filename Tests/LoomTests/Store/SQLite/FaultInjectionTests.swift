import Foundation
import GRDB
import Loom
@_spi(LoomStore) import LoomCore
@_spi(LoomStore) import LoomSQLite
import Synchronization
import Testing

/// SQLite's "I/O error" and "disk full" loops on Loom's operations: each operation is run once
/// to count the I/O calls it makes on its store's files, then again once per call, that call
/// failed (``FaultVFS``): once, or (a full disk, a failing disk) with every call after it until
/// the disk is repaired. Every run must end in one of two ways: the operation succeeds and the
/// store holds its whole result, or it throws a `LoomError` carrying SQLite's code and the store
/// holds nothing of it (a migration may have committed whole steps, which the next open
/// resumes). Either way the container stays usable (the operation run again once the disk is
/// repaired succeeds), the file passes `integrity_check` and ends holding the result, and no
/// other context was told of a change that did not commit.
///
/// `./scripts/test` runs a few calls of each operation, spread over its count; `LOOM_FAULT_INJECTION=full`
/// (`scripts/fault-injection`) runs every call.
@MainActor
@Suite("SQLite I/O faults: every call of an operation failed in turn", .serialized, .timeLimit(.minutes(30)))
struct FaultInjectionTests {
    @Test("Each operation either applies wholly or throws the I/O error and applies nothing", arguments: FaultScenario.all)
    func everyCallFailedInTurn(scenario: FaultScenario) async throws {
        FaultVFS.install()
        let start = ContinuousClock.now
        let seed = TemporaryDirectory.make().appending(path: "seed.loom")
        try await scenario.seed(seed)
        defer { try? FileManager.default.removeItem(at: seed.deletingLastPathComponent()) }
        var summary: [String] = []
        for kind in FaultVFS.Kind.allCases {
            // The clean run: how many calls, and what the store holds after it.
            let clean = try await run(scenario, seed: seed, failAt: 0, kind: kind, before: try await contentsBefore(scenario, seed: seed), expected: nil)
            #expect(clean.problems.isEmpty, "\(scenario) clean run: \(clean.problems)")
            #expect(clean.calls > 0, "\(scenario) made no \(kind) calls: the fault VFS does not see its files")
            if scenario.tellsOtherContexts {
                #expect(clean.told > 0, "\(scenario): the observing context was not told of a committed change, so the check that it is not told of a failed one proves nothing")
            }
            var failed = 0, succeeded = 0, violations = 0
            for n in Self.callNumbers(count: clean.calls) {
                let outcome: Outcome
                do {
                    outcome = try await run(scenario, seed: seed, failAt: n, kind: kind, before: clean.before, expected: clean.after)
                } catch {
                    outcome = Outcome(problems: ["the run itself failed: \(error)"])
                }
                if outcome.threw { failed += 1 } else { succeeded += 1 }
                violations += outcome.problems.isEmpty ? 0 : 1
                #expect(outcome.problems.isEmpty, "\(scenario), \(kind) on call \(n) of \(clean.calls): \(outcome.problems.joined(separator: "; "))")
            }
            summary.append("\(kind): \(clean.calls) calls, \(failed + succeeded) runs (\(failed) threw, \(succeeded) succeeded), \(violations) violations")
        }
        print("fault injection \(scenario): \(summary.joined(separator: "; ")) in \(ContinuousClock.now - start)")
    }

    /// Every call number in full mode; else at most `reducedRuns` of them, the first and last
    /// included, evenly spread.
    static func callNumbers(count: Int) -> [Int] {
        guard count > 0 else { return [] }
        if ProcessInfo.processInfo.environment["LOOM_FAULT_INJECTION"] == "full" || count <= reducedRuns { return Array(1...count) }
        return (0..<reducedRuns).map { 1 + $0 * (count - 1) / (reducedRuns - 1) }
    }

    static let reducedRuns = 3

    struct Outcome {
        var calls = 0
        var threw = false
        var told = 0
        var before: [String] = []
        var after: [String] = []
        var problems: [String] = []
    }

    /// What the store holds when the operation begins, read on a copy of its own: reading it
    /// opens and closes a second store on the file, whose close checkpoints the write-ahead log
    /// that the operation would find (and count calls on) otherwise.
    func contentsBefore(_ scenario: FaultScenario, seed: URL) async throws -> [String] {
        let folder = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appending(path: "store.loom")
        try FileManager.default.copyItem(at: seed, to: url)
        let attempt = try await scenario.begin(url)
        let contents = try await scenario.contents(url)
        try await attempt.end()
        return contents
    }

    /// One run on a fresh copy of the seed, failing call `failAt` (0: none); `before` and
    /// `expected` are what the store holds before and after the operation (`expected` is `nil`
    /// in the clean run, which finds it).
    func run(_ scenario: FaultScenario, seed: URL, failAt: Int, kind: FaultVFS.Kind, before: [String], expected: [String]?) async throws -> Outcome {
        let folder = TemporaryDirectory.make()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appending(path: "store.loom")
        try FileManager.default.copyItem(at: seed, to: url)
        FaultVFS.watch(folder)
        defer { FaultVFS.watch(nil) }
        let attempt = try await scenario.begin(url)
        var outcome = Outcome()
        // Every run begins from the same copy with the same changes.
        outcome.before = before
        FaultVFS.arm(failAt: failAt, kind: kind)
        var failure: (any Error)?
        do { try await attempt.operation() } catch { failure = error }
        outcome.calls = FaultVFS.calls
        let injected = FaultVFS.injected, code = FaultVFS.firstCode
        FaultVFS.disarm()
        outcome.told = await attempt.told()
        if let failure {
            outcome.threw = true
            if let error = failure as? LoomError {
                if injected == 0 {
                    outcome.problems.append("threw with no fault injected: \(error)")
                } else if !Self.carriesCause(error, kind: kind, injected: code) {
                    outcome.problems.append("threw a LoomError without SQLite's code (injected \(code)): \(error)")
                }
            } else {
                outcome.problems.append("threw something other than a LoomError: \(String(reflecting: failure))")
            }
            if outcome.told > 0 { outcome.problems.append("another context was told of a change that did not commit") }
            let state = try await scenario.contents(url)
            switch scenario.afterFailure {
            case .unchanged where state != outcome.before:
                outcome.problems.append("the store changed although the operation threw: \(Self.difference(outcome.before, state))")
            case .unchangedOrWhole where state != outcome.before && expected != nil && state != expected:
                outcome.problems.append("the operation threw and left part of its result: \(Self.difference(outcome.before, state))")
            default:
                break
            }
        } else if let expected, try await scenario.contents(url) != expected {
            outcome.problems.append("the operation succeeded but the store does not hold its result")
        }
        if failure != nil || expected == nil {
            do { try await attempt.retry() } catch { outcome.problems.append("the retry once the disk was repaired failed: \(error)") }
        }
        do { try await attempt.end() } catch { outcome.problems.append("closing failed: \(error)") }
        let integrity = try Self.integrityCheck(url)
        if integrity != ["ok"] { outcome.problems.append("integrity_check: \(integrity.prefix(5))") }
        outcome.after = try await scenario.contents(url)
        if let expected, outcome.after != expected {
            outcome.problems.append("after the retry the store does not hold the operation's result: \(Self.difference(expected, outcome.after))")
        }
        return outcome
    }

    /// Whether `error`, or an error it wraps, has SQLite's code for `kind`.
    static func carriesCause(_ error: LoomError, kind: FaultVFS.Kind, injected: Int32) -> Bool {
        if error.storeCode?.primary == kind.primaryCode { return true }
        // SQLite reports a WAL index it could not lock as a locking protocol error.
        if error.storeCode?.primary == 15, injected == 5130 { return true }   // SQLITE_PROTOCOL, SQLITE_IOERR_SHMLOCK
        // SQLite's VACUUM INTO (a transform stage's copy) reports a target whose size it could
        // not read as a target that exists.
        if injected == 1802, let database = error.underlying as? DatabaseError,   // SQLITE_IOERR_FSTAT
           database.message?.contains("output file already exists") == true { return true }
        if let database = error.underlying as? DatabaseError, database.resultCode.primaryResultCode.rawValue == kind.primaryCode { return true }
        if let inner = error.underlying as? LoomError { return carriesCause(inner, kind: kind, injected: injected) }
        return false
    }

    /// The lines only one side has, a few of each.
    static func difference(_ before: [String], _ after: [String]) -> String {
        let gone = before.filter { !after.contains($0) }.prefix(3), new = after.filter { !before.contains($0) }.prefix(3)
        return "gone \(Array(gone)), new \(Array(new))"
    }

    /// `PRAGMA integrity_check`'s lines for the store at `url`.
    static func integrityCheck(_ url: URL) throws -> [String] {
        let queue = try DatabaseQueue(path: url.path)
        defer { try? queue.close() }
        return try queue.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
    }
}

/// One operation under test: how its seed store is made, how a run begins, and how the store's
/// content is compared.
struct FaultScenario: Sendable, CustomTestStringConvertible, CustomStringConvertible {
    let name: String
    /// Makes the store every run copies (once per scenario, outside the watched folder).
    let seed: @Sendable (URL) async throws -> Void
    /// Opens what the operation needs on a run's copy of the seed, before faults are armed.
    let begin: @MainActor @Sendable (URL) async throws -> FaultAttempt
    /// What the store at `url` holds, as the runs compare it.
    let contents: @MainActor @Sendable (URL) async throws -> [String]
    /// What the store may hold after the operation threw.
    var afterFailure = AfterFailure.unchanged
    /// Whether the operation changes objects that another context of the container is told of.
    var tellsOtherContexts = true

    enum AfterFailure: Sendable {
        /// Nothing of the operation: a save, a batch request, a purge.
        case unchanged
        /// Nothing, or the whole result: an open whose migration committed before a later step
        /// of the open failed (the next open finds the store migrated).
        case unchangedOrWhole
        /// Whole committed steps that the next run resumes from: a transform stage's copy and
        /// chunks.
        case committedSteps
    }

    var description: String { name }
    var testDescription: String { name }
}

/// A run's operation, what runs it again once the disk is repaired, and what closes it all.
@MainActor
struct FaultAttempt {
    var operation: @MainActor () async throws -> Void
    var retry: @MainActor () async throws -> Void
    var end: @MainActor () async throws -> Void
    /// How many changes another context of the container was told of since the operation began.
    var told: @MainActor () async -> Int = { 0 }
    /// Drops the operation's pending changes, instead of a retry, when it committed although it
    /// threw (PostgreSQL's `commitOutcomeUnknown`).
    var discard: @MainActor () -> Void = {}
}
