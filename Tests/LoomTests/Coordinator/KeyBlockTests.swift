@testable import LoomCore
import Testing

/// Key blocks hand out an entity's keys in increasing order, whichever of a reservation ahead
/// and a synchronous one comes back first: an entity's keys follow the order its objects were
/// inserted in. (Under load, a reservation ahead that came back after a synchronous one made
/// later objects take lower keys; two stores filled alike then numbered their rows differently.)
@Suite("Key blocks")
struct KeyBlockTests {
    /// A block of keys 1..<65 with every key taken (a reservation ahead is under way).
    static func usedUpBlock() -> KeyAllocator.KeyBlock {
        var block = KeyAllocator.KeyBlock(next: 1, end: 65, size: 64)
        for key in Int64(1)..<65 { #expect(block.takeKey()?.key == key) }
        #expect(block.isReserving)
        #expect(block.takeKey() == nil)
        return block
    }

    static func remainingKeys(_ block: inout KeyAllocator.KeyBlock) -> [Int64] {
        var keys: [Int64] = []
        while let (key, _) = block.takeKey() { keys.append(key) }
        return keys
    }

    @Test("A reservation ahead that comes back after a synchronous one, with lower keys, is left unused")
    func lowerRangeAheadIsLeftUnused() {
        var block = Self.usedUpBlock()
        block.take(129..<385, needed: true)   // the synchronous reservation, which reached the store second
        block.take(65..<129)                  // the reservation ahead, back last
        #expect(Self.remainingKeys(&block) == Array(129..<385))
    }

    @Test("A synchronous reservation that comes back after one ahead, with lower keys, is left unused while the block has keys")
    func lowerSynchronousRangeIsLeftUnused() {
        var block = Self.usedUpBlock()
        block.take(129..<257)                 // the reservation ahead, back first
        block.take(65..<129, needed: true)    // the synchronous one, which reached the store first
        #expect(Self.remainingKeys(&block) == Array(129..<257))
    }

    @Test("Ranges that come back in order are used in order: the spare after the block")
    func higherRangesAreUsedInOrder() {
        var block = KeyAllocator.KeyBlock(next: 1, end: 65, size: 64)
        block.take(65..<193)
        #expect(Self.remainingKeys(&block) == Array(1..<193))
    }

    @Test("A synchronous reservation that finds the block used up uses its range even when lower: keys stay unique")
    func neededLowerRangeIsUsedWhenNothingElseIsLeft() {
        var block = Self.usedUpBlock()
        block.take(200..<201)                 // a range ahead, all taken by other threads
        #expect(block.takeKey()?.key == 200)
        block.take(65..<129, needed: true)
        #expect(Self.remainingKeys(&block) == Array(65..<129))
    }
}
