import Foundation
import Loom
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
final class RemoteChangeLatency: Workload {
    let id = "W14"
    var title = "Remote-change latency from another process's commit to the main actor"
    let contenders: [Contender] = [.raw, .loom]
    let metrics = [
        Metric(key: "p50", label: "commit → shown p50"),
        Metric(key: "p99", label: "commit → shown p99", target: .median(20e-3)),
        Metric(key: "idle", label: "idle CPU time per second"),
        Metric(key: "history", label: "fetchHistory 1,000×10", target: .median(10e-3)),
    ]
    var memoryNote: String { "peak heap growth while the other process commits" }
    let commits = 100
    private var bench: Bench!

    func prepare(_ bench: Bench) throws {
        self.bench = bench
        try bench.prepareTemplates()
        title = "Remote-change latency: \(commits) commits by another process, each shown on the main actor; idle watcher cost; fetchHistory of 1,000 transactions × 10 changes"
    }

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] {
        let path = try bench.populatedCopy(for: contender == .loom ? .loom : .raw, tag: "W14-\(contender.rawValue)")
        defer { bench.remove(path) }
        var latencies: [Double] = []
        var idle = 0.0, history = 0.0
        switch contender {
        case .raw:
            let shown = ShownScores()
            let poller = Thread {
                do {
                    let db = try RawDatabase(path: path)
                    let version = try db.prepare("PRAGMA data_version")
                    let byID = try db.prepare(ItemSQL.selectByID)
                    var last = -1.0
                    func dataVersion() throws -> Int64 {
                        defer { version.reset() }
                        _ = try version.step()
                        return version.int64(0)
                    }
                    var seen = try dataVersion()
                    while !shown.isFinished {
                        usleep(1_000)
                        let now = try dataVersion()
                        guard now != seen else { continue }
                        seen = now
                        byID.bind(Int64(1), at: 1)
                        guard try byID.step() else { continue }
                        let score = byID.item().score
                        byID.reset()
                        if score != last {
                            last = score
                            DispatchQueue.main.async { MainActor.assumeIsolated { shown.record(score) } }
                        }
                    }
                } catch {
                    FileHandle.standardError.write(Data("[loom-bench] W14 raw poller failed: \(error)\n".utf8))
                }
            }
            poller.start()
            round.meter?.begin()
            try await runWriter(contender, path: path)
            latencies = await shown.latencies(count: commits)
            round.meter?.end()
            shown.finish()
        case .loom:
            let container = try PersistentContainer.bench(at: path)
            history = try await fetchHistory(container)
            let view = container.viewContext
            guard let item = try view.fetch(FetchRequest<Item>(fetchLimit: 1)).first else { throw BenchError("W14: no item") }
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
            try await runWriter(contender, path: path)
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

    /// Saves 1,000 transactions that each change 10 objects, then times reading them back
    /// with `fetchHistory` after the token from before them.
    private func fetchHistory(_ container: PersistentContainer) async throws -> Double {
        try await container.performBackgroundTask { context in
            let start = try context.currentHistoryToken()
            let items = try context.fetch(FetchRequest<Item>(fetchLimit: 10, fetchOffset: 10))   // not item 1, which the writer changes
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
    private func runWriter(_ contender: Contender, path: String) async throws {
        let process = Process()
        process.executableURL = URL(filePath: CommandLine.arguments[0])
        process.environment = ProcessInfo.processInfo.environment.merging(["LOOM_BENCH_REMOTE_WRITER": "\(contender.rawValue)|\(path)|\(commits)"]) { $1 }
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
    nonisolated static func writerMain(_ job: String) -> Never {
        let parts = job.split(separator: "|").map(String.init)
        guard parts.count == 3, let count = Int(parts[2]) else { exit(2) }
        do {
            switch parts[0] {
            case Contender.raw.rawValue:
                let writer = try RawWriter(path: parts[1])
                for _ in 0..<count {
                    usleep(5_000)
                    try writer.save([1], score: Double(monotonicNanoseconds()))
                }
            default:
                let container = try PersistentContainer.bench(at: parts[1])
                let context = container.newBackgroundContext()
                try context.performAndWait { context in
                    let item = try context.fetch(FetchRequest<Item>(fetchLimit: 1)).first!
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
