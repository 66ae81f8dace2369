import ArgumentParser

/// The `loom` command-line tool.
@main
struct LoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loom",
        abstract: "Core Data's object graph and persistence for Swift on Linux.",
        subcommands: [DemoCommand.self, InspectCommand.self, HistoryCommand.self, QueryCommand.self, DumpCommand.self, LoadCommand.self, VerifyCommand.self])
}
