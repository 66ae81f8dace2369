package import Foundation
@_spi(LoomStore) package import LoomCore

/// How `loom query` prints the objects a query matched.
package enum QueryOutputFormat: String, Sendable, CaseIterable {
    /// An aligned text table with a header; the whole result is read before the first line.
    case table
    /// One JSON array of objects.
    case json
    /// One JSON object per line, written as each object is read.
    case ndjson
    /// Comma-separated values with a header line, quoted as RFC 4180 says (CRLF line ends).
    case csv
}

/// Writes the objects of one entity in a ``QueryOutputFormat``.
///
/// The columns are `uri` (the object's URI, `loom://<store>/<Entity>/<key>`), then every
/// attribute, then every to-one relationship (the related object's URI, or null). In JSON, an
/// object is `{"uri": …, "<attribute>": …, "<relationship>": …}` in that order, with values
/// encoded as follows:
///
/// | Attribute type          | JSON                                                 |
/// |-------------------------|------------------------------------------------------|
/// | bool                    | `true` / `false`                                     |
/// | integers, double, float | a number (a non-finite double: the string `"inf"`, `"-inf"`, `"nan"`) |
/// | string, url             | a string                                             |
/// | date                    | an ISO-8601 string in UTC with milliseconds: `"2024-05-01T12:30:00.000Z"` |
/// | uuid                    | its text: `"E621E1F8-C36C-495A-93FC-0C247A3E6E5F"`   |
/// | decimal                 | a string holding every digit: `"12.50"`              |
/// | binary                  | a base64 string                                      |
/// | codable                 | the JSON value stored                                |
/// | to-one relationship     | the related object's URI                             |
///
/// A nil value is `null` in JSON, an empty field in CSV and `nil` in the table. CSV and the table
/// write the same text as JSON without the quotes. Data shown is the data stored: use the output
/// with the same care as the store.
///
/// Not `Sendable`: one printer writes one result, on one thread.
package struct QueryPrinter {
    package let format: QueryOutputFormat
    /// The column names, `uri` first.
    package let columns: [String]
    private let entity: EntityDescription
    private let relationships: [ResolvedRelationship]
    private let storeIdentifier: UUID
    /// Where the text goes, through a buffer (the dump's: the same buffering and JSON escaping).
    private var out: BufferedOutput
    private let dates = ISO8601DateFormatter()
    private var tableRows: [[String]] = []
    private var count = 0

    /// A printer for objects of `entity`, writing to the file descriptor `output` (standard
    /// output by default) through a buffer; ``finish()`` writes what is left.
    package init(format: QueryOutputFormat, entity: EntityDescription, schema: Schema, storeIdentifier: UUID, output: Int32 = 1) {
        self.format = format
        self.entity = entity
        self.relationships = schema.relationships(of: entity).filter { $0.description.kind == .toOne }
        self.storeIdentifier = storeIdentifier
        self.out = BufferedOutput(descriptor: output)
        self.columns = ["uri"] + entity.attributes.map(\.name) + relationships.map(\.description.name)
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if format == .csv { out.append(raw: columns.map(Self.csvField).joined(separator: ",") + "\r\n") }
        if format == .json { out.append("[") }
    }

    /// One value of an object, typed for JSON.
    enum Cell: Equatable {
        case null
        case text(String)
        /// A JSON number or literal, written as is.
        case raw(String)
    }

    /// Writes one object: its key and its stored values (one per slot).
    ///
    /// - Throws: ``LoomToolError`` when the output cannot be written.
    package mutating func add(key: Int64, values: [StoredValue]) throws(LoomToolError) {
        let cells = [Cell.text(uri(entity, key))] + entity.attributes.indices.map { cell(values[$0], entity.attributes[$0].type) }
            + relationships.map { r -> Cell in
                guard let slot = entity.storedValueIndex(ofRelationship: r.index), case .integer(let target) = values[slot] else { return .null }
                return .text(uri(r.destination, target))
            }
        switch format {
        case .table:
            tableRows.append(cells.map { Self.plain($0, null: "nil").replacingOccurrences(of: "\n", with: "\\n") })
        case .csv:
            out.append(raw: cells.map { Self.csvField(Self.plain($0, null: "")) }.joined(separator: ",") + "\r\n")
        case .json:
            out.append(count == 0 ? "\n  " : ",\n  ")
            writeJSONObject(cells)
        case .ndjson:
            writeJSONObject(cells)
            out.append(UInt8(ascii: "\n"))
        }
        count += 1
        try out.flushIfFull()
    }

    /// Ends the output: the table is written now, the JSON array closed, the buffer written out.
    ///
    /// - Throws: ``LoomToolError`` when the output cannot be written.
    package mutating func finish() throws(LoomToolError) {
        switch format {
        case .table:
            let all = [columns] + tableRows
            let widths = columns.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
            func line(_ row: [String]) -> String {
                var text = zip(row, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }.joined(separator: "  ")
                while text.last == " " { text.removeLast() }
                return text + "\n"
            }
            out.append(raw: line(columns))
            out.append(raw: line(widths.map { String(repeating: "-", count: $0) }))
            for row in tableRows {
                out.append(raw: line(row))
                try out.flushIfFull()
            }
            out.append(raw: "(\(count) \(count == 1 ? "object" : "objects"))\n")
        case .json:
            out.append(count == 0 ? "]\n" : "\n]\n")
        case .csv, .ndjson:
            break
        }
        try out.flush()
    }

    func uri(_ entity: EntityDescription, _ key: Int64) -> String {
        AnyObjectID(storeIdentifier: storeIdentifier, entityName: entity.name, primaryKey: key).uriRepresentation.absoluteString
    }

    /// A stored value as its attribute type shows it.
    func cell(_ value: StoredValue, _ type: AttributeType) -> Cell {
        switch (type, value) {
        case (_, .null): return .null
        case (.bool, .integer(let v)): return .raw(v == 0 ? "false" : "true")
        case (.date, _):
            guard let date = Date(storedValue: value) else { break }
            return .text(dates.string(from: date))
        case (.uuid, _):
            guard let uuid = UUID(storedValue: value) else { break }
            return .text(uuid.uuidString)
        case (.codable, .blob(let data)):
            if let text = String(data: data, encoding: .utf8), (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) != nil {
                return .raw(text)
            }
        default: break
        }
        switch value {
        case .null: return .null
        case .integer(let v): return .raw(String(v))
        case .real(let v): return v.isFinite ? .raw(String(v)) : .text(v.isNaN ? "nan" : v < 0 ? "-inf" : "inf")
        case .text(let s): return .text(s)
        case .blob(let d): return .text(d.base64EncodedString())
        }
    }

    static func plain(_ cell: Cell, null: String) -> String {
        switch cell {
        case .null: null
        case .text(let s), .raw(let s): s
        }
    }

    /// Writes one object as JSON: `{"<column>": value, …}`.
    private mutating func writeJSONObject(_ cells: [Cell]) {
        out.append("{")
        for (i, (name, cell)) in zip(columns, cells).enumerated() {
            if i > 0 { out.append(",") }
            out.appendJSONString(name)
            out.append(":")
            switch cell {
            case .null: out.append("null")
            case .raw(let s): out.append(raw: s)
            case .text(let s): out.appendJSONString(s)
            }
        }
        out.append("}")
    }

    /// A CSV field, quoted when it holds a comma, a quote or a line end (RFC 4180).
    static func csvField(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
