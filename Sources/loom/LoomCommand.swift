import ArgumentParser
import Foundation

/// The `loom` command-line tool.
///
/// Every verb reports a failure the same way: one `Error: …` message on standard error (see
/// ``CommandFailure``) and the exit status of ``exitStatusTable``.
@main
struct LoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loom",
        abstract: "Core Data's object graph and persistence for Swift on Linux.",
        discussion: """
            Every verb reads the schema the store saved, so it needs no application model. \
            Errors go to standard error as `Error: what went wrong`, naming the store, line, \
            field or query column they are about.

            \(exitStatusTable)
            """,
        subcommands: [DemoCommand.self, InspectCommand.self, HistoryCommand.self, QueryCommand.self, DumpCommand.self, LoadCommand.self, VerifyCommand.self])

    /// The exit statuses of every verb, as `loom --help` and the README show them.
    static let exitStatusTable = """
        Exit status (every verb):
          0   done (verify: no problems found)
          1   verify found problems in the store
          2   the verb failed: no store, not a Loom store, a file or server it
              cannot read or write, a query or dump it cannot read, a load
              destination that exists
          64  the command line is wrong: an unknown verb or option, a missing
              or malformed argument
        """

    /// Parses the command line and runs the verb, as swift-argument-parser's `main()` does,
    /// except that a verb's failure is printed by ``CommandFailure`` and exits 2.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            // swift-argument-parser's own: help (0), an ExitCode a verb chose (verify's 1), a
            // usage error (64, with the usage line).
            if error is ExitCode || exitCode(for: error) != .failure { exit(withError: error) }
            FileHandle.standardError.write(Data("Error: \(CommandFailure.message(for: error))\n".utf8))
            exit(withError: ExitCode(CommandFailure.exitStatus))
        }
    }
}
