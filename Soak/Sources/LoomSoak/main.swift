import CSoakSupport
import Foundation
import GRDBSQLite
import Loom
import Synchronization

// loom-soak: Loom under a long mixed load (issue 41, point 6), run by `scripts/soak`.
//
// One SQLite store holds accounts whose balances always sum to the same total: every save moves
// an amount from one account to another, opens an empty account, or closes one, moving its
// balance to another (the number of accounts stays within 50 of 200, so memory can be judged). Eight contexts
// save at once with the `.error` merge policy (a conflict is rolled back and tried again), a
// second process does the same and is killed with SIGKILL at random moments, a live query
// follows the accounts, a reader pinned to a query generation checks that what it reads adds
// up, and the history is purged as it grows. Every ten seconds the parent checks the total
// from a fresh context and samples its resident memory. It prints the memory curve and every
// error, and exits 1 on a broken invariant or on memory that grew more than 10% from the fifth
// minute to the end.

@Model final class SoakAccount {
    var number: Int
    var balance: Int
    init(number: Int, balance: Int) {
        self.number = number
        self.balance = balance
    }
}

let accounts = 200
/// `LOOM_SOAK_TRANSFERS_ONLY=1`: no account opened or closed (to tell causes apart).
let transfersOnly = ProcessInfo.processInfo.environment["LOOM_SOAK_TRANSFERS_ONLY"] == "1"
let startingBalance = 1_000
let total = accounts * startingBalance

struct Options {
    var minutes = 30.0
    var store: URL?
    var child = false
    var contexts = 8
    var withSecondProcess = true
    var seed = UInt64(Date().timeIntervalSince1970)

    init(_ arguments: [String]) {
        var rest = arguments.dropFirst()[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--minutes": minutes = rest.popFirst().flatMap(Double.init) ?? minutes
            case "--store": store = rest.popFirst().map { URL(filePath: $0) }
            case "--child": child = true
            case "--contexts": contexts = rest.popFirst().flatMap(Int.init) ?? contexts
            case "--one-process": withSecondProcess = false
            case "--seed": seed = rest.popFirst().flatMap { UInt64($0) } ?? seed
            default:
                FileHandle.standardError.write(Data("usage: loom-soak [--minutes M] [--store PATH] [--seed N]\n".utf8))
                exit(2)
            }
        }
    }
}

/// Counts and remembers what went wrong, from any thread.
final class Ledger: Sendable {
    private let state = Mutex((saves: 0, conflicts: 0, errors: [String: Int](), violations: [String]()))
    func saved() { state.withLock { $0.saves += 1 } }
    func conflict() { state.withLock { $0.conflicts += 1 } }
    func error(_ error: any Error) { state.withLock { $0.errors["\(error)".prefix(160).description, default: 0] += 1 } }
    func violation(_ text: String) { state.withLock { $0.violations.append(text) } }
    var snapshot: (saves: Int, conflicts: Int, errors: [String: Int], violations: [String]) { state.withLock { $0 } }
}


