import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomTools
import Testing

/// `loom dump` of a store with more rows of an entity than one page of the store SPI's reads.
@MainActor
@Suite(.ownThreads) struct PagedDumpTests {
    @Test(arguments: StoreKind.persistentCases)
    func aDumpOfMoreRowsThanAPageHasEveryObjectOnceInKeyOrder(_ kind: StoreKind) async throws {
        let location = try DumpLoadTests.newLocation(kind)
        let store = try DumpLoadTests.openStore(location, kind, try Schema(DumpLoadTests.types))
        let identifier = store.identifier
        let tag = try #require(store.schema.entity(named: "Tag"))
        let count: Int64 = 1_201
        try store.bulkLoad(as: identifier, metadata: [:]) { writer in
            for key in 1...count {
                var values = [StoredValue](repeating: .null, count: tag.storedValueCount)
                values[0] = .text("tag \(key)")
                try writer.insert(tag, key: key, version: 1, values: values, textBytes: [])
            }
            try writer.setNextKey(count + 1, for: tag)
        }
        try store.close()
        let output = try await LoomExecutable.run(["dump", location])
        #expect(output.status == 0, "\(output.standardError)")
        let lines = output.standardOutput.split(separator: "\n").dropFirst()
        let uris = try lines.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return try #require(object?["uri"] as? String)
        }
        #expect(uris == (1...count).map { "loom://\(identifier)/Tag/\($0)" })
    }
}
