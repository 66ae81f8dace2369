import Foundation
import Loom
import LoomTools

extension DemoCommand {
    /// The `loom` tool's library on the store the demo made, without the demo's model: a text
    /// query through a read-only connection, and the store verified. Prints the commands that do
    /// the same from a shell.
    static func showTools(at location: Location) throws {
        guard case .file(let url) = location else { return }   // verify and dump read SQLite files
        let store = try ReadOnlyStore(location: url.path)
        let text = #"InstalledPackage where any dependencies.targetName == "zlib1g" sort installedSizeKiB desc limit 3"#
        let query = try TextQuery(parsing: text, schema: store.schema)
        guard let name = query.entity.attributeIndex(named: "name") else {
            throw LoomError(.invalidRequest, "The store's InstalledPackage has no name attribute.", entity: "InstalledPackage")
        }
        var names: [String] = []
        try store.forEachRow(of: query) { _, values in
            if case .text(let value) = values[name] { names.append(value) }
        }
        let report = try StoreVerifier(url: url).verify()
        print("\nThe loom tool, on this store without the demo's model: `loom query` of '\(text)' gives \(names.joined(separator: ", ")); `loom verify` finds \(report.findings.isEmpty ? "no problems" : "\(report.findings.count) problems") in \(report.objectCount) objects (\(report.checkCount) checks). Try: loom inspect, query, history, dump, verify \(url.path)")
    }
}
