import Foundation
import Loom
import PostgresNIO
import Synchronization

/// W14: how long after another process commits this process shows the change, and what an idle
/// watcher costs.
///
/// A child process (this executable, started with `LOOM_BENCH_REMOTE_WRITER` set) commits
/// `commits` changes of one object's score, 5 ms apart, each score the writer's
/// `CLOCK_MONOTONIC` reading just before the commit (the clock is the machine's, shared by both
/// processes). "commit → shown" runs from that reading to the moment this process has the new
/// value on the main actor. Loom: the writer saves through a background context of its own
/// container; here the view context holds the object loaded, and its `objectsDidChange` (posted
/// when the remote change is merged) reads the score. Raw SQLite, by hand: the writer runs an
/// UPDATE; here a thread polls `PRAGMA data_version` every millisecond and, when it moves,
/// reads the row by key and hands it to the main actor. Idle: the process CPU time spent over
/// one second with the container open and nothing committed, as a share of one core.
///
/// PG-W14 is the same on PostgreSQL (`--postgres`), the issue's "several app servers": Loom's
/// writer saves through its own container on the same schema, and this process learns of it from
/// the history (woken by `NOTIFY`); raw postgres-nio, by hand, polls the row every millisecond.
final class RemoteChangeLatency: Workload {
    /// `nil`: W14 on SQLite files; a URL: PG-W14 on that server.
    let postgresURL: String?
    let onPostgreSQL: Bool
    var id: String { onPostgreSQL ? "PG-W14" : "W14" }
    var title = "Remote-change latency from another process's commit to the main actor"
    let contenders: [Contender] = [.raw, .loom]
    var metrics: [Metric] {
        [
            Metric(key: "p50", label: "commit → shown p50"),
            Metric(key: "p99", label: "commit → shown p99", target: .median(onPostgreSQL ? 50e-3 : 20e-3)),
            Metric(key: "idle", label: "idle CPU time per second"),
            // The history issue's target is SQLite's; on PostgreSQL the figure is reported.
            Metric(key: "history", label: "fetchHistory 1,000×10", target: onPostgreSQL ? nil : .median(10e-3)),
        ]
    }
    var memoryNote: String { "peak heap growth while the other process commits" }
    let commits = 100
    private var bench: Bench!

    init(postgresURL: String? = nil, onPostgreSQL: Bool = false) {
        self.postgresURL = postgresURL
        self.onPostgreSQL = onPostgreSQL
        if onPostgreSQL { title = "W14 on PostgreSQL: remote-change latency from another process's commit to the main actor" }
    }

    var unavailableReason: String? {
        onPostgreSQL ? PostgreSQLWorkloadBase.unavailableReason(postgresURL) : nil
    }

