@_spi(LoomStore) package import LoomCore

extension SQLGenerator {
    /// `SELECT [DISTINCT] … FROM … WHERE … GROUP BY … ORDER BY … LIMIT ? OFFSET ?` for a values
    /// or aggregate query, with every constant bound.
    ///
    /// The `ORDER BY` always makes the order total, as ``AggregateQuery`` promises: the sort
    /// keys (by result column number), then every column (distinct), else the group values
    /// (grouped), else the primary key (one row per object).
    package func aggregate(_ query: AggregateQuery) -> (String, [StoredValue]) {
        var builder = Builder(dialect)
        let entity = query.entity
        // Arguments are appended in text order: columns, WHERE, GROUP BY, ORDER BY, LIMIT.
        var columns: [String] = []
        for column in query.columns {
            switch column {
            case .value(let node):
                columns.append(expression(node, entity, "t0", &builder))
            case .countRows:
                columns.append("COUNT(*)")
            case .aggregate(let function, let node):
                let value = expression(node, entity, "t0", &builder)
                let name = switch function {
                case .count: "COUNT"
                case .sum: "SUM"
                case .min: "MIN"
                case .max: "MAX"
                case .average: "AVG"
                }
                columns.append(dialect.aggregate(name, value))
            }
        }
        var text = "SELECT \(query.isDistinct ? "DISTINCT " : "")\(columns.joined(separator: ", ")) FROM \(Self.quote(entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + condition(predicate, entity, "t0", &builder)
        }
        if !query.groupBy.isEmpty {
            text += " GROUP BY " + query.groupBy.map { expression($0, entity, "t0", &builder) }.joined(separator: ", ")
        }
        var order = query.sortKeys.map { dialect.orderTerm("\($0.column + 1)", ascending: $0.ascending) }
        if query.isDistinct {
            order += query.columns.indices.map { dialect.orderTerm("\($0 + 1)", ascending: true) }
        } else if !query.groupBy.isEmpty {
            order += query.groupBy.map { dialect.orderTerm(expression($0, entity, "t0", &builder), ascending: true) }
        } else if !query.isGrouped {
            order.append("t0.\"Z_PK\"")
        }
        if !order.isEmpty { text += " ORDER BY " + order.joined(separator: ", ") }
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }
}
