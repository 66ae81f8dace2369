import Foundation
import Testing

/// A `board-server` (or `board-server-raw`) process on a loopback port of its own, started for
/// one test and stopped by it.
///
/// Its output goes to a log file, attached to the test's failure when it does not start or stop
/// cleanly.
final class ServerProcess {
    let process = Process()
    let folder: URL
    let port: Int
    let client: HTTPClient
    /// Set by ``killAbruptly()``: the server is gone on purpose, and `stop()` expects nothing of it.
    private(set) var killed = false

    /// The executable `name` built beside the tests; for `board-server`, `BOARD_SERVER_BINARY`
    /// when it is set.
    static func binary(_ name: String = "board-server") -> URL {
        if name == "board-server", let path = ProcessInfo.processInfo.environment["BOARD_SERVER_BINARY"] { return URL(filePath: path) }
        var folder = URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent()
        if folder.path.contains(".xctest/") {   // macOS: the tests are a bundle in the build folder
            while !folder.lastPathComponent.hasSuffix(".xctest") { folder.deleteLastPathComponent() }
            folder.deleteLastPathComponent()
        }
        return folder.appending(path: name)
    }

    /// Starts the server `executable` with `arguments` (besides its port) and waits until it
    /// accepts connections.
    init(_ arguments: [String], environment: [String: String] = [:], executable: String = "board-server") async throws {
        folder = FileManager.default.temporaryDirectory.appending(path: "board-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let portFile = folder.appending(path: "port")
        let log = folder.appending(path: "server.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        process.executableURL = Self.binary(executable)
        process.arguments = ["--port", "0", "--port-file", portFile.path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = output
        try process.run()
        port = try await Self.port(from: portFile, of: process, log: log)
        client = HTTPClient(port: port)
    }

    /// The port the server wrote to `file` once it accepted connections; throws with its log if
    /// it exits first, or has not started within two minutes (a cold machine, the database
    /// migrating).
    private static func port(from file: URL, of process: Process, log: URL) async throws -> Int {
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            if let text = try? String(contentsOf: file, encoding: .utf8), let port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return port
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                if process.isRunning { process.terminate() }
                throw ServerFailure("board-server did not start: \(read(log))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Kills the server with SIGKILL (no cleanup: its connections drop as the process ends) and
    /// waits until it is gone.
    func killAbruptly() async throws {
        killed = true
        kill(process.processIdentifier, SIGKILL)
        let deadline = ContinuousClock.now + .seconds(10)
        while process.isRunning {
            guard ContinuousClock.now < deadline else { throw ServerFailure("board-server outlived SIGKILL by 10 seconds") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// What the server printed so far.
    var log: String { Self.read(folder.appending(path: "server.log")) }

    /// Stops the server with SIGTERM, as a service manager would, and expects a clean exit (the
    /// store closed); SIGKILL after 30 seconds.
    func stop() async throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        if killed { return }
        guard process.isRunning else {
            throw ServerFailure("board-server had stopped by itself (status \(process.terminationStatus)): \(log)")
        }
        process.terminate()
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning {
            if ContinuousClock.now > deadline {
                kill(process.processIdentifier, SIGKILL)
                throw ServerFailure("board-server did not stop within 30 seconds of SIGTERM: \(log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        guard process.terminationStatus == 0 else {
            throw ServerFailure("board-server exited with status \(process.terminationStatus): \(log)")
        }
    }

    private static func read(_ file: URL) -> String {
        (try? String(contentsOf: file, encoding: .utf8)) ?? "(no log)"
    }
}

extension ServerProcess {
    /// Starts a server (`executable`) for each of `servers` (its arguments, its environment),
    /// runs `body` with them, and stops them, whether `body` threw or not: a server left running
    /// would outlive the test run.
    static func with(
        _ servers: [(arguments: [String], environment: [String: String])], executable: String = "board-server",
        _ body: ([ServerProcess]) async throws -> Void
    ) async throws {
        var started: [ServerProcess] = []
        do {
            for server in servers {
                started.append(try await ServerProcess(server.arguments, environment: server.environment, executable: executable))
            }
            try await body(started)
        } catch {
            for server in started { try? await server.stop() }
            throw error
        }
        for server in started { try await server.stop() }
    }
}

/// A server that did not start or stop as it should, with its log.
struct ServerFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
