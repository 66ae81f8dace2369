import Foundation
import Testing

/// The built `loom` tool, run as a child process: the command-line tests drive the real
/// executable on real stores, as a user would.
///
/// `swift build --build-tests` builds it beside the test bundle (`.build/debug/loom`).
enum LoomExecutable {
    /// What one run printed and how it ended.
    struct Output: Sendable {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// The executable beside the running test bundle.
    static var url: URL {
        URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "loom")
    }

    /// Runs `loom arguments…`, feeding `input` to its standard input, and waits for it to end.
    static func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) throws -> Output {
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let stdout = Pipe(), stderr = Pipe(), stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        // Read both pipes while the child runs, so that a large output cannot fill a pipe and
        // block it.
        let group = DispatchGroup()
        nonisolated(unsafe) var out = Data(), err = Data()
        DispatchQueue.global().async(group: group) { out = stdout.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: group) { err = stderr.fileHandleForReading.readDataToEndOfFile() }
        if let input { stdin.fileHandleForWriting.write(input) }
        try stdin.fileHandleForWriting.close()
        process.waitUntilExit()
        group.wait()
        return Output(status: process.terminationStatus,
                      standardOutput: String(decoding: out, as: UTF8.self),
                      standardError: String(decoding: err, as: UTF8.self))
    }
}

@Suite struct LoomExecutableTests {
    @Test func helpListsTheVerbs() throws {
        let output = try LoomExecutable.run(["--help"])
        #expect(output.status == 0)
        #expect(output.standardOutput.contains("inspect"))
    }
}