    func label(for contender: Contender) -> String {
        guard onPostgreSQL else { return contender.label }
        return PostgreSQLWorkloadBase.label(for: contender)
    }

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        if onPostgreSQL {
            for contender in contenders { _ = try bench.populatedPostgresSchema(for: contender) }
        } else {
            try bench.prepareTemplates()
        }
        title = "\(onPostgreSQL ? "W14 on PostgreSQL: remote" : "Remote")-change latency: \(commits) commits by another process, each shown on the main actor; idle watcher cost; fetchHistory of 1,000 transactions × 10 changes"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        // A file copied for the round, or the populated PostgreSQL schema (item 1's score changes).
        let location = onPostgreSQL
            ? try bench.populatedPostgresSchema(for: contender)
            : try bench.populatedCopy(for: contender == .loom ? .loom : .raw, tag: "W14-\(contender.rawValue)")
        defer { if !onPostgreSQL { bench.remove(location) } }
        let job = WriterJob(contender: contender, postgresURL: onPostgreSQL ? postgresURL : nil, location: location, count: commits)
        var latencies: [Double] = []
        var idle = 0.0, history = 0.0
        switch contender {
        case .raw where onPostgreSQL:
            let url = postgresURL!
            latencies = try await rawRound(job, round) {
                // No change counter to watch: the row itself, every millisecond.
                let connection = try RawPostgres(url: url, schemaName: location)
                return { try connection.scalar("SELECT score FROM item WHERE id = 1", Double.self) }
            }
        case .raw:
            latencies = try await rawRound(job, round) {
                let db = try RawDatabase(path: location)
                let version = try db.prepare("PRAGMA data_version")
                let byID = try db.prepare(ItemSQL.selectByID)
                func dataVersion() throws -> Int64 {
                    defer { version.reset() }
                    _ = try version.step()
                    return version.int64(0)
                }
                var seen = try dataVersion()
                return {
                    let now = try dataVersion()
                    guard now != seen else { return nil }
                    seen = now
                    byID.bind(Int64(1), at: 1)
                    defer { byID.reset() }
                    guard try byID.step() else { return nil }
                    return byID.item().score
                }
            }
        case .loom:
            let container = try job.loomContainer()
            history = try await fetchHistory(container)
            let view = container.viewContext
            guard let item = try view.fetch(WriterJob.changedItem).first else { throw BenchError("W14: no item") }
            let shown = ShownScores()
            var last = item.score
            let token = view.addObserver(for: .objectsDidChange) { _ in
                if item.score != last {
                    last = item.score
                    shown.record(item.score)
                }
            }
            idle = try await idleCPU()
            round.meter?.begin()
            try await runWriter(job)
            latencies = await shown.latencies(count: commits)
            round.meter?.end()
            view.removeObserver(token)
            try await container.close()
        default:
            return [:]
        }
        let sorted = latencies.sorted()
        var figures = ["p50": Statistics.percentile(sorted: sorted, 0.5), "p99": Statistics.percentile(sorted: sorted, 0.99)]
        if contender == .loom {
            figures["idle"] = idle
            figures["history"] = history
        }
        return figures
    }

    /// The raw contenders' round: a thread opens a reader with `openReader` and calls it every
    /// millisecond (it returns item 1's score, or `nil` when it knows nothing changed), handing
    /// each new score to the main actor, while the writer process commits.
    private func rawRound(_ job: WriterJob, _ round: Round,
                          openReader: @escaping @Sendable () throws -> () throws -> Double?) async throws -> [Double] {
        let shown = ShownScores()
        let id = self.id
        let poller = Thread {
            do {
                let read = try openReader()
                var last = try read() ?? -1
                while !shown.isFinished {
                    usleep(1_000)
                    if let score = try read(), score != last {
                        last = score
                        DispatchQueue.main.async { MainActor.assumeIsolated { shown.record(score) } }
                    }
                }
            } catch {
                FileHandle.standardError.write(Data("[loom-bench] \(id) raw poller failed: \(error)\n".utf8))
            }
        }
        poller.start()
        round.meter?.begin()
        try await runWriter(job)
        let latencies = await shown.latencies(count: commits)
        round.meter?.end()
        shown.finish()
        return latencies
    }

    /// Saves 1,000 transactions that each change 10 objects, then times reading them back
    /// with `fetchHistory` after the token from before them.
    private func fetchHistory(_ container: PersistentContainer) async throws -> Double {
        try await container.performBackgroundTask { context in
            let start = try context.currentHistoryToken()
            // Not item 1, which the writer changes.
            let items = try context.fetch(FetchRequest<Item>(sortBy: [SortDescriptor(\.serial)], fetchLimit: 10, fetchOffset: 10))
            for i in 0..<1_000 {
                for item in items { item.score = Double(i) }
                try context.save()
            }
            let begin = monotonicNanoseconds()
            let transactions = try context.fetchHistory(HistoryDescriptor(after: start))
            let end = monotonicNanoseconds()
            guard transactions.count == 1_000, transactions.allSatisfy({ $0.changes.count == 10 }) else {
                throw BenchError("W14: fetchHistory returned \(transactions.count) transactions")
            }
            blackHole(transactions)
            return Double(end - begin) / 1e9
        }
    }

    /// The CPU time this process spends over one second of doing nothing, as a share of a core.
    private func idleCPU() async throws -> Double {
        func cpu() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_SELF.rawValue, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        let before = cpu()
        try await Task.sleep(for: .seconds(1))
        return cpu() - before
    }

    /// Runs the writer process to its end.
    private func runWriter(_ job: WriterJob) async throws {
        let process = Process()
        process.executableURL = URL(filePath: CommandLine.arguments[0])
        process.environment = ProcessInfo.processInfo.environment.merging(job.environment) { $1 }
        try process.run()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                process.waitUntilExit()
                done.resume()
            }
        }
        guard process.terminationStatus == 0 else { throw BenchError("the W14 writer process failed (status \(process.terminationStatus))") }
    }

    /// The writer process's work: `count` commits of item 1's score, 5 ms apart. Called from
    /// `main` when `LOOM_BENCH_REMOTE_WRITER` is set; exits.
    nonisolated static func writerMain() -> Never {
        guard let job = WriterJob(environment: ProcessInfo.processInfo.environment) else { exit(2) }
        let count = job.count
        do {
            switch job.contender {
            case .raw where job.postgresURL != nil:
                let connection = try RawPostgres(url: job.postgresURL!, schemaName: job.location)
                for _ in 0..<count {
                    usleep(5_000)
                    var binds = PostgresBindings()
                    binds.append(Double(monotonicNanoseconds()))
                    try connection.query("UPDATE item SET score = $1 WHERE id = 1", binds)
                }
                connection.close()
            case .raw:
                let writer = try RawWriter(path: job.location)
                for _ in 0..<count {
                    usleep(5_000)
                    try writer.save([1], score: Double(monotonicNanoseconds()))
                }
            default:
                let container = try job.loomContainer()
                let context = container.newBackgroundContext()
                try context.performAndWait { context in
                    let item = try context.fetch(WriterJob.changedItem).first!
                    for _ in 0..<count {
                        usleep(5_000)
                        item.score = Double(monotonicNanoseconds())
                        try context.save()
                    }
                }
                try container.closeAndWait()
            }
        } catch {
            FileHandle.standardError.write(Data("[loom-bench] W14 writer failed: \(error)\n".utf8))
            exit(1)
        }
        exit(0)
    }
}

