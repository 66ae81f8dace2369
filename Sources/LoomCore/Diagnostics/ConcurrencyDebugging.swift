import Foundation
import Synchronization

/// Run-time checking that contexts and managed objects are used on their own isolation, for
/// code that escapes the compiler's checks (`@unchecked Sendable`, `nonisolated(unsafe)`,
/// Swift 5 mode). Loom's `-com.apple.CoreData.ConcurrencyDebug 1`.
///
/// Turn it on with `LOOM_CONCURRENCY_DEBUG=1` in the environment, or with
/// ``isEnabled``. When on, every context call and every attribute access checks the
/// executor and traps with a message naming the entity, object, context, expected executor and
/// actual thread. When off, a check costs one relaxed atomic load.
public enum ConcurrencyDebugging {
    /// Whether checks are on. A constant initial value, so that reading it (on every attribute
    /// access) needs no lazy-initialization check; the environment is read when the first
    /// context is made (``readEnvironment()``) or the setting is first used.
    private static let flag = Atomic<Bool>(false)

    private static let environmentRead: Void = {
        let on = ProcessInfo.processInfo.environment["LOOM_CONCURRENCY_DEBUG"].map { $0 == "1" || $0.lowercased() == "yes" || $0.lowercased() == "true" } ?? false
        if on {
            announce()
            flag.store(true, ordering: .relaxed)
        }
    }()

    /// Applies `LOOM_CONCURRENCY_DEBUG`, once. Every context's initializer calls it, so the
    /// setting is in force before any object can be used.
    static func readEnvironment() { environmentRead }

    /// Whether checks are on. Settable at run time, e.g. in tests.
    public static var isEnabled: Bool {
        get {
            readEnvironment()
            return flag.load(ordering: .relaxed)
        }
        set {
            readEnvironment()
            if newValue && !flag.load(ordering: .relaxed) { announce() }
            flag.store(newValue, ordering: .relaxed)
        }
    }

    /// Whether checks are on, for the inlined fast paths of attribute reads.
    @usableFromInline
    static var checksEnabled: Bool { flag.load(ordering: .relaxed) }

    private static func announce() {
        FileHandle.standardError.write(Data("Loom concurrency debugging is on: every context and managed-object access checks its executor.\n".utf8))
    }

    @inline(__always)
    static func check(_ backing: ObjectBacking) {
        guard flag.load(ordering: .relaxed), let context = backing.context else { return }
        context.isolation.verify(context: context, what: "\(backing.entity.name) \(backing.objectIDDescription)")
    }

    @inline(__always)
    static func check(_ context: ManagedObjectContext, _ function: StaticString) {
        guard flag.load(ordering: .relaxed) else { return }
        context.isolation.verify(context: context, what: "\(function)")
    }
}
