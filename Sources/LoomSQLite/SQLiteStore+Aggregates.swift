@_spi(LoomStore) public import LoomCore
import LoomSQL
import GRDB

extension SQLiteStore {
    /// Runs a values or aggregate query as one SQL statement (see ``AggregateQuery``).
    ///
    /// - Throws: ``LoomError/Code/integerOverflow`` when an integer sum overflows,
    ///   ``LoomError/Code/storeFailure`` when the store cannot be read.
    @_spi(LoomStore) public func aggregate(_ query: AggregateQuery) throws(LoomError) -> [[StoredValue]] {
        let (text, arguments) = sql.aggregate(query)
        let width = query.columns.count
        do {
            return try readStatement(text) { statement in
                try statement.bind(arguments)
                var rows: [[StoredValue]] = []
                while try statement.step() {
                    rows.append((0..<Int32(width)).map(statement.column))
                }
                return rows
            }
        } catch let error as DatabaseError where error.message == "integer overflow" {
            throw LoomError(.integerOverflow, "A sum over \(query.entity.name) does not fit in a 64-bit integer (SQLite: integer overflow); narrow the predicate, or sum a Double attribute.",
                            entity: query.entity.name, underlying: error, storeCode: SQLiteStore.storeCode(of: error))
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: query.entity)
        }
    }
}