func residentBytes() -> Int {
    guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = statm.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

/// One random change in `context`, saved: a transfer, or an empty account opened or closed.
func change(_ context: ManagedObjectContext, _ random: inout SystemRandomNumberGenerator, ledger: Ledger) {
    do {
        let all = try context.fetch(FetchRequest<SoakAccount>())
        if let deleted = all.first(where: \.isDeleted) {
            ledger.violation("a fetch returned \(deleted.objectID), which is deleted")
            FileHandle.standardError.write(Data("a fetch returned \(deleted.objectID), which is deleted (inserted \(deleted.isInserted))\n".utf8))
            return
        }
        guard all.count >= 2 else { return }
        var choice = transfersOnly ? 2 : Int.random(in: 0..<20, using: &random)
        if choice == 0 && ProcessInfo.processInfo.environment["LOOM_SOAK_NO_INSERT"] == "1" { choice = 2 }
        if choice == 1 && ProcessInfo.processInfo.environment["LOOM_SOAK_NO_DELETE"] == "1" { choice = 2 }
        switch choice {
        case 0 where all.count < accounts + 50:
            context.insert(SoakAccount(number: Int.random(in: 1_000...Int.max / 2, using: &random), balance: 0))
        case 1 where all.count > accounts - 50:
            // Closed: its balance moves to another account in the same save.
            let closed = all[Int.random(in: 0..<all.count, using: &random)]
            let heir = all[Int.random(in: 0..<all.count, using: &random)]
            guard closed !== heir else { return }
            heir.balance += closed.balance
            context.delete(closed)
        default:
            let from = all[Int.random(in: 0..<all.count, using: &random)]
            let to = all[Int.random(in: 0..<all.count, using: &random)]
            let amount = Int.random(in: 0...min(from.balance, 50), using: &random)
            from.balance -= amount
            to.balance += amount
        }
        try context.save()
        ledger.saved()
    } catch where error.code == .versionConflict || error.code == .objectNotFound {
        // Another context or process changed or deleted what this one read: tried again.
        context.rollback()
        ledger.conflict()
    } catch {
        context.rollback()
        ledger.error(error)
    }
}

func openContainer(_ url: URL) throws -> PersistentContainer {
    PersistentContainer(store: try SQLiteStore(url: url, schema: try Schema(SoakAccount.self)))
}

/// The second process: two contexts changing the store until it is killed.
func runChild(_ url: URL) -> Never {
    let container: PersistentContainer
    do { container = try openContainer(url) } catch { print("child: \(error)"); exit(1) }
    let ledger = Ledger()
    let threads = (0..<2).map { _ in
        Thread {
            let context = container.newBackgroundContext()
            var random = SystemRandomNumberGenerator()
            while true { context.performAndWait { change($0, &random, ledger: ledger) } }
        }
    }
    for thread in threads { thread.start() }
    while true { sleep(60) }
}

let options = Options(CommandLine.arguments)
let directory = FileManager.default.temporaryDirectory.appending(path: "loom-soak-\(getpid())")
let url = options.store ?? directory.appending(path: "soak.loom")
if options.child { runChild(url) }

try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
let container = try openContainer(url)
try container.newBackgroundContext().performAndWait { context in
    if try context.count(for: FetchRequest<SoakAccount>()) == 0 {
        for number in 0..<accounts { context.insert(SoakAccount(number: number, balance: startingBalance)) }
        try context.save()
    }
}
let ledger = Ledger()
let deadline = Date().addingTimeInterval(options.minutes * 60)
let running = Atomic<Bool>(true)
print("loom-soak: \(options.minutes) minutes on \(url.path), \(options.contexts) contexts\(options.withSecondProcess ? " + a second process killed at random" : "")")

// Eight contexts saving.
var workers = (0..<options.contexts).map { _ in
    Thread {
        let context = container.newBackgroundContext()
        if let staleness = ProcessInfo.processInfo.environment["LOOM_SOAK_STALENESS"].flatMap(Double.init) {
            context.performAndWait { $0.stalenessInterval = staleness }
        }
        var random = SystemRandomNumberGenerator()
        while running.load(ordering: .relaxed) { context.performAndWait { change($0, &random, ledger: ledger) } }
    }
}
// The pinned reader: what one generation shows always adds up, however long it is held.
workers.append(Thread {
    let context = container.newBackgroundContext()
    var reads = 0
    while running.load(ordering: .relaxed) {
        context.performAndWait { context in
            do {
                // Pinned: one generation adds up, read now and again after others saved. (Unpinned,
                // objects fetched as faults fill from the coordinator's row cache when first read,
                // each at its newest version, as in Core Data: a total across them is not one
                // moment's, which is why generations exist.)
                try context.setQueryGenerationFrom(.current)
                reads += 1
                let sum = try context.fetch(FetchRequest<SoakAccount>()).reduce(0) { $0 + $1.balance }
                if sum != total { ledger.violation("a pinned generation read a total of \(sum), not \(total)") }
                usleep(5_000)
                try context.refreshAllObjects()
                let again = try context.fetch(FetchRequest<SoakAccount>()).reduce(0) { $0 + $1.balance }
                if again != total { ledger.violation("a pinned generation read \(again) the second time, not \(total)") }
                context.reset()
            } catch {
                ledger.error(error)
            }
        }
        usleep(20_000)
    }
})
// The history purger.
workers.append(Thread {
    let context = container.newBackgroundContext()
    while running.load(ordering: .relaxed) {
        sleep(5)
        context.performAndWait { context in
            do {
                if let token = try context.currentHistoryToken() { try context.deleteHistory(through: token) }
            } catch {
                ledger.error(error)
            }
        }
    }
})
// The second process, killed with SIGKILL after a random 1–8 s, then started again.
if options.withSecondProcess { workers.append(Thread {
    var kills = 0
    while running.load(ordering: .relaxed) {
        let child = Process()
        child.executableURL = URL(filePath: CommandLine.arguments[0])
        child.arguments = ["--child", "--store", url.path]
        do { try child.run() } catch { ledger.error(error); sleep(1); continue }
        usleep(UInt32.random(in: 1_000_000...8_000_000))
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        kills += 1
    }
    print("second process killed \(kills) times")
}) }
for worker in workers { worker.start() }

// The live query: its result always holds every account.
let liveContext = container.newBackgroundContext()
let live = try liveContext.performAndWait { context in
    context.automaticallyMergesChanges = true
    return try context.liveQuery(FetchRequest<SoakAccount>(sortBy: [SortDescriptor(\.number)]))
}
let liveResults = Atomic<Int>(0)
let liveReader = Task.detached {
    do {
        for try await results in live {
            liveResults.add(1, ordering: .relaxed)
            if results.count < 2 { ledger.violation("the live query showed \(results.count) accounts") }
        }
    } catch {
        ledger.error(error)
    }
}

var samples: [(seconds: Int, bytes: Int)] = []
/// SQLite's own memory (page caches, statements) at each sample: part of the resident memory.
var sqliteBytes: [Int] = []
/// The heap in use at each sample (glibc's `mallinfo2`: chunks in use, plus mmapped ones), and
/// the heap malloc holds: what is held and not in use is freed memory malloc keeps.
var heapBytes: [(inUse: Int, held: Int)] = []
func heap() -> (inUse: Int, held: Int) {
    let state = loom_soak_heap_state()
    return (Int(state.in_use), Int(state.held))
}
let start = Date()
while Date() < deadline {
    sleep(10)
    let sum = try container.newBackgroundContext().performAndWait { context in
        try context.setQueryGenerationFrom(.current)
        return try context.fetch(FetchRequest<SoakAccount>()).reduce(0) { $0 + $1.balance }
    }
    if sum != total { ledger.violation("the store's total is \(sum), not \(total)") }
    let seconds = Int(Date().timeIntervalSince(start))
    samples.append((seconds, residentBytes()))
    sqliteBytes.append(Int(sqlite3_memory_used()))
    heapBytes.append(heap())
    let now = ledger.snapshot
    print("\(seconds) s: RSS \(samples.last!.bytes / 1_048_576) MiB (heap in use \(heapBytes.last!.inUse / 1_048_576) of \(heapBytes.last!.held / 1_048_576) MiB held, SQLite's own \(sqliteBytes.last! / 1_048_576) MiB), \(now.saves) saves, \(now.conflicts) conflicts, \(now.errors.values.reduce(0, +)) errors, \(liveResults.load(ordering: .relaxed)) live results, \(now.violations.count) violations")
}
running.store(false, ordering: .relaxed)
liveReader.cancel()
sleep(10)   // the workers' last saves, and the second process's last kill

let final = ledger.snapshot
print("\nResident memory (MiB) by minute:")
print("  (resident; heap in use / held by malloc; SQLite's own)")
for ((sample, sqlite), heap) in zip(zip(samples, sqliteBytes), heapBytes) where sample.seconds % 60 < 10 {
    let mib = { (bytes: Int) in String(format: "%.1f", Double(bytes) / 1_048_576) }
    print("  minute \(sample.seconds / 60): \(mib(sample.bytes)); \(mib(heap.inUse)) / \(mib(heap.held)); \(mib(sqlite))")
}
var failed = !final.violations.isEmpty
// The judgement is the issue's: flat after warm-up, at most 10% growth from minute 5 to the end.
// The growth over the second half is printed beside it: a leak grows all along, while caches
// that fill up to a bound (SQLite's page caches, shown as SQLite's own memory) stop.
func growth(from first: (seconds: Int, bytes: Int), to last: (seconds: Int, bytes: Int)) -> Double {
    Double(last.bytes - first.bytes) / Double(first.bytes)
}
if let warm = samples.first(where: { $0.seconds >= 300 }), let last = samples.last, last.seconds > warm.seconds {
    let fromWarm = growth(from: warm, to: last)
    print(String(format: "Growth from minute 5 to the end: %.1f%% (at most 10%%)", fromWarm * 100))
    if fromWarm > 0.10 { failed = true }
    if last.seconds >= 600, let middle = samples.first(where: { $0.seconds >= last.seconds / 2 }) {
        print(String(format: "Growth over the second half (minute %d to the end): %.1f%%", middle.seconds / 60, growth(from: middle, to: last) * 100))
    }
} else {
    print("Shorter than 5 minutes: no growth figure.")
}
print("Saves \(final.saves), conflicts retried \(final.conflicts), live results \(liveResults.load(ordering: .relaxed))")
print("Errors: \(final.errors.isEmpty ? "none" : "")")
for (text, count) in final.errors.sorted(by: { $0.value > $1.value }) { print("  \(count) × \(text)") }
print("Invariant violations: \(final.violations.count)")
// Grouped by kind (the message without its figures), with the first of each.
var kinds: [String: (count: Int, first: String)] = [:]
for violation in final.violations {
    let kind = String(violation.filter { !$0.isNumber })
    kinds[kind, default: (0, violation)].count += 1
}
for (_, kind) in kinds.sorted(by: { $0.value.count > $1.value.count }) { print("  \(kind.count) × \(kind.first)") }
exit(failed ? 1 : 0)
