@_spi(LoomStore) public import LoomCore
import LoomSQL
import GRDB

extension SQLiteStore {
    /// The primary keys of the rows a query matches, in order, read without their values.
    @_spi(LoomStore) public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        let (text, arguments) = sql.selectKeys(query)
        do {
            return try readStatement(text) { statement in
                try statement.bind(arguments)
                var keys: [Int64] = []
                while try statement.step() { keys.append(statement.int64(0)) }
                return keys
            }
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: query.entity)
        }
    }
}
