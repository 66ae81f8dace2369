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

/// Two trips of each concrete kind, saved: names t1…t8, days 1…8 (shuffled over kinds).
/// Trips: t2, t5; BusinessTrips: t1 (Globex), t7 (Acme); ConferenceTrips: t4 (Acme, talk "Loom"),
/// t8 (Initech, no talk); PersonalTrips: t3 (reason "family"), t6.
func seedTrips(_ context: ManagedObjectContext) throws {
    context.insert(Trip(name: "t5", days: 5))
    context.insert(Trip(name: "t2", days: 2))
    context.insert(BusinessTrip(name: "t7", days: 7, company: "Acme"))
    context.insert(BusinessTrip(name: "t1", days: 1, company: "Globex"))
    context.insert(ConferenceTrip(name: "t4", days: 4, company: "Acme", talk: "Loom"))
    context.insert(ConferenceTrip(name: "t8", days: 8, company: "Initech", talk: nil))
    let personal = PersonalTrip(context: context)
    personal.name = "t3"
    personal.days = 3
    personal.reason = "family"
    let other = PersonalTrip(context: context)
    other.name = "t6"
    other.days = 6
    try context.save()
}

/// A parent with a unique attribute, which holds across its sub-entities; a guest has badges
/// (a relationship the others lack).
@Model class Account {
    @Attribute(.unique) var email: String = ""
    var nickname: String = ""
}

@Model final class Admin: Account {
    var level: Int = 0
}

@Model final class Guest: Account {
    var sponsor: String?
    @Relationship(deleteRule: .cascade, inverse: \Badge.guest) var badges: [Badge] = []
}

@Model final class Badge {
    var code: String = ""
    var guest: Guest?
}

/// A compound constraint on the middle of three levels: a seat's row and number are unique
/// among box seats and royal box seats (a plain seat is not covered); the row is optional.
@Model class Seat {
    var row: String?
    var number: Int = 0
}

@Model class BoxSeat: Seat {
    #Unique<BoxSeat>([\.row, \.number])
    var box: String = ""
}

@Model final class RoyalBoxSeat: BoxSeat {
    var crest: String = ""
}

var accountModels: [any PersistentModel.Type] { [Account.self, Admin.self, Guest.self, Badge.self] }
var seatModels: [any PersistentModel.Type] { [Seat.self, BoxSeat.self, RoyalBoxSeat.self] }

/// Sub-entities whose names make the names of their triggers longer than PostgreSQL's 63 bytes,
/// alike up to there.
@Model class Registration {
    @Attribute(.unique) var code: String = ""
}

@Model final class RegistrationOfAKindThatHasAVeryLongNameNumberOne: Registration {}

@Model final class RegistrationOfAKindThatHasAVeryLongNameNumberTwo: Registration {}

var registrationModels: [any PersistentModel.Type] {
    [Registration.self, RegistrationOfAKindThatHasAVeryLongNameNumberOne.self, RegistrationOfAKindThatHasAVeryLongNameNumberTwo.self]
}
