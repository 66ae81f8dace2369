import Foundation
import Loom
@testable import LoomCore
import Observation
import Synchronization
import Testing

/// An object makes its `ObservationRegistrar` only for a read that something may observe (one
/// inside a tracking scope), and observation works whatever was read before.
@MainActor
@Suite("Observation tracking probe")
struct ObservationTrackingProbeTests {
    #if os(Linux) && (arch(x86_64) || arch(arm64))
    @Test("On Linux the probe finds the Observation runtime's tracking state")
    func probeIsAvailableOnLinux() {
        // If a toolchain changes the runtime so that the probe no longer finds or trusts it,
        // objects fall back to a registrar on every first read: correct, but this fails so
        // that the cost does not come back unnoticed.
        #expect(ObservationTrackingProbe.isAvailable)
    }
    #endif

    @Test("The probe answers per thread: no scope, a scope, nested scopes, a scope on another thread")
    func probeFollowsScopes() async {
        let tracking = ObservationTrackingProbe.tracking
        #expect(!ObservationTrackingProbe.mayBeTracking(tracking) || !ObservationTrackingProbe.isAvailable)
        var inside = false, nested = false, afterNested = false
        withObservationTracking {
            inside = ObservationTrackingProbe.mayBeTracking(tracking)
            withObservationTracking { nested = ObservationTrackingProbe.mayBeTracking(tracking) } onChange: {}
            afterNested = ObservationTrackingProbe.mayBeTracking(tracking)
        } onChange: {}
        #expect(inside && nested && afterNested)
        #expect(!ObservationTrackingProbe.mayBeTracking(tracking) || !ObservationTrackingProbe.isAvailable)
        // A scope open on this thread says nothing of another thread's reads.
        let elsewhere = Mutex(true)
        withObservationTracking {
            let seen = onAnotherThread { ObservationTrackingProbe.mayBeTracking(tracking) }
            elsewhere.withLock { $0 = seen }
        } onChange: {}
        #expect(!elsewhere.withLock { $0 } || !ObservationTrackingProbe.isAvailable)
    }

    @Test("A plain read makes no registrar; a read inside withObservationTracking does", arguments: StoreKind.allCases)
    func onlyTrackedReadsMakeARegistrar(kind: StoreKind) throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        view.insert(Book(isbn: "1", title: "Threads"))
        try view.save()
        view.reset()
        let book = try #require(try view.fetch(FetchRequest<Book>()).first)
        _ = book.title
        #expect(book._loomMayBeObserved == !ObservationTrackingProbe.isAvailable)
        withObservationTracking { _ = book.title } onChange: {}
        #expect(book._loomMayBeObserved)
    }

    @Test("An object read and changed before anything observed it is observed afterwards like any other", arguments: StoreKind.allCases)
    func readBeforeObservingStillObserves(kind: StoreKind) async throws {
        let container = try kind.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "Threads", pages: 100)
        view.insert(book)
        try view.save()
        _ = book.title
        book.title = "Unobserved change"       // tells no one: nothing observes the book yet
        try view.save()
        let heard = Mutex(0)
        withObservationTracking { _ = book.title } onChange: { heard.withLock { $0 += 1 } }
        book.pages = 101                       // not observed
        #expect(heard.withLock { $0 } == 0)
        let id = book.objectID
        try await container.save { context in try context.existingObject(with: id).title = "Merged" }
        try await settle { book.title == "Merged" }
        #expect(heard.withLock { $0 } == 1)
    }

    @Test("Observations, the asynchronous sequence, follows an object that only plain reads had touched")
    func observationsSequenceFollowsChanges() async throws {
        let container = try StoreKind.sqlite.makeContainer()
        let view = container.viewContext
        let book = Book(isbn: "1", title: "Threads")
        view.insert(book)
        try view.save()
        _ = book.title
        var titles = Observations { book.title }.makeAsyncIterator()
        #expect(await titles.next() == "Threads")
        book.title = "Threads, revised"
        #expect(await titles.next() == "Threads, revised")
    }
}
