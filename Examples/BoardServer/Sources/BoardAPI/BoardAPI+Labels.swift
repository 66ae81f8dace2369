import Foundation
import Hummingbird
import Loom

extension BoardAPI {
    /// A label, and the cards that carry it (the other side of a many-to-many relationship).
    func addLabelRoutes(to router: Router<BasicRequestContext>) {
        router.get("labels/:id") { _, context in try await get(Label.self, context) }
        router.patch("labels/:id") { request, context in
            try await patch(Label.self, with: LabelInput.self, request, context) { input, label, _ in try label.apply(input) }
        }
        router.delete("labels/:id") { request, context in try await delete(Label.self, request, context) }
        router.get("labels/:id/cards") { _, context in
            let id = try id(of: Label.self, context)
            let cards = try await container.performBackgroundTask { context in
                try context.existingObject(with: id).cards.map(\.json).sorted { $0.id < $1.id }
            }
            return try HTTPExchange.json(cards)
        }
    }
}

extension Label {
    /// Sets what `input` holds; a field it lacks keeps its value.
    func apply(_ input: LabelInput) throws {
        if let name = input.name { self.name = try Validation.text(name, field: "name", of: "Label") }
        if let color = input.color { self.color = try Validation.text(color, field: "color", of: "Label") }
    }
}
