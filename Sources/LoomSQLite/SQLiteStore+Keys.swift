public import LoomCore
import GRDB

extension SQLiteStore {
    /// The primary keys of the rows a query matches, in order, read without their values.
    public func fetchKeys(_ query: StoreQuery) throws(LoomError) -> [Int64] {
        let (text, arguments) = sql.selectKeys(query)
        do {
            return try pool.read { db in try Int64.fetchAll(db.cachedStatement(sql: text), arguments: arguments) }
        } catch let error as LoomError {
            throw error
        } catch {
            throw translate(error, entity: query.entity)
        }
    }
}
