import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program as a child process with `posix_spawn`, feeding its standard input and
/// collecting its standard output and error.
///
/// Not Foundation's `Process`: on Linux, `Process.run()` of Swift 6.3.1 finds the highest open
/// descriptor by copying each `/proc/self/fd` entry's whole 256-byte name field, which reads past
/// glibc's directory buffer and crashes (SIGSEGV) a process holding many descriptors
/// (swift-corelibs-foundation#5472, fixed after 6.3.1). The parallel test suite holds over a
/// thousand (stores, reader connections, PostgreSQL sockets) and crashed in CI that way. Here the
/// child's ends of its pipes are the only descriptors it is given on purpose: the others are
/// made close-on-exec.
enum ChildProcess {
    struct Output: Sendable {
        /// The exit code, or the number of the signal that ended the child (as `Process`'s
        /// `terminationStatus`).
        var status: Int32
        var standardOutput: Data
        var standardError: Data
    }

    struct SpawnError: Error, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    /// Writes to a pipe whose reader has gone must fail with EPIPE, not kill the test process.
    private static let ignoresBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN); return () }()

    /// Runs `executable` with `arguments` and `environment` (the whole environment), writes
    /// `input` to its standard input and closes it, and waits for it to end.
    static func run(_ executable: String, _ arguments: [String], input: Data? = nil, environment: [String: String]) throws -> Output {
        _ = ignoresBrokenPipes
        var stdinPipe: [Int32] = [-1, -1], stdoutPipe: [Int32] = [-1, -1], stderrPipe: [Int32] = [-1, -1]
        // Close-on-exec, so that other children do not keep these pipes open. (`pipe2` is not
        // visible to Swift here; a child spawned by another thread between `pipe` and `fcntl`
        // would only delay this one's end of file until it exits.)
        for i in 0..<3 {
            let made = i == 0 ? pipe(&stdinPipe) : i == 1 ? pipe(&stdoutPipe) : pipe(&stderrPipe)
            if made != 0 {
                let code = errno
                for fd in stdinPipe + stdoutPipe + stderrPipe where fd >= 0 { close(fd) }
                throw SpawnError(call: "pipe", code: code)
            }
        }
        for fd in stdinPipe + stdoutPipe + stderrPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, stderrPipe[1], 2)
        // The child starts with SIGPIPE's default action, whatever this process set.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(stdinPipe[0]); close(stdoutPipe[1]); close(stderrPipe[1])
        guard spawned == 0 else {
            close(stdinPipe[1]); close(stdoutPipe[0]); close(stderrPipe[0])
            throw SpawnError(call: "posix_spawn of \(executable)", code: spawned)
        }
        // Both pipes are read while the child runs, so that a large output cannot fill one and
        // block it.
        let group = DispatchGroup()
        nonisolated(unsafe) var out = Data(), err = Data()
        let outFD = stdoutPipe[0], errFD = stderrPipe[0]
        DispatchQueue.global().async(group: group) { out = readToEnd(outFD) }
        DispatchQueue.global().async(group: group) { err = readToEnd(errFD) }
        if let input {
            input.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = write(stdinPipe[1], bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        break   // the child stopped reading (EPIPE): what it printed says why
                    }
                    offset += written
                }
            }
        }
        close(stdinPipe[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { throw SpawnError(call: "waitpid", code: errno) }
        }
        group.wait()
        close(outFD); close(errFD)
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
        let signal = status & 0x7f
        return Output(status: signal == 0 ? (status >> 8) & 0xff : signal, standardOutput: out, standardError: err)
    }

    private static func readToEnd(_ fd: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count == 0 || errno != EINTR {
                return data
            }
        }
    }
}
