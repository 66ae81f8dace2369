@_spi(LoomStore) package import LoomCore

extension SQLGenerator {
    /// `SELECT [DISTINCT] … FROM … WHERE … GROUP BY … ORDER BY … LIMIT ? OFFSET ?` for a values
    /// or aggregate query, with every constant bound.
    ///
    /// The `ORDER BY` always makes the order total, as ``AggregateQuery`` promises: the sort
    /// keys (by result column number), then every column (distinct), else the group values
    /// (grouped), else the primary key (one row per object).
    package func aggregate(_ query: AggregateQuery) -> (String, [StoredValue]) {
        if dialect.groupsThroughSubquery, !query.groupBy.isEmpty { return groupedThroughSubquery(query) }
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
                columns.append(dialect.aggregate(Self.sqlName(of: function), value))
            }
        }
        var text = "SELECT \(query.isDistinct ? "DISTINCT " : "")\(columns.joined(separator: ", ")) FROM \(Self.quote(entity.name)) AS t0"
        if let predicate = query.predicate {
            text += " WHERE " + condition(predicate, entity, "t0", &builder)
        }
        // A group value that is also a result column is grouped by the column's number: the same
        // expression written twice gets other table aliases, which PostgreSQL does not match
        // with the column (a related attribute's subquery would be an "ungrouped column").
        func resultColumn(of node: PredicateNode) -> Int? {
            query.columns.firstIndex { if case .value(let value) = $0 { value == node } else { false } }.map { $0 + 1 }
        }
        if !query.groupBy.isEmpty {
            text += " GROUP BY " + query.groupBy.map { node in resultColumn(of: node).map(String.init) ?? expression(node, entity, "t0", &builder) }.joined(separator: ", ")
        }
        var order = query.sortKeys.map { dialect.orderTerm("\($0.column + 1)", ascending: $0.ascending) }
        if query.isDistinct {
            order += query.columns.indices.map { dialect.orderTerm("\($0 + 1)", ascending: true) }
        } else if !query.groupBy.isEmpty {
            order += query.groupBy.map { node in dialect.orderTerm(resultColumn(of: node).map(String.init) ?? expression(node, entity, "t0", &builder), ascending: true) }
        } else if !query.isGrouped {
            order.append("t0.\"Z_PK\"")
        }
        if !order.isEmpty { text += " ORDER BY " + order.joined(separator: ", ") }
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }

    /// A grouped query whose values are computed once, in a subquery, and grouped outside it:
    /// `SELECT g0, COUNT(*), SUM(a1) FROM (SELECT … AS g0, … AS a1 FROM … WHERE …) AS q GROUP BY
    /// g0`. PostgreSQL matches a result column with a `GROUP BY` term only when both are the same
    /// expression; a related attribute's subquery written twice is not (its aliases differ).
    func groupedThroughSubquery(_ query: AggregateQuery) -> (String, [StoredValue]) {
        var builder = Builder(dialect)
        let entity = query.entity
        var inner: [String] = []
        // Arguments are appended in text order: the inner columns, then WHERE, then the window.
        for (i, node) in query.groupBy.enumerated() {
            inner.append("\(expression(node, entity, "t0", &builder)) AS g\(i)")
        }
        var columns: [String] = []
        for (j, column) in query.columns.enumerated() {
            switch column {
            case .value(let node):
                if let group = query.groupBy.firstIndex(of: node) {
                    columns.append("q.g\(group)")
                } else {
                    inner.append("\(expression(node, entity, "t0", &builder)) AS v\(j)")
                    columns.append("q.v\(j)")
                }
            case .countRows:
                columns.append("COUNT(*)")
            case .aggregate(let function, let node):
                inner.append("\(expression(node, entity, "t0", &builder)) AS a\(j)")
                columns.append(dialect.aggregate(Self.sqlName(of: function), "q.a\(j)"))
            }
        }
        var from = "SELECT \(inner.joined(separator: ", ")) FROM \(Self.quote(entity.name)) AS t0"
        if let predicate = query.predicate {
            from += " WHERE " + condition(predicate, entity, "t0", &builder)
        }
        let groups = query.groupBy.indices.map { "q.g\($0)" }
        var text = "SELECT \(query.isDistinct ? "DISTINCT " : "")\(columns.joined(separator: ", ")) FROM (\(from)) AS q GROUP BY \(groups.joined(separator: ", "))"
        var order = query.sortKeys.map { dialect.orderTerm("\($0.column + 1)", ascending: $0.ascending) }
        if query.isDistinct {
            order += query.columns.indices.map { dialect.orderTerm("\($0 + 1)", ascending: true) }
        } else {
            order += groups.map { dialect.orderTerm($0, ascending: true) }
        }
        text += " ORDER BY " + order.joined(separator: ", ")
        builder.appendWindow(to: &text, limit: query.fetchLimit, offset: query.fetchOffset)
        return (text, builder.arguments)
    }

    /// An aggregate function's SQL name.
    static func sqlName(of function: AggregateQuery.Function) -> String {
        switch function {
        case .count: "COUNT"
        case .sum: "SUM"
        case .min: "MIN"
        case .max: "MAX"
        case .average: "AVG"
        }
    }
}
