// Shared by every compile-fail snippet: a model written out by hand (what @Model generates),
// so that the snippets need no macro plugin.
import Foundation
import Loom

final class Note: PersistentModel {
    var _loomBacking = _ObjectBacking(entity: Note.entity)
    static let entity = EntityDescription(name: "Note", modelType: Note.self, attributes: [
        AttributeDescription(name: "text", valueType: String.self),
    ])
    init(backing: _ObjectBacking) { _loomBacking = backing }
    static func _loomPropertyName(for keyPath: AnyKeyPath) -> String? { keyPath == \Note.text ? "text" : nil }
    var text: String {
        get { _loomBacking.value(at: 0, as: String.self) }
        set { _loomBacking.setValue(newValue, at: 0) }
    }
}
