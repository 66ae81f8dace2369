import Foundation
import Testing

/// Proves Swift 6 rejects moving contexts and managed objects across isolation domains: every
/// snippet in Tests/CompileFail is compiled against the built Loom module and must fail with the
/// diagnostic its first line names (`// expect: …`), except the control, which must compile.
///
/// Snippets are compiled to SIL (`-emit-sil`), not just type-checked: region-based isolation
/// (`sending`) is diagnosed on SIL, so `-typecheck` would let the very races we look for pass.
@Suite("Compile-time confinement", .ownThreads)
struct CompileFailTests {
    /// `Tests/CompileFail`, found from this file's path wherever it sits under `Tests/`.
    static let folder: URL = {
        var url = URL(filePath: #filePath).deletingLastPathComponent()
        while url.lastPathComponent != "Tests" && url.pathComponents.count > 1 { url.deleteLastPathComponent() }
        return url.appending(path: "CompileFail")
    }()

    static var snippets: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
            .filter { $0.hasSuffix(".swift") && $0 != "Prelude.swift" }
            .sorted()
    }

    @Test("Snippet compiles or fails as it says", arguments: snippets)
    func snippet(_ name: String) async throws {
        let source = try String(contentsOf: Self.folder.appending(path: name), encoding: .utf8)
        let prelude = try String(contentsOf: Self.folder.appending(path: "Prelude.swift"), encoding: .utf8)
        let expectation = try #require(source.split(separator: "\n").first.flatMap { line -> String? in
            line.hasPrefix("// expect: ") ? String(line.dropFirst("// expect: ".count)) : nil
        }, "\(name) must start with `// expect: …`")

        let file = FileManager.default.temporaryDirectory.appending(path: "loom-compile-fail-\(UUID().uuidString)-\(name)")
        try (prelude + "\n" + source).write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }

        // The test bundle sits in the build folder next to `Modules/`, two levels below the
        // scratch path that holds the package checkouts.
        let binaries = URL(filePath: CommandLine.arguments[0]).deletingLastPathComponent()
        let modules = binaries.appending(path: "Modules")
        let moduleMap = binaries.deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "checkouts/GRDB.swift/Sources/GRDBSQLite/module.modulemap")
        #expect(FileManager.default.fileExists(atPath: modules.appending(path: "Loom.swiftmodule").path), "built Loom module not found in \(modules.path)")

        let (status, output) = try Self.swiftc(["-emit-sil", "-o", "/dev/null", "-swift-version", "6",
                                                      "-I", modules.path, "-Xcc", "-fmodule-map-file=\(moduleMap.path)", file.path])

        if expectation == "compiles" {
            #expect(status == 0, "the control snippet must compile:\n\(output)")
        } else {
            #expect(status != 0, "\(name) compiled, but Swift 6 must reject it")
            #expect(output.contains(expectation), "\(name) failed, but not with “\(expectation)”:\n\(output)")
            // Only the intended error: nothing else in the snippet is wrong.
            let errorLines = output.split(separator: "\n").filter { $0.contains(": error: ") }
            #expect(errorLines.allSatisfy { $0.contains(expectation) }, "unexpected errors:\n\(errorLines.joined(separator: "\n"))")
        }
    }

    /// Runs swiftc and waits for it, blocking its thread: the suite runs on threads of its own
    /// (`.ownThreads`), so the wait stalls no other test. `ChildProcess`, not Foundation's
    /// `Process` (see there why).
    static func swiftc(_ arguments: [String]) throws -> (status: Int32, errors: String) {
        let output = try ChildProcess.run("/usr/bin/env", ["swiftc"] + arguments, environment: ProcessInfo.processInfo.environment)
        return (output.status, String(decoding: output.standardError, as: UTF8.self))
    }
}
