import Testing

// README.md's inheritance example (also in the Inheritance article), checked line for line by
// scripts/check-readme.py; the article's type-filtering block below uses the same models.

// BEGIN README INHERITANCE
import Foundation
import Loom

@Model(abstract: true) class Payment {                   // abstract: no object of its own
    var amount: Int = 0

    init(amount: Int) { self.amount = amount }
}

@Model final class CardPayment: Payment {                // a sub-entity (SwiftData's `BusinessTrip: Trip`)
    var last4: String = ""

    init(amount: Int, last4: String) {
        super.init(amount: amount)
        self.last4 = last4
    }
}

@Model class Transfer: Payment {                         // concrete, with a sub-entity of its own
    var bank: String = ""

    init(amount: Int, bank: String) {
        super.init(amount: amount)
        self.bank = bank
    }
}

@Model final class InstantTransfer: Transfer {           // a third level
    var seconds: Int = 0
}

@MainActor
func payments() throws -> [String] {
    let container = try PersistentContainer(name: "Payments", for: Payment.self, CardPayment.self, Transfer.self, InstantTransfer.self, location: .inMemory)
    let context = container.viewContext
    context.insert(CardPayment(amount: 30, last4: "4242"))
    context.insert(Transfer(amount: 120, bank: "Acme Bank"))
    let instant = InstantTransfer(context: context)
    instant.amount = 75
    instant.seconds = 4
    try context.save()
    // A fetch of a parent returns its sub-entities' objects, each of its own class.
    let all = try context.fetch(FetchRequest<Payment>(sortBy: [SortDescriptor(\.amount)]))
    return all.map { "\(type(of: $0)) \($0.amount)" }     // CardPayment 30, InstantTransfer 75, Transfer 120
}
// END README INHERITANCE