/// What the writer process does, handed to it in its environment.
struct WriterJob: Sendable {
    var contender: Contender
    /// Set for PG-W14: `location` is then a PostgreSQL schema, else a file.
    var postgresURL: String?
    var location: String
    var count: Int

    /// Item 1 (the smallest serial), which the writer changes: sorted, so that both processes
    /// find the same one on PostgreSQL too, whose heap order changes with updates.
    static var changedItem: FetchRequest<Item> { FetchRequest<Item>(sortBy: [SortDescriptor(\.serial)], fetchLimit: 1) }

    init(contender: Contender, postgresURL: String?, location: String, count: Int) {
        (self.contender, self.postgresURL, self.location, self.count) = (contender, postgresURL, location, count)
    }

    init?(environment: [String: String]) {
        guard let job = environment["LOOM_BENCH_REMOTE_WRITER"] else { return nil }
        let parts = job.split(separator: "|", maxSplits: 2).map(String.init)
        guard parts.count == 3, let contender = Contender(rawValue: parts[0]), let count = Int(parts[1]) else { return nil }
        self.init(contender: contender, postgresURL: environment["LOOM_BENCH_REMOTE_POSTGRES"], location: parts[2], count: count)
    }

    var environment: [String: String] {
        var variables = ["LOOM_BENCH_REMOTE_WRITER": "\(contender.rawValue)|\(count)|\(location)"]
        if let postgresURL { variables["LOOM_BENCH_REMOTE_POSTGRES"] = postgresURL }
        return variables
    }

    func loomContainer() throws -> PersistentContainer {
        if let postgresURL { return try PersistentContainer.bench(postgres: postgresURL, schemaName: location) }
        return try PersistentContainer.bench(at: location)
    }
}

/// The scores the main actor has shown, each with how long after its commit it was shown.
@MainActor
final class ShownScores: Sendable {
    private var shown: [Double] = []
    private var waiter: (count: Int, continuation: CheckedContinuation<[Double], Never>)?
    private let finished = Mutex(false)

    nonisolated var isFinished: Bool { finished.withLock { $0 } }
    nonisolated func finish() { finished.withLock { $0 = true } }

    func record(_ score: Double) {
        shown.append(Double(Int64(monotonicNanoseconds()) - Int64(score)) / 1e9)
        if let waiter, shown.count >= waiter.count {
            self.waiter = nil
            waiter.continuation.resume(returning: shown)
        }
    }

    /// The latencies once `count` commits were shown (or those shown within 5 s after the
    /// writer ended, if fewer: a commit seen together with the next counts once).
    func latencies(count: Int) async -> [Double] {
        if shown.count >= count { return shown }
        let timeout = Task { @MainActor in
            try? await Task.sleep(for: .seconds(5))
            if let waiter = self.waiter {
                self.waiter = nil
                waiter.continuation.resume(returning: self.shown)
            }
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { waiter = (count, $0) }
    }
}
