import Foundation
import Testing
import LoomTools

/// The fuzzer's committed inputs (Fuzz/Corpus and Fuzz/Crashes, see Fuzz/README.md) replayed
/// through the same entry points `loom-fuzz` drives, without libFuzzer: every input that ever
/// crashed a parser stays a regression case, and CI runs them all in seconds.
@Suite("Fuzz corpus replay", .timeLimit(.minutes(2)))
struct FuzzCorpusTests {
    static let fuzzFolder = URL(filePath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "Fuzz")

    /// The committed inputs of one target, by file name.
    static func inputs(of target: FuzzTarget, in kind: String) throws -> [(name: String, bytes: [UInt8])] {
        let folder = fuzzFolder.appending(path: kind).appending(path: target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            .filter { !$0.hasPrefix(".") }
            .map { ($0, try [UInt8](Data(contentsOf: folder.appending(path: $0)))) }
    }

    @Test("Every committed corpus input runs through its target", arguments: FuzzTarget.allCases)
    func corpusReplays(target: FuzzTarget) throws {
        let corpus = try Self.inputs(of: target, in: "Corpus")
        #expect(!corpus.isEmpty, "Fuzz/Corpus/\(target.rawValue) holds no input")
        for input in corpus { target.run(input.bytes) }
    }

    @Test("Every input that ever crashed a target runs through it without a trap", arguments: FuzzTarget.allCases)
    func crashesReplay(target: FuzzTarget) throws {
        for input in try Self.inputs(of: target, in: "Crashes") { target.run(input.bytes) }
    }

    @Test("The committed seeds are the ones the targets make", arguments: FuzzTarget.allCases)
    func seedsAreCommitted(target: FuzzTarget) throws {
        let committed = Set(try Self.inputs(of: target, in: "Corpus").map(\.bytes))
        for (n, seed) in try target.seeds().enumerated() where target != .storeFile {
            #expect(committed.contains(seed), "seed \(n + 1) of \(target.rawValue) is not in Fuzz/Corpus (loom-fuzz \(target.rawValue) --write-seeds)")
        }
    }
}
