import Foundation

/// Where a context runs: the main actor, or its own serial queue.
///
/// Both are checked the same way: by asking which isolation domain the current code runs on
/// (``IsolationDomain/current``), never by asking which thread it is. On Linux the main actor
/// runs its jobs on the main dispatch queue, and once an async `main` has started (and always
/// under swift-testing) that queue is drained by a worker thread, not the main thread.
enum ContextIsolation: CustomStringConvertible {
    case mainActor
    case queue(ContextQueue)

    var description: String { domain.description }

    /// The domain this isolation stands for; contexts on the main actor share one.
    var domain: IsolationDomain {
        switch self {
        case .mainActor: .mainActor
        case .queue(let q): q.domain
        }
    }

    /// Whether the calling code runs on this isolation: on its queue (or the main queue), or
    /// inside a body Loom runs for it (see ``IsolationDomain/current``).
    var isCurrent: Bool { IsolationDomain.current == domain }

    /// Traps unless the calling code runs on this isolation. `what` (the object or call named in
    /// the message) is only made for the trap: every attribute access with the checks on runs
    /// this, and making the object's description each time was most of a read's cost.
    func verify(context: ManagedObjectContext, what: @autoclosure () -> String) {
        guard !isCurrent else { return }
        fatalError("Loom concurrency violation: \(what()) in context '\(context.name ?? "unnamed")' was used on \(IsolationDomain.describeCurrent()), but belongs to \(self).")
    }
}

/// One isolation domain a context can belong to: the main actor, or one context's serial queue.
/// Contexts on the main actor share its domain; every background context has its own.
enum IsolationDomain: Hashable, Sendable, CustomStringConvertible {
    case mainActor
    case queue(ObjectIdentifier, label: String)

    var description: String {
        switch self {
        case .mainActor: "the main actor"
        case .queue(_, let label): "queue '\(label)'"
        }
    }

    /// Tags a queue with the domain its code runs in. Set on every context queue and on the main
    /// queue, so that `DispatchQueue.getSpecific` answers "which domain is this?" for jobs run by
    /// the queue, whichever thread drains it.
    static let key = DispatchSpecificKey<IsolationDomain>()

    /// Tags the main queue, once, before the first question about the current domain.
    private static let mainQueueTagged: Void = DispatchQueue.main.setSpecific(key: key, value: .mainActor)

    /// The domain the calling code runs in, or `nil` outside every context's isolation.
    ///
    /// In order: the innermost body Loom is running on this thread for some domain (a synchronous
    /// hop, or a parent borrowed from its blocked owner; see ``WaitGraph``); else the queue whose
    /// job this is, the main queue included; else the main thread, which is the main actor when
    /// it runs top-level code before the main queue is drained elsewhere.
    static var current: IsolationDomain? {
        if let running = RunningBodies.innermost { return running }
        mainQueueTagged
        if let domain = DispatchQueue.getSpecific(key: key) { return domain }
        return Thread.isMainThread ? .mainActor : nil
    }

    /// The calling code's place for a trap message: its domain and the thread it runs on.
    static func describeCurrent() -> String {
        let thread = Thread.current
        let address = "\(Unmanaged.passUnretained(thread).toOpaque())"
        guard let domain = current else {
            if Thread.isMainThread { return "the main thread, outside every context's isolation" }
            let name = thread.name.flatMap { $0.isEmpty ? nil : " '\($0)'" } ?? ""
            return "thread\(name) \(address), outside every context's isolation"
        }
        return "\(domain) (\(Thread.isMainThread ? "on the main thread" : "on thread \(address)"))"
    }
}

/// The serial queue of a background context, and the means to tell whether code runs on it.
final class ContextQueue: Sendable {
    let queue: DispatchQueue
    let domain: IsolationDomain

    init(label: String) {
        queue = DispatchQueue(label: label)
        domain = .queue(ObjectIdentifier(queue), label: label)
        queue.setSpecific(key: IsolationDomain.key, value: domain)
    }

    /// Whether the calling code runs on this queue's isolation (see ``IsolationDomain/current``).
    var isCurrent: Bool { IsolationDomain.current == domain }
}

/// The domains whose bodies Loom is running on the current thread, innermost last: pushed for
/// the body of a synchronous hop (`performAndWait`, a child's hop to its parent) on the thread
/// that runs it, and for a parent borrowed from its blocked owner.
///
/// A thread-specific stack, because a dispatch `sync` runs its block on the waiting thread, where
/// `DispatchQueue.getSpecific` sees only the innermost queue, and a borrowed parent runs on its
/// child's queue. Only the owning thread reads or writes its stack.
enum RunningBodies {
    /// A thread's stack. `@unchecked Sendable`: never shared; it is reached only through the
    /// thread-specific slot of the thread that made it.
    private final class Stack: @unchecked Sendable {
        var domains: [IsolationDomain] = []
    }

    private static let slot: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            let stack: UnsafeMutableRawPointer? = pointer   // optional on Linux, not on Darwin
            if let stack { Unmanaged<Stack>.fromOpaque(stack).release() }
        }
        if status != 0 { fatalError("Loom could not create a thread-specific key (error \(status)).") }
        return key
    }()

    private static var stack: Stack? {
        pthread_getspecific(slot).map { Unmanaged<Stack>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The innermost domain Loom runs a body for on this thread.
    static var innermost: IsolationDomain? { stack?.domains.last }

    /// Runs `body` as code of `domain` on this thread.
    static func run<T, E: Error>(as domain: IsolationDomain, _ body: () throws(E) -> T) throws(E) -> T {
        let stack = self.stack ?? {
            let made = Stack()
            pthread_setspecific(slot, Unmanaged.passRetained(made).toOpaque())
            return made
        }()
        stack.domains.append(domain)
        defer { stack.domains.removeLast() }
        return try body()
    }
}
