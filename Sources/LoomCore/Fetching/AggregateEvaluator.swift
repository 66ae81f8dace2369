import Foundation

/// Computes an ``AggregateQuery`` in memory with SQLite's rules, so that the in-memory store,
/// a context's unsaved changes and the SQLite store all give the same rows in the same order.
///
/// Sums follow SQLite (3.40, the version Loom is tested with): integers add exactly and an
/// overflow is an error; any real makes the sum a real, accumulated in visiting order, so a
/// floating-point sum may differ between stores in its last bits when rows are visited in
/// another order.
enum AggregateEvaluator {
    /// The rows of `query` for `rows`, which already match the query's predicate.
    static func evaluate<G: PredicateGraph>(_ query: AggregateQuery, rows: [G.Row], in graph: G) throws(LoomError) -> [[StoredValue]] {
        // Each result with the values that break ties after the sort keys.
        var results: [(values: [StoredValue], tieBreak: [StoredValue])] = []
        if query.isGrouped {
            var groups: [GroupKey: Int] = [:]
            var accumulators: [[Accumulator]] = []
            var groupValues: [[StoredValue]] = []
            for row in rows {
                let values = query.groupBy.map { $0.evaluate(row, in: graph) }
                let key = GroupKey(values)
                let index: Int
                if let known = groups[key] {
                    index = known
                } else {
                    index = accumulators.count
                    groups[key] = index
                    accumulators.append(query.columns.map(Accumulator.init))
                    groupValues.append(values)
                }
                for c in query.columns.indices { accumulators[index][c].add(row, in: graph) }
            }
            if query.groupBy.isEmpty && accumulators.isEmpty {
                accumulators = [query.columns.map(Accumulator.init)]
                groupValues = [[]]
            }
            for (i, group) in accumulators.enumerated() {
                var values: [StoredValue] = []
                for accumulator in group { values.append(try accumulator.result(query.entity)) }
                results.append((values, groupValues[i]))
            }
        } else {
            for row in rows {
                let values = query.columns.map { column -> StoredValue in
                    guard case .value(let node) = column else { return .null }
                    return node.evaluate(row, in: graph)
                }
                results.append((values, [.integer(graph.key(of: row))]))
            }
        }
        return ordered(results, query)
    }

    /// `results` made distinct when the query says so (each then breaks ties by its values),
    /// sorted by the query's sort keys, ties by their tie-break values, then windowed.
    static func ordered(_ results: [(values: [StoredValue], tieBreak: [StoredValue])], _ query: AggregateQuery) -> [[StoredValue]] {
        var results = results
        if query.isDistinct {
            var seen: Set<GroupKey> = []
            results = results.filter { seen.insert(GroupKey($0.values)).inserted }.map { ($0.values, $0.values) }
        }
        let sorted = results.sorted { a, b in
            for key in query.sortKeys {
                let c = StoredValue.compare(a.values[key.column], b.values[key.column])
                if c != 0 { return key.ascending ? c < 0 : c > 0 }
            }
            for (x, y) in zip(a.tieBreak, b.tieBreak) {
                let c = StoredValue.compare(x, y)
                if c != 0 { return c < 0 }
            }
            return false
        }
        let start = min(query.fetchOffset, sorted.count)
        let end = query.fetchLimit.map { min(start + $0, sorted.count) } ?? sorted.count
        return sorted[start..<end].map(\.values)
    }

    /// Values compared with SQLite's equality for grouping and `DISTINCT`: a real with an
    /// integral value equals the integer.
    struct GroupKey: Hashable {
        let values: [StoredValue]
        init(_ values: [StoredValue]) {
            self.values = values.map { value in
                if case .real(let d) = value, let i = Int64(exactly: d) { return .integer(i) }
                return value
            }
        }
    }

    /// One column's running state for one group.
    struct Accumulator {
        let column: AggregateQuery.Column
        /// Non-NULL values seen (rows, for `countRows`).
        var count: Int64 = 0
        /// The first row's value, for a `.value` column.
        var first: StoredValue?
        var integerSum: Int64 = 0
        var realSum: Double = 0
        var isApproximate = false
        var didOverflow = false
        var extreme: StoredValue?

        init(_ column: AggregateQuery.Column) { self.column = column }

        mutating func add<G: PredicateGraph>(_ row: G.Row, in graph: G) {
            switch column {
            case .value(let node):
                if first == nil { first = node.evaluate(row, in: graph) }
            case .countRows:
                count += 1
            case .aggregate(let function, let node):
                let value = node.evaluate(row, in: graph)
                if value.isNull { return }
                count += 1
                switch function {
                case .count: break
                case .sum, .average: addNumber(value)
                case .min:
                    if let e = extreme, StoredValue.compare(value, e) >= 0 { break }
                    extreme = value
                case .max:
                    if let e = extreme, StoredValue.compare(value, e) <= 0 { break }
                    extreme = value
                }
            }
        }

        /// SQLite's `sumStep`: text is read as a number, as `sqlite3_value_numeric_type` does.
        private mutating func addNumber(_ value: StoredValue) {
            var number = value
            if case .text(let s) = value {
                let trimmed = s.trimmingCharacters(in: .whitespaces)
                number = Int64(trimmed).map(StoredValue.integer) ?? .real(Double(trimmed) ?? 0)
            } else if case .blob = value {
                number = .real(0)
            }
            switch number {
            case .integer(let v):
                realSum += Double(v)
                if !isApproximate && !didOverflow {
                    let (sum, overflow) = integerSum.addingReportingOverflow(v)
                    if overflow { isApproximate = true; didOverflow = true } else { integerSum = sum }
                }
            case .real(let v):
                realSum += v
                isApproximate = true
            default:
                break
            }
        }

        func result(_ entity: EntityDescription) throws(LoomError) -> StoredValue {
            switch column {
            case .value:
                return first ?? .null
            case .countRows:
                return .integer(count)
            case .aggregate(let function, _):
                switch function {
                case .count:
                    return .integer(count)
                case .sum:
                    if count == 0 { return .null }
                    if didOverflow {
                        throw LoomError(.integerOverflow, "A sum over \(entity.name) does not fit in a 64-bit integer (SQLite: integer overflow); narrow the predicate, or sum a Double attribute.", entity: entity.name)
                    }
                    return isApproximate ? .real(realSum) : .integer(integerSum)
                case .average:
                    return count == 0 ? .null : .real(realSum / Double(count))
                case .min, .max:
                    return extreme ?? .null
                }
            }
        }
    }
}
