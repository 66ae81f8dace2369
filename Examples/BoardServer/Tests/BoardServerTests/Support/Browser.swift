import Foundation

/// Headless Chromium (Debian's `chromium`, which `scripts/install-dependencies` installs) showing
/// a page, driven by `browse.py` beside this file over the DevTools protocol.
struct Browser {
    /// What the page showed when it was read last.
    struct Reading: Decodable {
        /// Whether the page's text contained what was expected.
        var found: Bool
        /// The titles of the page's cards, in order.
        var cards: [String]
        /// The stream's state on the page: "connecting", "live" or "reconnecting".
        var status: String?
        /// How many events the page applied, and how many of them were changes.
        var events: Int
        var changes: Int
    }

    /// The browser's executable: `CHROMIUM`, or `chromium` on the path; nil when there is none.
    static var executable: String? {
        if let path = ProcessInfo.processInfo.environment["CHROMIUM"] { return path }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/chromium" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Where the tests keep their screenshots: `.build/test-output` of this package.
    static var outputFolder: URL {
        URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: ".build/test-output")
    }

    private static let script = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "browse.py")

    /// A page opened in the background: it stays open until its text contains `expected` or
    /// `timeout` passes, then is photographed to `screenshot`.
    final class Page {
        private let process = Process()
        private let output: URL

        init(url: String, expecting expected: String, screenshot: URL, timeout: Int = 60) throws {
            output = FileManager.default.temporaryDirectory.appending(path: "browse-\(UUID().uuidString).out")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            process.executableURL = URL(filePath: "/usr/bin/env")
            process.arguments = ["python3", Browser.script.path, url, expected, screenshot.path, "\(timeout)"]
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
        }

        /// Waits for the page to be read and closed; what it showed.
        func reading() async throws -> Reading {
            defer { try? FileManager.default.removeItem(at: output) }
            let deadline = ContinuousClock.now + .seconds(120)
            while process.isRunning {
                if ContinuousClock.now > deadline {
                    process.terminate()
                    throw ServerFailure("browse.py did not finish within two minutes")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            guard process.terminationStatus == 0, let line = text.split(separator: "\n").last else {
                throw ServerFailure("browse.py failed (status \(process.terminationStatus)): \(text)")
            }
            do {
                return try JSONDecoder().decode(Reading.self, from: Data(line.utf8))
            } catch {
                throw ServerFailure("browse.py printed no reading: \(text)")
            }
        }
    }
}
