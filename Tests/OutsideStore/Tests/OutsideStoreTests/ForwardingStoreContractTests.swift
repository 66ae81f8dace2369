@_spi(LoomStore) import LoomCore
import LoomStoreTesting
import OutsideStore
import Testing

/// Loom's store contract run on a store of another package, as its author's tests would run it.
/// The store keeps its data in memory, so the checks that need a second instance on the same data
/// (disjoint keys, history, remote commits) are not run.
@Suite struct ForwardingStoreContractTests {
    struct Subject: StoreContractSubject {
        func makeStore(schema: Schema) throws -> any PersistentStore { ForwardingStore(schema: schema) }
        func openAgain(_ store: any PersistentStore, schema: Schema) throws -> any PersistentStore {
            throw LoomError(.storeFailure, "A ForwardingStore keeps its data in memory: it cannot be opened twice.")
        }
    }

    let contract: StoreContract
    init() throws { contract = try StoreContract(Subject()) }

    @Test func applyIsAtomic() throws { try contract.applyIsAtomic() }
    @Test func receipts() throws { try contract.receipts() }
    @Test func writeScope() throws { try contract.writeScope() }
    @Test func writeScopeRollsBack() throws { try contract.writeScopeRollsBack() }
    @Test func relatedRows() throws { try contract.relatedRows() }
    @Test func hierarchies() throws { try contract.hierarchies() }
    @Test func callsAfterClose() throws { try contract.callsAfterClose() }
    // In memory, there is nothing to decode: whole rows come back.
    @Test func fetchSkippingKnownValues() throws { try contract.fetchSkippingKnownValues(skips: false) }
    @Test func snapshots() throws { try contract.snapshots() }
}
