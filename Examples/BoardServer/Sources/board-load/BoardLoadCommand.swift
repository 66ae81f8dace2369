import ArgumentParser
import BoardLoad
import Foundation

/// `board-load`: a bounded mixed workload on the board API, and a table of runs' reports.
@main
struct BoardLoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "board-load",
        abstract: "Drives board servers with a bounded mixed read/write workload and checks what it wrote.",
        subcommands: [Run.self, Table.self],
        defaultSubcommand: Run.self)
}

extension BoardLoadCommand {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Runs the workload against one or more servers, then checks every acknowledged write.",
            discussion: """
                Operations: 35% list a board's cards, 35% get a card, 10% create a card, 10% update \
                a card with If-Match, 10% increment one shared counter card (GET, then PATCH with \
                If-Match, again on 412). Each request goes to the next server in turn. Exits 1 when \
                an invariant fails (a lost update or a missing acknowledged write), and 2 when a \
                request failed (unless --allow-errors).
                """)

        @Option(name: .customLong("server"), help: "A server's base URL (http://127.0.0.1:8080); repeat for several.")
        var servers: [String]

        @Option(help: "How many seconds to run (the default: 10, unless --operations is given).")
        var duration: Double?

        @Option(help: "How many operations to make, instead of a duration.")
        var operations: Int?

        @Option(help: "How many operations are under way at once.")
        var concurrency = 16

        @Option(help: "How many boards to make first.")
        var boards = 32

        @Option(help: "How many cards each board gets first.")
        var cardsPerBoard = 8

        @Option(help: "The seed of the workers' random choices.")
        var seed: UInt64 = 42

        @Option(help: "What the report calls this configuration.")
        var label = "board servers"

        @Option(help: "A file to write the report to, as JSON (for board-load table).")
        var json: String?

        @Flag(help: "Do not fail because requests failed (a run with faults injected); invariants still count.")
        var allowErrors = false

        @Option(name: .customLong("check-server"), help: "A server to check through after the run (repeat; default: every --server). A run that kills a server checks through the others.")
        var checkServers: [String] = []

        func validate() throws {
            if duration != nil && operations != nil { throw ValidationError("Give --duration or --operations, not both.") }
        }

        func run() async throws {
            let bound: LoadPlan.Bound = operations.map { .operations($0) } ?? .duration(.milliseconds(Int((duration ?? 10) * 1000)))
            var plan = LoadPlan(servers: servers, bound: bound)
            plan.concurrency = concurrency
            plan.boards = boards
            plan.cardsPerBoard = cardsPerBoard
            plan.seed = seed
            if !checkServers.isEmpty { plan.checkServers = checkServers }
            do {
                try plan.validate()
            } catch {
                throw ValidationError(error.description)
            }
            let result = try await LoadGenerator.run(plan, label: label)
            print(result.report.text)
            if let json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                try encoder.encode(result.report).write(to: URL(filePath: json))
            }
            if !result.report.invariantsHold { throw ExitCode(1) }
            if result.report.errorCount > 0 && !allowErrors { throw ExitCode(2) }
        }
    }

    struct Table: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Prints reports written with --json as a Markdown table.")

        @Argument(help: "The reports' JSON files, in the table's order.")
        var files: [String]

        func run() throws {
            let reports = try files.map { file in
                do {
                    return try JSONDecoder().decode(LoadReport.self, from: Data(contentsOf: URL(filePath: file)))
                } catch {
                    throw ValidationError("\(file) is not a report of board-load --json: \(error)")
                }
            }
            print(LoadReport.table(reports))
        }
    }
}
