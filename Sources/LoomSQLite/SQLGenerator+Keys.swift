import LoomCore
import GRDB

extension SQLGenerator {
    /// The primary keys a fetch would return, in its order: `select(_:)` without the values.
    func selectKeys(_ query: StoreQuery) -> (String, [StoredValue]) {
        var builder = Builder()
        var text = "SELECT t0.\"Z_PK\" FROM \(Self.quote(query.entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + expression(predicate, query.entity, "t0", &builder)
        }
        var order: [String] = []
        for key in query.sortKeys {
            order.append("\(expression(key.valueNode, query.entity, "t0", &builder)) \(key.ascending ? "ASC" : "DESC")")
        }
        text += " ORDER BY " + (order + ["t0.\"Z_PK\""]).joined(separator: ", ")
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }
}
