import ArgumentParser
import Foundation

/// `loom-bench`: Loom against the raw SQLite C API and GRDB, measured in one process.
@main
struct LoomBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loom-bench",
        abstract: "Measures Loom against the raw SQLite C API and GRDB, in the same process, round by round.",
        discussion: "Run it in release mode: swift run -c release loom-bench")

    @Flag(help: "Fewer objects (10,000), still at least 9 measured rounds; the whole run takes under 3 minutes.")
    var quick = false

    @Option(help: "Write every figure as JSON to this path.")
    var json: String?

    @Option(help: "Write an SVG chart of the run to this path: per workload, Loom's ratio to each contender on a log scale, the targets marked.")
    var svg: String?

    @Option(help: "Run nothing: chart this --json file of an earlier run (to the --svg path).")
    var svgFrom: String?

    @Option(help: "Run only these workloads, e.g. W1,W3.")
    var only: String?

    @Option(help: "Run only these contenders (raw, grdb, grdb-record, loom), e.g. for profiling one of them.")
    var contenders: String?

    @Option(help: "Measured rounds (default 11, --quick 9). Fewer than 9 is for profiling only.")
    var rounds: Int?

    @Option(help: "Warm-up rounds (default 2, --quick 1).")
    var warmup: Int?

    @Option(help: "Objects in the populated stores (default 100,000, --quick 10,000).")
    var objects: Int?

    @Flag(help: "Skip the untimed memory runs.")
    var noMemory = false

    @Option(help: "Folder for the scratch databases (default: a new folder in the system's temporary directory).")
    var directory: String?

    @Option(help: "A PostgreSQL server for the PG- workloads (Loom's PostgreSQL store against raw postgres-nio): postgres://user@host:port/database, or ?host=/socket/folder. Each round works in schemas of its own and drops them.")
    var postgres: String?

    func validate() throws {
        if svgFrom != nil, svg == nil { throw ValidationError("--svg-from needs --svg PATH, where the chart goes.") }
        if let rounds, rounds < 1 { throw ValidationError("--rounds must be at least 1.") }
        if let objects, objects < 1_000 { throw ValidationError("--objects must be at least 1,000.") }
        if let only {
            let known = Set(Catalog.ids)
            for id in Self.list(only) where !known.contains(id.uppercased()) {
                throw ValidationError("Unknown workload '\(id)'; the workloads are \(Catalog.ids.joined(separator: ", ")).")
            }
        }
        if let contenders {
            for name in Self.list(contenders) where Contender(rawValue: name) == nil {
                throw ValidationError("Unknown contender '\(name)'; the contenders are \(Contender.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
        }
    }

    static func list(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Runs the benchmarks on the main actor, whose jobs the main run loop serves.
    ///
    /// Not an `async` main: that parks the main thread in `dispatch_main()`, whose
    /// `sigsuspend` valgrind 3.19 cannot follow, and profiling under callgrind matters here.
    func run() throws {
        if ProcessInfo.processInfo.environment["LOOM_BENCH_REMOTE_WRITER"] != nil { RemoteChangeLatency.writerMain() }
        if let svgFrom, let svg {
            try Chart.write(fromJSON: svgFrom, to: svg)
            print("Chart written to \(svg)")
            return
        }
        let options = RunOptions(
            quick: quick, json: json, only: only.map { Set(Self.list($0).map { $0.uppercased() }) },
            contenders: contenders.map { Set(Self.list($0).compactMap(Contender.init(rawValue:))) }, svg: svg,
            rounds: rounds, warmup: warmup, objects: objects, measuresMemory: !noMemory, directory: directory, postgres: postgres,
            command: CommandLine.arguments.joined(separator: " "))
        Task { @MainActor in
            do {
                try await options.run()
                Foundation.exit(0)
            } catch {
                FileHandle.standardError.write(Data("loom-bench: \(error)\n".utf8))
                Foundation.exit(1)
            }
        }
        while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
    }
}

/// The parsed command line, handed to the main actor.
struct RunOptions: Sendable {
    var quick: Bool
    var json: String?
    var only: Set<String>?
    var contenders: Set<Contender>?
    var svg: String?
    var rounds: Int?
    var warmup: Int?
    var objects: Int?
    var measuresMemory: Bool
    var directory: String?
    var postgres: String?
    var command: String

    @MainActor
    func run() async throws {
        let started = monotonicNanoseconds()
        var sizes = quick ? Sizes.quick : Sizes.standard
        if let objects { sizes.objects = objects }
        let measuredRounds = rounds ?? (quick ? 9 : 11)
        let warmupRounds = warmup ?? (quick ? 1 : 2)
        #if DEBUG
        FileHandle.standardError.write(Data("[loom-bench] warning: a debug build: it proves the workloads run, its figures mean nothing (swift run -c release loom-bench).\n".utf8))
        #endif
        if measuredRounds < 9 {
            FileHandle.standardError.write(Data("[loom-bench] warning: \(measuredRounds) measured rounds (fewer than 9): for profiling, not for reporting.\n".utf8))
        }

        let folder = directory.map { URL(filePath: $0) }
            ?? FileManager.default.temporaryDirectory.appending(path: "loom-bench-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if directory == nil { try? FileManager.default.removeItem(at: folder) } }

        let bench = Bench(sizes: sizes, directory: folder, postgresURL: postgres)
        defer { bench.removeTemplates() }
        var environment = try EnvironmentInfo.collect(bench: bench)
        let runner = Runner(bench: bench, warmupRounds: warmupRounds, measuredRounds: measuredRounds,
                            contenderFilter: contenders, measuresMemory: measuresMemory)
        var results: [WorkloadResult] = []
        var failed: [String] = []
        for workload in Catalog.workloads(postgresURL: postgres) where only?.contains(workload.id) ?? true {
            do {
                results.append(try await runner.run(workload))
            } catch {
                FileHandle.standardError.write(Data("[loom-bench] \(workload.id) failed: \(error)\n".utf8))
                failed.append(workload.id)
                results.append(WorkloadResult(id: workload.id, title: workload.title, available: false, unavailableReason: "FAILED: \(error)"))
            }
        }
        environment.loadAverageAtEnd = EnvironmentInfo.loadAverage()

        let report = RunReport(
            command: command, quick: quick, warmupRounds: warmupRounds, measuredRounds: measuredRounds, sizes: sizes,
            environment: environment, memoryMethod: RunReport.memoryMethodText, statisticsMethod: RunReport.statisticsMethodText,
            workloads: results, durationSeconds: seconds(since: started))
        print(report.text())
        if let json {
            try report.writeJSON(to: json)
            print("JSON written to \(json)")
        }
        if let svg {
            try Chart.write(try ChartInput.decode(try report.jsonData()), to: svg)
            print("Chart written to \(svg)")
        }
        if !failed.isEmpty { throw BenchmarkFailure(workloads: failed) }
    }
}

/// Workloads that threw: the report shows them, and the run exits with a failure.
struct BenchmarkFailure: Error, CustomStringConvertible {
    var workloads: [String]
    var description: String { "\(workloads.joined(separator: ", ")) failed (see above)" }
}

/// Every workload, in report order.
enum Catalog {
    static let ids = [
        "W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8", "W9", "W10", "W11", "W12", "W13", "W14", "W15", "W16", "W17", "W18", "W19",
        "PG-W1", "PG-W2", "PG-W3", "PG-W5", "PG-W9", "PG-W14",
    ]

    /// The PG- workloads are unavailable without `postgresURL`.
    @MainActor
    static func workloads(postgresURL: String?) -> [any Workload] {
        [
            InsertAndSave(), FetchAll(), RangeQueries(), ToManyFaulting(), ChangeAndSave(), MergeLatency(),
            MainActorResponsiveness(), ConcurrentReaders(), SingleObjectSaves(), OpenAndFirstFetch(), ConcurrencyCosts(),
            Migration(), TransformMigration(), RemoteChangeLatency(), LiveQueries(), BatchRequests(), HierarchyFetches(), HierarchyUniqueness(), HierarchyToMany(),
            PostgreSQLInsertAndSave(postgresURL: postgresURL), PostgreSQLFetchAll(postgresURL: postgresURL),
            PostgreSQLRangeQueries(postgresURL: postgresURL), PostgreSQLChangeAndSave(postgresURL: postgresURL),
            PostgreSQLSingleObjectSaves(postgresURL: postgresURL), RemoteChangeLatency(postgresURL: postgresURL, onPostgreSQL: true),
        ]
    }
}
