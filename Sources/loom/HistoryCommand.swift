import ArgumentParser
import Foundation
import Loom
@_spi(LoomStore) import LoomCore   // reads the history through the store, without a model
import LoomTools

/// `loom history PATH`: prints a store's history transactions, oldest first, as text or JSON,
/// without the model the store was made with.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show the history transactions of a Loom store: who saved what, when.",
        discussion: """
            Each transaction is one save: its number (the token), time, author \
            (context.transactionAuthor), context, process, and each object inserted (+), updated \
            (~, with the changed properties) or deleted (-). --after takes a transaction number: \
            the last one a consumer has read. Examples:

              loom history /tmp/demo.loom --limit 5
              loom history /tmp/demo.loom --after 12 --author "importer 1" --entity InstalledPackage
              loom history /tmp/demo.loom --json | jq '.[].changes | length'

            --json prints an array of transactions, each {"token": {"storeIdentifier", \
            "transactionNumber"}, "timestamp" (ISO 8601), "author", "contextName", \
            "processIdentifier", "processName", "changes": [{"objectID": {"storeIdentifier", \
            "entityName", "primaryKey"}, "kind" (insert, update or delete), "updatedProperties", \
            "tombstone"}]}; a key without a value is absent.
            """)

    @Argument(help: "The store file, or a PostgreSQL URL (postgres://user@host:port/db?schema=name).")
    var path: String

    @Option(help: "Only transactions after this transaction number.")
    var after: Int64?

    @Option(help: "Only transactions by this author (repeat for several).")
    var author: [String] = []

    @Option(help: "Only changes of this entity (repeat for several).")
    var entity: [String] = []

    @Option(help: "At most this many transactions.")
    var limit: Int?

    @Flag(help: "Print JSON (an array of transactions) instead of text.")
    var json = false

    func run() throws {
        // Read-only: one read-only connection, the file left as it is.
        let store = try ReadOnlyStore(location: path)
        var descriptor = HistoryDescriptor(fetchLimit: limit)
        descriptor.after = after.map { HistoryToken(storeIdentifier: store.storeIdentifier, transactionNumber: $0) }
        if !author.isEmpty { descriptor.authors = author }
        if !entity.isEmpty { descriptor.entityNames = entity }
        let transactions = try store.fetchHistory(descriptor)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.dateEncodingStrategy = .iso8601
            print(String(decoding: try encoder.encode(transactions), as: UTF8.self))
        } else if transactions.isEmpty {
            print("No history transactions\(after.map { " after #\($0)" } ?? "") in \(CredentialRedaction.redacting(path)).")
        } else {
            for transaction in transactions { print(transaction) }
        }
    }
}
