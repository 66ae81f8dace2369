import Foundation
import Loom

enum Genre: String, Codable, Sendable {
    case fiction, science, history
}

enum Priority: Int, Sendable {
    case low = 0, normal = 1, high = 2
}

struct Dimensions: Codable, Sendable, Equatable {
    var width: Double
    var height: Double
}

@Model final class Book {
    @Attribute(.unique) var isbn: String
    var title: String
    var pages: Int = 0
    var rating: Double?
    var genre: Genre = .fiction
    var published: Date?
    @Transient var scratch: Int = 0

    init(isbn: String, title: String, pages: Int = 0) {
        self.isbn = isbn
        self.title = title
        self.pages = pages
    }
}

@Model final class Shelf {
    var room: String
    var position: Int
    var label: String?
    #Unique<Shelf>([\.room, \.position])
    #Index<Shelf>([\.label])

    init(room: String, position: Int) {
        self.room = room
        self.position = position
    }
}

/// One attribute of every supported type, for round-trip tests.
@Model final class Sample {
    var flag: Bool = false
    var int: Int = 0
    var int16: Int16 = 0
    var int32: Int32 = 0
    var int64: Int64 = 0
    var double: Double = 0
    var float: Float = 0
    var string: String = ""
    var date: Date = Date(timeIntervalSinceReferenceDate: 0)
    var data: Data = Data()
    var uuid: UUID = UUID(uuidString: "00000000-0000-0000-0000-000000000000")!
    var url: URL = URL(string: "https://example.com")!
    var decimal: Decimal = 0
    var genre: Genre = .fiction
    var priority: Priority = .normal
    var dimensions: Dimensions = Dimensions(width: 0, height: 0)
    var optionalString: String?
    var optionalInt: Int?
    var optionalDate: Date?
    var optionalData: Data?
    var optionalUUID: UUID?
    var optionalGenre: Genre?
    var optionalDimensions: Dimensions?

    init() {}
}

/// A row of four counters, each written by one worker in the stress tests.
@Model final class Tally {
    @Attribute(.unique) var key: String
    var a: Int = 0
    var b: Int = 0
    var c: Int = 0
    var d: Int = 0

    init(key: String) { self.key = key }

    func add(_ amount: Int, toField field: Int) {
        switch field {
        case 0: a += amount
        case 1: b += amount
        case 2: c += amount
        default: d += amount
        }
    }

    var fields: [Int] { [a, b, c, d] }
}
