import Foundation
import Loom
import Testing

// A hierarchy for values and aggregates, and a flat twin that holds the same objects in one
// table: a request over the hierarchy must answer exactly what the same request over the twin
// answers.

@Model class Expense {
    var label: String = ""
    var category: String = ""
    var amount: Int = 0
    var rate: Double?
    var note: String?
}

@Model class TravelExpense: Expense {
    var city: String = ""
}

@Model final class FlightExpense: TravelExpense {
    var airline: String = ""
}

@Model final class MealExpense: Expense {
    var guests: Int = 0
}

@Model final class FlatExpense {
    var label: String = ""
    var category: String = ""
    var amount: Int = 0
    var rate: Double?
    var note: String?
    /// The class the same object has in the hierarchy.
    var kind: String = ""
}

var expenseModels: [any PersistentModel.Type] { [Expense.self, TravelExpense.self, FlightExpense.self, MealExpense.self, FlatExpense.self] }

/// One random values request, built for the hierarchy's root and for the flat twin alike.
struct ExpensePlan: CustomStringConvertible {
    enum Field: Int, CaseIterable { case category, amount, rate, note }
    enum Column {
        case value(Field)
        case countRows
        case aggregate(String, Field)
    }

    var groups: [Field] = []
    var columns: [Column] = []
    /// Result names to sort by, and whether ascending.
    var sorts: [(String, Bool)] = []
    var threshold: Int?
    var distinct = false
    var offset = 0
    var limit: Int?

    init(_ random: inout SeededGenerator) {
        let shape = Int.random(in: 0..<4, using: &random)
        if shape == 0 {
            // One row per object; the request adds the unique label last in the order.
            let fields = Field.allCases.filter { _ in Bool.random(using: &random) }
            columns = (fields.isEmpty ? [.amount] : fields).map { .value($0) }
            sorts = columns.map { (Self.name(of: $0), Bool.random(using: &random)) }.filter { _ in Bool.random(using: &random) }.shuffled(using: &random)
        } else if shape == 1 {
            // Distinct values.
            let fields = Field.allCases.filter { _ in Bool.random(using: &random) }
            columns = (fields.isEmpty ? [.category] : fields).map { .value($0) }
            distinct = true
            sorts = columns.map { (Self.name(of: $0), Bool.random(using: &random)) }.filter { _ in Bool.random(using: &random) }
        } else {
            // Grouped (or all objects as one group).
            groups = Field.allCases.filter { $0 != .rate && Bool.random(using: &random) }
            columns = groups.map { .value($0) }
            columns.append(.countRows)
            let functions = ["count", "sum", "min", "max", "average"]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let function = functions.randomElement(using: &random)!
                let numeric: [Field] = [.amount, .rate]
                let field = function == "sum" || function == "average" ? numeric.randomElement(using: &random)! : Field.allCases.randomElement(using: &random)!
                let column = Column.aggregate(function, field)
                if !columns.contains(where: { Self.name(of: $0) == Self.name(of: column) }) { columns.append(column) }
            }
            sorts = columns.map { (Self.name(of: $0), Bool.random(using: &random)) }.filter { _ in Bool.random(using: &random) }.shuffled(using: &random)
            distinct = Int.random(in: 0..<5, using: &random) == 0
        }
        threshold = Bool.random(using: &random) ? Int.random(in: -20...60, using: &random) : nil
        if Bool.random(using: &random) {
            offset = Int.random(in: 0...5, using: &random)
            limit = Bool.random(using: &random) ? Int.random(in: 0...6, using: &random) : nil
        }
    }

    var isPerObject: Bool { groups.isEmpty && !distinct && !columns.contains { if case .value = $0 { false } else { true } } }

    static func name(_ field: Field) -> String { ["category", "amount", "rate", "note"][field.rawValue] }
    static func name(of column: Column) -> String {
        switch column {
        case .value(let f): name(f)
        case .countRows: "count"
        case .aggregate(let function, let f): "\(function)(\(name(f)))"
        }
    }

    /// The request over `Model`, whose fields are `keyPaths` (category, amount, rate, note,
    /// label), filtered by `amount > threshold` through `predicate`.
    func request<Model: PersistentModel>(_ keyPaths: [any PartialKeyPath<Model> & Sendable], predicate: (Int) -> Predicate<Model>) -> PropertyFetchRequest<Model> {
        var properties: [FetchedProperty<Model>] = columns.map { column in
            switch column {
            case .value(let f): .value(keyPaths[f.rawValue], as: Self.name(f))
            case .countRows: .count(as: "count")
            case .aggregate("count", let f): .count(of: keyPaths[f.rawValue], as: Self.name(of: column))
            case .aggregate("sum", let f): .sum(keyPaths[f.rawValue], as: Self.name(of: column))
            case .aggregate("min", let f): .min(keyPaths[f.rawValue], as: Self.name(of: column))
            case .aggregate("max", let f): .max(keyPaths[f.rawValue], as: Self.name(of: column))
            case .aggregate(_, let f): .average(keyPaths[f.rawValue], as: Self.name(of: column))
            }
        }
        var sortBy = sorts.map { ResultSort($0.0, order: $0.1 ? .forward : .reverse) }
        if isPerObject {
            properties.append(.value(keyPaths[4], as: "label"))
            sortBy.append(ResultSort("label"))
        }
        var request = PropertyFetchRequest<Model>(predicate: threshold.map(predicate), properties: properties, groupBy: groups.map { keyPaths[$0.rawValue] },
                                                  sortBy: sortBy, fetchLimit: limit, fetchOffset: offset)
        request.returnsDistinctResults = distinct
        return request
    }

    var description: String {
        "columns \(columns.map(Self.name(of:))), groups \(groups.map(Self.name)), sorts \(sorts), amount > \(threshold.map(String.init) ?? "-"), distinct \(distinct), window \(offset)+\(limit.map(String.init) ?? "all")"
    }
}

