import Foundation
import Loom

// A three-level hierarchy (SwiftData's `@Model class BusinessTrip: Trip`) and an abstract one.

@Model class Trip {
    var name: String
    var days: Int = 0
    #Index<Trip>([\.name])

    init(name: String, days: Int) {
        self.name = name
        self.days = days
    }
}

@Model class BusinessTrip: Trip {
    var company: String = ""

    init(name: String, days: Int, company: String) {
        super.init(name: name, days: days)
        self.company = company
    }
}

@Model final class ConferenceTrip: BusinessTrip {
    var talk: String?

    init(name: String, days: Int, company: String, talk: String?) {
        super.init(name: name, days: days, company: company)
        self.talk = talk
    }
}

@Model final class PersonalTrip: Trip {
    var reason: String = ""
}

@Model(abstract: true) class Vehicle {
    var wheels: Int = 0
    @Transient var scratch = 0

    init(wheels: Int) {
        self.wheels = wheels
    }
}

@Model final class Bicycle: Vehicle {
    var gears: Int = 1

    init(gears: Int) {
        super.init(wheels: 2)
        self.gears = gears
    }
}

@Model final class Car: Vehicle {
    var seats: Int = 4
}

/// Every model of the trip hierarchy, parents first.
var tripModels: [any PersistentModel.Type] { [Trip.self, BusinessTrip.self, ConferenceTrip.self, PersonalTrip.self] }
/// The abstract hierarchy.
var vehicleModels: [any PersistentModel.Type] { [Vehicle.self, Bicycle.self, Car.self] }

extension StoreKind {
    /// A fresh, empty container of this kind for the inheritance models.
    func makeHierarchyContainer() throws -> PersistentContainer {
        try makeContainer(models: tripModels + vehicleModels)
    }
}
