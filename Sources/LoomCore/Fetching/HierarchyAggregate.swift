/// A values or aggregate fetch (``PropertyFetchRequest``) of an entity with sub-entities (or an
/// abstract one): each concrete entity of the hierarchy has a table of its own, so the fetch
/// asks each of them a partial query (through ``AggregateFetch``, so unsaved changes count as
/// in a flat fetch) and combines the answers as one table would have given them.
///
/// - Groups: each table gives its groups' counts, sums, minimums and maximums; equal group
///   values (``AggregateEvaluator/GroupKey``) merge; counts and integer sums add exactly (an
///   overflow is ``LoomError/Code/integerOverflow`` as in one table), a real makes a sum real;
///   an average is the total sum over the total count, never an average of averages.
/// - One row per object: each table's rows with their primary keys, merged in the request's
///   order, ties by primary key, then by the entity's place (as ``HierarchyFetch``).
/// - Distinct rows: the union of each table's distinct rows, each once.
/// Then the whole result is sorted and windowed as the flat path does.
///
/// Made by the context for one call, on its isolation; not `Sendable`.
struct HierarchyAggregate {
    let context: ManagedObjectContext
    /// The concrete entities whose objects the request reads, parents before sub-entities.
    let entities: [EntityDescription]

    /// The result rows of `request`, whose query for the fetched entity itself is `query`.
    func rows<Model: PersistentModel>(_ request: PropertyFetchRequest<Model>, query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let schema = context.coordinator.schema
        var perEntity: [AggregateQuery] = []
        for entity in entities { perEntity.append(try request.aggregateQuery(for: entity, in: schema).query) }
        let results = if query.isGrouped {
            try grouped(query, perEntity, includesPendingChanges: request.includesPendingChanges)
        } else {
            try ungrouped(query, perEntity, includesPendingChanges: request.includesPendingChanges)
        }
        return AggregateEvaluator.ordered(results, query)
    }

    /// One row per object (or distinct rows): each entity's rows, with the primary key and the
    /// entity's place to break ties unless the rows are distinct.
    private func ungrouped(_ query: AggregateQuery, _ perEntity: [AggregateQuery], includesPendingChanges: Bool) throws(LoomError) -> [(values: [StoredValue], tieBreak: [StoredValue])] {
        var out: [(values: [StoredValue], tieBreak: [StoredValue])] = []
        for (place, entityQuery) in perEntity.enumerated() {
            var partial = entityQuery
            partial.sortKeys = []
            partial.fetchOffset = 0
            partial.fetchLimit = nil
            if !query.isDistinct {
                // Each entity's first `offset + limit` rows hold the window of the merge.
                partial.sortKeys = query.sortKeys
                partial.fetchLimit = query.fetchLimit.flatMap { limit in
                    let (window, overflow) = query.fetchOffset.addingReportingOverflow(limit)
                    return overflow ? nil : window
                }
                partial.columns.append(.value(.primaryKey))
            }
            for row in try AggregateFetch(context: context).rows(partial, includesPendingChanges: includesPendingChanges) {
                if query.isDistinct {
                    out.append((row, row))
                } else {
                    out.append((Array(row.dropLast()), [row[row.count - 1], .integer(Int64(place))]))
                }
            }
        }
        return out
    }

    /// One row per group: each entity's partial aggregates per group, merged.
    private func grouped(_ query: AggregateQuery, _ perEntity: [AggregateQuery], includesPendingChanges: Bool) throws(LoomError) -> [(values: [StoredValue], tieBreak: [StoredValue])] {
        let groupCount = query.groupBy.count
        var order: [AggregateEvaluator.GroupKey] = []
        var groups: [AggregateEvaluator.GroupKey: (values: [StoredValue], parts: [Part])] = [:]
        for entityQuery in perEntity {
            var partial = entityQuery
            partial.columns = entityQuery.groupBy.map { .value($0) } + entityQuery.columns.flatMap(Part.columns)
            partial.isDistinct = false
            partial.sortKeys = []
            partial.fetchOffset = 0
            partial.fetchLimit = nil
            let rows: [[StoredValue]]
            do {
                rows = try AggregateFetch(context: context).rows(partial, includesPendingChanges: includesPendingChanges)
            } catch let error where error.code == .integerOverflow && !query.columns.contains(where: Part.isSum) {
                throw LoomError(.integerOverflow, "An average over \(query.entity.name) and its sub-entities adds up each entity's values first, and the sum of \(entityQuery.entity.name)'s does not fit in a 64-bit integer; average a Double attribute, or each sub-entity on its own.", entity: query.entity.name)
            }
            for row in rows {
                let values = Array(row[..<groupCount])
                let key = AggregateEvaluator.GroupKey(values)
                var cursor = groupCount
                var parts: [Part] = []
                for column in query.columns { parts.append(Part(column, row, &cursor)) }
                if let known = groups[key] {
                    var merged = known.parts
                    for i in merged.indices { try merged[i].absorb(parts[i], entity: query.entity) }
                    groups[key] = (known.values, merged)
                } else {
                    order.append(key)
                    groups[key] = (values, parts)
                }
            }
        }
        if groupCount == 0 && order.isEmpty {
            // No entity at all (an abstract entity without concrete sub-entities): one row of
            // empty aggregates, as a flat fetch of no objects gives.
            let key = AggregateEvaluator.GroupKey([])
            order.append(key)
            groups[key] = ([], query.columns.map { Part($0) })
        }
        var out: [(values: [StoredValue], tieBreak: [StoredValue])] = []
        for key in order {
            guard let group = groups[key] else { continue }
            var values: [StoredValue] = []
            for part in group.parts { values.append(part.result(groupValues: group.values, groupBy: query.groupBy)) }
            out.append((values, group.values))
        }
        return out
    }