// BEGIN README INHERITANCE FILTERS
@MainActor
func filterPayments(in context: ManagedObjectContext) throws -> [Int] {
    // `is`: the objects of an entity and of its sub-entities.
    let transfers = try context.count(for: FetchRequest<Payment>(predicate: #Predicate { $0 is Transfer }))          // 2
    // `as?`: a sub-entity's attribute; on the other entities it reads nil.
    let acme = try context.count(for: FetchRequest<Payment>(predicate: #Predicate { ($0 as? Transfer)?.bank == "Acme Bank" }))   // 1
    // includesSubentities = false: the entity's own objects only (Core Data's includesSubentities).
    var own = FetchRequest<Transfer>()
    own.includesSubentities = false
    let plain = try context.count(for: own)                                                                          // 1
    // An abstract entity cannot be inserted: the next save says so (LoomError.Code.abstractEntity).
    return [transfers, acme, plain]
}
// END README INHERITANCE FILTERS

// BEGIN README INHERITANCE RELATIONSHIPS
@Model class Document {                                   // a parent entity
    var title: String = ""

    init(title: String) { self.title = title }
}

@Model final class Invoice: Document {                    // a leaf: its relationships are its own
    var customer: Customer?
    @Relationship(deleteRule: .cascade, inverse: \LineItem.invoice) var lines: [LineItem] = []
}

@Model final class Customer {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Invoice.customer) var invoices: Set<Invoice> = []

    init(name: String) { self.name = name }
}

@Model final class LineItem {
    var amount: Int
    var invoice: Invoice?

    init(amount: Int) { self.amount = amount }
}

@MainActor
func invoices() throws -> [String] {
    let container = try PersistentContainer(name: "Documents", for: Document.self, Invoice.self, Customer.self, LineItem.self, location: .inMemory)
    let context = container.viewContext
    let acme = Customer(name: "Acme")
    context.insert(acme)
    let invoice = Invoice(context: context)
    invoice.title = "INV-1"
    invoice.customer = acme
    let line = LineItem(amount: 40)
    context.insert(line)
    invoice.lines.append(line)
    context.insert(Document(title: "Memo"))
    try context.save()
    // From the parent's fetch, a cast reaches the leaf's relationships.
    let billed = try context.fetch(FetchRequest<Document>(predicate: #Predicate { ($0 as? Invoice)?.customer?.name == "Acme" }))
    return billed.map { "\($0.title) \(($0 as? Invoice)?.lines.map(\.amount) ?? [])" }   // ["INV-1 [40]"]
}
// END README INHERITANCE RELATIONSHIPS

// BEGIN README INHERITANCE PARENT RELATIONSHIPS
@Model class Vessel {                                     // a parent entity with a relationship
    var name: String = ""
    var harbour: Harbour?                                 // Ferry and Barge inherit it

    init(name: String) { self.name = name }
}

@Model final class Ferry: Vessel {
    var seats: Int = 0
}

@Model final class Barge: Vessel {
    var tons: Int = 0
}

@Model final class Harbour {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \Vessel.harbour) var vessels: Set<Vessel> = []   // leads to the parent

    init(name: String) { self.name = name }
}

@MainActor
func harbourVessels() throws -> [String] {
    let container = try PersistentContainer(name: "Harbours", for: Vessel.self, Ferry.self, Barge.self, Harbour.self, location: .inMemory)
    let context = container.viewContext
    let dover = Harbour(name: "Dover")
    context.insert(dover)
    let ferry = Ferry(context: context)
    ferry.name = "Pride"
    ferry.harbour = dover                                 // the inherited to-one
    let barge = Barge(context: context)
    barge.name = "Ox"
    dover.vessels.insert(barge)                           // the to-many: any sub-entity's object
    try context.save()
    // A predicate and a sort through the relationship; each object comes back of its own class.
    let docked = try context.fetch(FetchRequest<Vessel>(predicate: #Predicate { $0.harbour?.name == "Dover" }, sortBy: [SortDescriptor(\.name)]))
    return docked.map { "\($0.name) \(type(of: $0))" } + [dover.vessels.map(\.name).sorted().joined(separator: ", ")]   // ["Ox Barge", "Pride Ferry", "Ox, Pride"]
}
// END README INHERITANCE PARENT RELATIONSHIPS

// BEGIN README INHERITANCE UNIQUENESS
@Model class Person {                                     // unique across Person and its sub-entities
    @Attribute(.unique) var email: String = ""
}

@Model final class Employee: Person {
    var team: String = ""
}

@Model final class Contractor: Person {
    var agency: String = ""
}

@MainActor
func signUp() throws -> [String] {
    let container = try PersistentContainer(name: "People", for: Person.self, Employee.self, Contractor.self, location: .inMemory)
    let context = container.viewContext
    let ann = Employee(context: context)
    ann.email = "ann@example.com"
    try context.save()
    let again = Contractor(context: context)                  // another entity, the same email
    again.email = "ann@example.com"
    do {
        try context.save()
    } catch {                                                 // a LoomError: save() throws no other
        guard error.code == .uniquenessViolation else { throw error }
        context.delete(again)                                 // the store is unchanged
    }
    // Merge policies resolve it where they lose nothing: .overwrite replaces the saved employee.
    context.mergePolicy = .overwrite
    Contractor(context: context).email = "ann@example.com"
    try context.save()
    return try context.fetch(FetchRequest<Person>()).map { "\(type(of: $0)) \($0.email)" }   // ["Contractor ann@example.com"]
}
// END README INHERITANCE UNIQUENESS

@Suite("README inheritance")
struct ReadmeInheritanceTests {
    @Test("The inheritance example runs as the README says")
    @MainActor func inheritanceRuns() throws {
        #expect(try payments() == ["CardPayment 30", "InstantTransfer 75", "Transfer 120"])
    }

    /// A card payment, a transfer from Acme Bank and an instant one from Globex Bank, saved.
    @MainActor func savedPayments() throws -> PersistentContainer {
        let container = try PersistentContainer(name: "Payments", for: Payment.self, CardPayment.self, Transfer.self, InstantTransfer.self, location: .inMemory)
        let context = container.viewContext
        context.insert(CardPayment(amount: 30, last4: "4242"))
        context.insert(Transfer(amount: 120, bank: "Acme Bank"))
        let instant = InstantTransfer(context: context)
        instant.amount = 75
        instant.bank = "Globex Bank"
        try context.save()
        return container
    }

    @Test("The uniqueness example refuses the contractor, then overwrites the employee")
    @MainActor func uniquenessRuns() throws {
        #expect(try signUp() == ["Contractor ann@example.com"])
    }

    @Test("The relationships example finds the invoice through the parent's fetch")
    @MainActor func relationshipsRun() throws {
        #expect(try invoices() == ["INV-1 [40]"])
    }

    @Test("The parent-relationship example finds both vessels through the relationship, each of its own class")
    @MainActor func parentRelationshipsRun() throws {
        #expect(try harbourVessels() == ["Ox Barge", "Pride Ferry", "Ox, Pride"])
    }

    @Test("The type-filtering example counts as the article says")
    @MainActor func filtersRun() throws {
        let container = try savedPayments()
        let context = container.viewContext
        #expect(try filterPayments(in: context) == [2, 1, 1])
        // The article's claim: inserting the abstract entity is refused at save, naming it.
        context.insert(Payment(amount: 1))
        let error = #expect(throws: LoomError.self) { try context.save() }
        #expect(error?.code == .abstractEntity)
        #expect(error?.message.contains("Payment") == true)
    }

    @Test("A forced cast in a predicate is refused, as the article says; `as?` reads the same attribute")
    @MainActor func forcedCastRefused() throws {
        let container = try savedPayments()
        let context = container.viewContext
        let forced = #expect(throws: LoomError.self) {
            try context.fetch(FetchRequest<Payment>(predicate: #Predicate { ($0 as! Transfer).bank == "Acme Bank" }))
        }
        #expect(forced?.code == .unsupportedPredicate)
        #expect(try context.fetch(FetchRequest<Payment>(predicate: #Predicate { ($0 as? Transfer)?.bank == "Acme Bank" })).map(\.amount) == [120])
    }
}