@MainActor
@Suite("Inheritance: aggregates", .timeLimit(.minutes(5)))
struct InheritanceAggregateTests {
    static let expenseKeyPaths: [any PartialKeyPath<Expense> & Sendable] = [\Expense.category, \Expense.amount, \Expense.rate, \Expense.note, \Expense.label]
    static let flatKeyPaths: [any PartialKeyPath<FlatExpense> & Sendable] = [\FlatExpense.category, \FlatExpense.amount, \FlatExpense.rate, \FlatExpense.note, \FlatExpense.label]

    /// Inserts one expense of a random class into the hierarchy and its twin into the flat entity.
    static func insertPair(_ n: Int, _ random: inout SeededGenerator, in context: ManagedObjectContext) {
        let expense: Expense
        switch Int.random(in: 0..<4, using: &random) {
        case 0: expense = Expense(context: context)
        case 1: expense = TravelExpense(context: context)
        case 2: expense = FlightExpense(context: context)
        default: expense = MealExpense(context: context)
        }
        let twin = FlatExpense(context: context)
        twin.kind = "\(type(of: expense))"
        let label = String(format: "e%03d", n)
        let category = ["food", "travel", "office", "FOOD"].randomElement(using: &random)!
        let amount = Int.random(in: -30...80, using: &random)
        // Multiples of 1/4: every sum is exact, whatever order the rows are added in.
        let rate: Double? = Bool.random(using: &random) ? Double(Int.random(in: -40...40, using: &random)) / 4 : nil
        let note: String? = [nil, "a", "b"].randomElement(using: &random)!
        expense.label = label; twin.label = label
        expense.category = category; twin.category = category
        expense.amount = amount; twin.amount = amount
        expense.rate = rate; twin.rate = rate
        expense.note = note; twin.note = note
    }

