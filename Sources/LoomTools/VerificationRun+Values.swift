import Foundation
@_spi(LoomStore) import LoomCore
import LoomSQLite
import GRDB

/// The value checks: every attribute value is one Loom reads back as its declared type, as a
/// fetch does (``PersistentValue``'s readings), so that a value the application would trip on
/// is found here first. The saved schema records each attribute's stored type, not its Swift
/// type: an enum's raw value is checked as a string or integer, and a `Codable` value as JSON,
/// since which cases or which shape the application expects is not in the store.
extension VerificationRun {
    /// One scan of an entity's table, in key order, over the attribute columns that exist.
    mutating func checkValues(_ entity: EntityDescription, _ db: Database) throws {
        guard has(entity) else { return }
        let present = entity.attributes.indices.filter { has(entity.name, [entity.columnName(at: $0)]) }
        guard !present.isEmpty else { return }
        let name = entity.name
        let columns = present.map { Self.quote(entity.columnName(at: $0)) }
        let sql = "SELECT Z_PK, \(columns.joined(separator: ", ")) FROM \(Self.quote(name)) ORDER BY Z_PK"
        let statement = try db.makeStatement(sql: sql)
        let rows = RawStatement(handle: statement.sqliteStatement, sql: sql)
        var found: [VerificationFinding] = [], isTruncated = false
        defer { withExtendedLifetime(statement) {} }   // `rows` reads through its handle
        scan: while try rows.step() {
            let key = rows.int64(0)
            for (n, i) in present.enumerated() {
                let column = Int32(1 + n), attribute = entity.attributes[i]
                let value = rows.column(column)
                let isUTF8 = if case .text = value { rows.nonUTF8Text(column) == nil } else { true }
                guard let problem = Self.problem(with: value, isUTF8: isUTF8, of: attribute) else { continue }
                if found.count == limit { isTruncated = true; break scan }
                found.append(VerificationFinding(kind: problem.kind, entity: name, property: attribute.name, object: uri(name, key),
                                                 message: "\(name) \(key)'s \(attribute.name) \(problem.sentence)."))
            }
        }
        add((found, isTruncated))
    }

    /// What is wrong with `value` as a value of `attribute`, as the end of a sentence that never
    /// shows the value; `nil` when Loom reads it back. `isUTF8` is whether text is valid UTF-8.
    static func problem(with value: StoredValue, isUTF8: Bool, of attribute: AttributeDescription) -> (kind: VerificationFinding.Kind, sentence: String)? {
        let type = attribute.type
        if value.isNull {
            return attribute.isOptional ? nil : (.missingRequiredValue, "is NULL, but the attribute is not optional; fetching it fails")
        }
        if case .blob(let data) = value, type == .uuid, data.count != 16 {
            return (.malformedValue, "is a blob of \(data.count) bytes, where a UUID is 16; fetching it fails")
        }
        guard type.accepts(value) else {
            return (.wrongValueType, "holds a stored \(value.kindName), which a \(type.rawValue) attribute cannot hold; fetching it fails")
        }
        if case .text = value, !isUTF8 {
            return (.malformedValue, "is text that is not valid UTF-8; Loom reads it with U+FFFD in place of the bad bytes, and a save writes that back")
        }
        switch (type, value) {
        case (.bool, .integer(let v)) where v != 0 && v != 1:
            return (.valueOutOfRange, "is an integer other than 0 and 1, which Loom reads as true and saves as 1")
        case (.integer16, .integer(let v)) where Int16(exactly: v) == nil:
            return (.valueOutOfRange, "is an integer outside Int16's range (\(Int16.min)...\(Int16.max)); reading the attribute traps")
        case (.integer32, .integer(let v)) where Int32(exactly: v) == nil:
            return (.valueOutOfRange, "is an integer outside Int32's range (\(Int32.min)...\(Int32.max)); reading the attribute traps")
        case (.float, .real(let v)) where v.isFinite && Float(v).isInfinite:
            return (.valueOutOfRange, "is a real beyond Float's range, which Loom reads as infinity")
        case (.url, _) where URL(storedValue: value) == nil:
            return (.malformedValue, "is text that is not a URL; reading the attribute traps")
        case (.decimal, _) where Decimal(storedValue: value) == nil:
            return (.malformedValue, "is text that is not a decimal number; reading the attribute traps")
        case (.codable, .blob(let data)) where (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) == nil:
            return (.malformedValue, "is not JSON, which a Codable attribute is stored as; reading the attribute traps")
        default:
            return nil
        }
    }
}
