import Foundation
import Loom
@_spi(LoomStore) import LoomCore

// The `import` fuzz target: the JSON import path as an application takes it. Bytes from outside
// (an API's response, a feed) are decoded with `JSONDecoder` into sources, and an
// `ImportRequest` inserts or updates titles by their unique ISBN, links each to its publisher
// by code, in chunks, into a SQLite store that holds a publisher and a title already.

/// A publisher, found by its code.
@Model final class FuzzPublisher {
    @Attribute(.unique) var code: String
    var name: String = ""
    @Relationship(inverse: \FuzzTitle.publisher) var titles: Set<FuzzTitle> = []

    init(code: String) { self.code = code }
}

/// A title, with an attribute of most types an import sets.
@Model final class FuzzTitle {
    @Attribute(.unique) var isbn: String
    var name: String
    var pages: Int32 = 0
    var rating: Double?
    var weight: Float?
    var price: Decimal?
    var released: Date?
    var tag: UUID?
    var site: URL?
    var cover: Data?
    var publisher: FuzzPublisher?

    init(isbn: String, name: String) {
        self.isbn = isbn
        self.name = name
    }
}

/// One title as a feed describes it: the import's source.
struct FuzzTitleRecord: Decodable, Sendable {
    var isbn: String
    var name: String
    var pages: Int32?
    var rating: Double?
    var weight: Float?
    var price: Decimal?
    var released: Date?
    var tag: UUID?
    var site: URL?
    var cover: Data?
    var publisher: String?
}

extension FuzzTarget {
    /// JSON arrays of titles: new ones, one the store holds (an update), one repeated within
    /// the import, a publisher's code no publisher has (a failed link), values at their limits.
    static let importSeeds = [
        #"[{"isbn":"978-1","name":"One","pages":120,"rating":4.5,"weight":0.25,"price":12.5,"released":"2020-01-02T03:04:05Z","tag":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","site":"https://a.example/one","cover":"AAEC","publisher":"Q"},{"isbn":"978-2","name":"Two","publisher":null}]"#,
        #"[{"isbn":"978-0","name":"Seed again","pages":2147483647,"rating":-0.0,"publisher":"Q"},{"isbn":"978-3","name":"Three","rating":"nan"},{"isbn":"978-3","name":"Three twice","weight":"-inf"}]"#,
        #"[{"isbn":"978-4","name":"Four","publisher":"nobody"},{"isbn":"","name":"\u00e9\u0000","price":-99999999999999999999.5,"released":"1969-12-31T23:59:59Z","site":"x:"}]"#,
        #"[]"#,
    ]

    /// The chunk size of the import: small, so that a few sources make several chunks.
    static let importChunkSize = 2

    static func importJSON(_ input: [UInt8]) {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        guard let records = try? decoder.decode([FuzzTitleRecord].self, from: Data(input)) else { return }
        withScratchFolder { folder in
            guard let schema = try? Schema([FuzzPublisher.self, FuzzTitle.self]),
                  let store = try? SQLiteStore(url: folder.appending(path: "import.loom"), schema: schema) else { return }
            defer { try? store.close() }
            let container = PersistentContainer(store: store)
            let request = ImportRequest<FuzzTitle, FuzzTitleRecord>(records, chunkSize: importChunkSize) { record in
                var values: [BatchValue<FuzzTitle>] = [.set(\.isbn, to: record.isbn), .set(\.name, to: record.name)]
                if let pages = record.pages { values.append(.set(\.pages, to: pages)) }
                values += [
                    .set(\.rating, to: record.rating), .set(\.weight, to: record.weight), .set(\.price, to: record.price),
                    .set(\.released, to: record.released), .set(\.tag, to: record.tag), .set(\.site, to: record.site),
                    .set(\.cover, to: record.cover),
                ]
                return values
            }.linking(\.publisher, to: \FuzzPublisher.code, by: \.publisher)
            container.newBackgroundContext(name: "fuzz import").performAndWait { context in
                let publisher = FuzzPublisher(code: "Q")
                context.insert(publisher)
                let seed = FuzzTitle(isbn: "978-0", name: "Seed")
                seed.publisher = publisher
                context.insert(seed)
                guard (try? context.save()) != nil else { return }
                _ = try? context.execute(request)
                // What was imported reads back.
                _ = try? context.fetch(FetchRequest<FuzzTitle>())
            }
        }
    }
}