    func answers(_ plans: [ExpensePlan], in context: ManagedObjectContext, includesPendingChanges: Bool = true) throws -> (hierarchy: [[FetchedValues]], flat: [[FetchedValues]]) {
        var hierarchy: [[FetchedValues]] = [], flat: [[FetchedValues]] = []
        for plan in plans {
            var h = plan.request(Self.expenseKeyPaths) { t in #Predicate<Expense> { $0.amount > t } }
            var f = plan.request(Self.flatKeyPaths) { t in #Predicate<FlatExpense> { $0.amount > t } }
            h.includesPendingChanges = includesPendingChanges
            f.includesPendingChanges = includesPendingChanges
            hierarchy.append(try context.fetch(h))
            flat.append(try context.fetch(f))
        }
        return (hierarchy, flat)
    }

    @Test("Random values and aggregate requests over a hierarchy answer as over the same objects in one table", arguments: StoreKind.allCases, [UInt64(1), 2, 3])
    func agreeWithFlatTwin(kind: StoreKind, seed: UInt64) throws {
        let container = try kind.makeContainer(models: expenseModels)
        let context = container.viewContext
        var random = SeededGenerator(seed: seed)
        for n in 0..<40 { Self.insertPair(n, &random, in: context) }
        try context.save()
        let plans = (0..<40).map { _ in ExpensePlan(&random) }
        var answer = try answers(plans, in: context)
        for (i, plan) in plans.enumerated() { #expect(answer.hierarchy[i] == answer.flat[i], "\(kind) seed \(seed), saved: \(plan)") }
        let before = answer

        // Unsaved inserts, changes and deletions, made alike on both sides.
        var n = 40
        for _ in 0..<6 { Self.insertPair(n, &random, in: context); n += 1 }
        let expenses = try context.fetch(FetchRequest<Expense>(sortBy: [SortDescriptor(\.label)]))
        let twins = try context.fetch(FetchRequest<FlatExpense>(sortBy: [SortDescriptor(\.label)]))
        for i in stride(from: 0, to: 30, by: 7) {
            expenses[i].amount += 25; twins[i].amount += 25
            expenses[i + 1].rate = 2.5; twins[i + 1].rate = 2.5
            context.delete(expenses[i + 2]); context.delete(twins[i + 2])
        }
        context.processPendingChanges()
        answer = try answers(plans, in: context)
        for (i, plan) in plans.enumerated() { #expect(answer.hierarchy[i] == answer.flat[i], "\(kind) seed \(seed), unsaved: \(plan)") }
        // Without the unsaved changes: what the store held before them.
        let unpended = try answers(plans, in: context, includesPendingChanges: false)
        for (i, plan) in plans.enumerated() { #expect(unpended.hierarchy[i] == before.hierarchy[i], "\(kind) seed \(seed), store only: \(plan)") }
        let pending = answer
        try context.save()
        answer = try answers(plans, in: context)
        for (i, plan) in plans.enumerated() {
            #expect(answer.hierarchy[i] == answer.flat[i], "\(kind) seed \(seed), after the save: \(plan)")
            #expect(answer.hierarchy[i] == pending.hierarchy[i], "\(kind) seed \(seed), unsaved vs saved: \(plan)")
        }
        let informative = plans.indices.filter { answer.flat[$0].count > 1 }.count
        #expect(informative > plans.count / 4, "seed \(seed): too many requests answer one row or none")
    }

    @Test("Counts, sums, averages, minimums and maximums over a parent are those of all its objects, computed in Swift", arguments: StoreKind.allCases)
    func figuresComputedInSwift(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: expenseModels)
        let context = container.viewContext
        // Uneven counts per table: an average of averages would be (10 + 50) / 2 = 30.
        for amount in [10, 10, 10] { Expense(context: context).amount = amount }
        let flight = FlightExpense(context: context)
        flight.amount = 50
        flight.rate = 1.5
        flight.category = "travel"
        let meal = MealExpense(context: context)
        meal.amount = -7
        meal.category = "food"
        meal.rate = 0.25
        try context.save()
        let all = try context.fetch(FetchRequest<Expense>())
        let amounts = all.map(\.amount), rates = all.compactMap(\.rate)
        let request = PropertyFetchRequest<Expense>(properties: [
            .count(as: "n"), .count(of: \.rate, as: "rated"), .sum(\.amount, as: "total"), .average(\.amount, as: "mean"),
            .min(\.amount, as: "low"), .max(\.amount, as: "high"), .sum(\.rate, as: "rates"), .average(\.rate, as: "meanRate"),
            .min(\.category, as: "first"), .max(\.category, as: "last"),
        ])
        let row = try #require(try context.fetch(request).first)
        #expect(try row["n", as: Int.self] == all.count)
        #expect(try row["rated", as: Int.self] == rates.count)
        #expect(try row["total", as: Int.self] == amounts.reduce(0, +))
        #expect(try row["mean", as: Double.self] == Double(amounts.reduce(0, +)) / Double(amounts.count))
        #expect(try row["mean", as: Double.self] == 14.6)
        #expect(try row["low", as: Int.self] == amounts.min())
        #expect(try row["high", as: Int.self] == amounts.max())
        #expect(try row["rates", as: Double.self] == rates.reduce(0, +))
        #expect(try row["meanRate", as: Double.self] == rates.reduce(0, +) / Double(rates.count))
        #expect(try row["first", as: String.self] == all.map(\.category).min())
        #expect(try row["last", as: String.self] == "travel")

        // Groups merge across the tables and sort as one result.
        var grouped = PropertyFetchRequest<Expense>(properties: [.value(\.category), .count(as: "n"), .sum(\.amount, as: "total")], groupBy: [\.category])
        grouped.sortBy = [ResultSort("total", order: .reverse)]
        let groups = try context.fetch(grouped).map { "\(try $0["category", as: String.self]):\(try $0["n", as: Int.self]):\(try $0["total", as: Int.self])" }
        #expect(groups == ["travel:1:50", ":3:30", "food:1:-7"])

        // A type test in the predicate, and a middle entity's request covering its leaf.
        let business = try context.fetch(PropertyFetchRequest<Expense>(predicate: #Predicate { $0 is TravelExpense || $0 is MealExpense }, properties: [.sum(\.amount, as: "s")]))
        #expect(try business[0]["s", as: Int.self] == 43)
        let travel = try context.fetch(PropertyFetchRequest<TravelExpense>(properties: [.count(as: "n"), .average(\.amount, as: "a")]))
        #expect(try travel[0]["n", as: Int.self] == 1)
        #expect(try travel[0]["a", as: Double.self] == 50)
        // No object matches: one row, COUNT 0 and the others nil, as a flat entity answers.
        let none = try context.fetch(PropertyFetchRequest<Expense>(predicate: #Predicate { $0.amount > 1000 }, properties: [.count(as: "n"), .sum(\.amount, as: "s"), .average(\.rate, as: "a"), .max(\.category, as: "m")]))
        #expect(none.count == 1)
        #expect(try none[0]["n", as: Int.self] == 0)
        #expect(try none[0]["s", as: Int?.self] == nil)
        #expect(try none[0]["a", as: Double?.self] == nil)
        #expect(try none[0]["m", as: String?.self] == nil)
    }

    @Test("An abstract parent's aggregates cover its sub-entities; with none, a flat fetch of nothing's answer", arguments: StoreKind.allCases)
    func abstractParent(kind: StoreKind) throws {
        let container = try kind.makeHierarchyContainer()
        let context = container.viewContext
        let empty = try context.fetch(PropertyFetchRequest<Vehicle>(properties: [.count(as: "n"), .sum(\.wheels, as: "w")]))
        #expect(empty.count == 1)
        #expect(try empty[0]["n", as: Int.self] == 0)
        #expect(try empty[0]["w", as: Int?.self] == nil)
        context.insert(Bicycle(gears: 3))
        let car = Car(context: context)
        car.wheels = 4
        // Unsaved: computed over the objects a fetch would return.
        let pending = try context.fetch(PropertyFetchRequest<Vehicle>(properties: [.count(as: "n"), .sum(\.wheels, as: "w"), .average(\.wheels, as: "a")]))
        #expect(try pending[0]["n", as: Int.self] == 2)
        #expect(try pending[0]["w", as: Int.self] == 6)
        #expect(try pending[0]["a", as: Double.self] == 3)
        try context.save()
        let values = try context.fetch(PropertyFetchRequest<Vehicle>(properties: [.value(\.wheels)], sortBy: [ResultSort("wheels", order: .reverse)]))
        #expect(try values.map { try $0["wheels", as: Int.self] } == [4, 2])
    }

    @Test("Bad requests over a hierarchy get the flat path's errors; an overflow across tables is an error; the store is unchanged", arguments: StoreKind.allCases)
    func badRequests(kind: StoreKind) throws {
        let container = try kind.makeContainer(models: expenseModels)
        let context = container.viewContext
        let big = Expense(context: context)
        big.amount = Int.max - 5
        let other = MealExpense(context: context)
        other.amount = 10
        try context.save()
        let overflow = #expect(throws: LoomError.self) { try context.fetch(PropertyFetchRequest<Expense>(properties: [.sum(\.amount, as: "s")])) }
        #expect(overflow?.code == .integerOverflow)
        #expect(overflow?.attributeNames == ["amount"])
        // Each table alone fits; the average of both is exact.
        let mean = try context.fetch(PropertyFetchRequest<Expense>(properties: [.average(\.amount, as: "a")]))
        #expect(try mean[0]["a", as: Double.self] == (Double(Int.max - 5) + 10) / 2)
        let text = #expect(throws: LoomError.self) { try context.fetch(PropertyFetchRequest<Expense>(properties: [.sum(\.category)])) }
        #expect(text?.code == .invalidRequest)
        let sort = #expect(throws: LoomError.self) { try context.fetch(PropertyFetchRequest<Expense>(properties: [.count()], sortBy: [ResultSort("nope")])) }
        #expect(sort?.code == .unsupportedSort)
        let ungrouped = #expect(throws: LoomError.self) { try context.fetch(PropertyFetchRequest<Expense>(properties: [.value(\.note), .count()])) }
        #expect(ungrouped?.code == .invalidRequest)
        let window = #expect(throws: LoomError.self) { try context.fetch(PropertyFetchRequest<Expense>(properties: [.value(\.amount)], fetchOffset: -1)) }
        #expect(window != nil)
        #expect(try context.count(for: FetchRequest<Expense>()) == 2)
        #expect(!context.hasChanges)
    }
}
