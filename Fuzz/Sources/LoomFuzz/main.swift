// The libFuzzer driver of Loom's fuzz targets (`FuzzTarget`), built only by `scripts/fuzz`.
//
//     loom-fuzz TARGET [libFuzzer options and corpus folders]
//     loom-fuzz TARGET --write-seeds FOLDER
//
// libFuzzer's own `main` is not linked (the package manager names this module's entry point
// `main`): this one takes the target's name off the arguments and hands the rest to
// `LLVMFuzzerRunDriver`.
import Foundation
import LoomTools

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzer(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ body: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The target named on the command line, read once before the fuzzer starts. It is also put in
/// the environment: libFuzzer's `-fork` and `-jobs` run this program again with its own
/// arguments only, and the children find their target there.
enum Selected {
    static let variable = "LOOM_FUZZ_TARGET"
    static let namedInArguments = CommandLine.arguments.count > 1 && FuzzTarget(rawValue: CommandLine.arguments[1]) != nil
    static let target: FuzzTarget = {
        let name = namedInArguments ? CommandLine.arguments[1] : ProcessInfo.processInfo.environment[variable] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
            FileHandle.standardError.write(Data("usage: loom-fuzz TARGET [libFuzzer options] (TARGET: \(names))\n".utf8))
            exit(64)
        }
        setenv(variable, name, 1)
        return target
    }()
}

let target = Selected.target
let arguments = CommandLine.arguments
if Selected.namedInArguments, arguments.count == 4, arguments[2] == "--write-seeds" {
    let folder = URL(filePath: arguments[3])
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for (n, seed) in try target.seeds().enumerated() {
        try Data(seed).write(to: folder.appending(path: "seed-\(n + 1)"))
    }
    exit(0)
}

// The program's name, then everything after the target's name.
let passed = [arguments[0]] + arguments.dropFirst(Selected.namedInArguments ? 2 : 1)
var argv: [UnsafeMutablePointer<CChar>?] = passed.map { strdup($0) } + [nil]
var argc = CInt(argv.count - 1)
let status = argv.withUnsafeMutableBufferPointer { buffer in
    var base = buffer.baseAddress!
    return runFuzzer(&argc, &base) { data, size in
        Selected.target.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
}
exit(status)