    /// One result column's partial answer from one entity, and how answers combine.
    struct Part {
        let column: AggregateQuery.Column
        /// COUNT(*) or COUNT(x) (for an average, of the values summed).
        var count: Int64 = 0
        /// SUM(x), for a sum or an average: NULL when no value was seen.
        var sum: StoredValue = .null
        /// MIN(x) or MAX(x): NULL when no value was seen.
        var extreme: StoredValue = .null

        /// The partial columns one result column asks each entity for.
        static func columns(_ column: AggregateQuery.Column) -> [AggregateQuery.Column] {
            switch column {
            case .value: []
            case .countRows: [.countRows]
            case .aggregate(.average, let node): [.aggregate(.sum, node), .aggregate(.count, node)]
            case .aggregate: [column]
            }
        }

        static func isSum(_ column: AggregateQuery.Column) -> Bool {
            if case .aggregate(.sum, _) = column { return true }
            return false
        }

        /// An empty part (no object).
        init(_ column: AggregateQuery.Column) { self.column = column }

        /// Reads a partial row's columns for `column` from `cursor` on.
        init(_ column: AggregateQuery.Column, _ row: [StoredValue], _ cursor: inout Int) {
            self.column = column
            switch column {
            case .value:
                return
            case .countRows, .aggregate(.count, _):
                if case .integer(let n) = row[cursor] { count = n }
                cursor += 1
            case .aggregate(.average, _):
                sum = row[cursor]
                if case .integer(let n) = row[cursor + 1] { count = n }
                cursor += 2
            case .aggregate(.sum, _):
                sum = row[cursor]
                cursor += 1
            case .aggregate(.min, _), .aggregate(.max, _):
                extreme = row[cursor]
                cursor += 1
            }
        }

        /// Adds another entity's part of the same column: counts and sums add (integers
        /// exactly, an overflow is an error), the smaller minimum and the larger maximum win.
        mutating func absorb(_ other: Part, entity: EntityDescription) throws(LoomError) {
            count += other.count
            switch (sum, other.sum) {
            case (_, .null):
                break
            case (.null, _):
                sum = other.sum
            case (.integer(let a), .integer(let b)):
                let (total, overflow) = a.addingReportingOverflow(b)
                if overflow, case .aggregate(.average, _) = column {
                    // An average is real: SQLite adds its values as reals, and never overflows.
                    sum = .real(Double(a) + Double(b))
                    break
                }
                guard !overflow else {
                    throw LoomError(.integerOverflow, "A sum over \(entity.name) and its sub-entities does not fit in a 64-bit integer (SQLite: integer overflow); narrow the predicate, or sum a Double attribute.", entity: entity.name)
                }
                sum = .integer(total)
            default:
                sum = .real(Self.real(sum) + Self.real(other.sum))
            }
            guard !other.extreme.isNull else { return }
            guard !extreme.isNull else { extreme = other.extreme; return }
            let c = StoredValue.compare(other.extreme, extreme)
            if case .aggregate(.min, _) = column, c < 0 { extreme = other.extreme }
            if case .aggregate(.max, _) = column, c > 0 { extreme = other.extreme }
        }

        private static func real(_ value: StoredValue) -> Double {
            switch value {
            case .integer(let i): Double(i)
            case .real(let d): d
            default: 0
            }
        }

        /// The combined answer; a `.value` column is one of the group's values.
        func result(groupValues: [StoredValue], groupBy: [PredicateNode]) -> StoredValue {
            switch column {
            case .value(let node):
                return groupBy.firstIndex(of: node).map { groupValues[$0] } ?? .null
            case .countRows, .aggregate(.count, _):
                return .integer(count)
            case .aggregate(.sum, _):
                return sum
            case .aggregate(.average, _):
                return count > 0 && !sum.isNull ? .real(Self.real(sum) / Double(count)) : .null
            case .aggregate(.min, _), .aggregate(.max, _):
                return extreme
            }
        }
    }
}
