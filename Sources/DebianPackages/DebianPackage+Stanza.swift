extension DebianPackage {
    /// The relationship fields this library parses, by lowercased field name.
    private static let dependencyKinds: [String: DebianDependency.Kind] = Dictionary(
        uniqueKeysWithValues: DebianDependency.Kind.allCases.map { ($0.fieldName.lowercased(), $0) })

    /// Interprets one stanza of a status database.
    ///
    /// Fields not modelled by ``DebianPackage`` are ignored. A field with an empty value is
    /// treated as absent, except `Package`.
    ///
    /// - Throws: ``DebianPackageDatabaseError`` with the line of the field at fault.
    init(stanza: ControlStanza, source: String) throws(DebianPackageDatabaseError) {
        func error(_ code: DebianPackageDatabaseError.Code, line: Int, _ message: String)
            -> DebianPackageDatabaseError
        {
            DebianPackageDatabaseError(code, source: source, line: line, message)
        }
        /// The value of a field that must fit on one line; `nil` when empty.
        func singleLine(_ field: ControlField) throws(DebianPackageDatabaseError) -> String? {
            guard field.continuationLines.isEmpty else {
                throw error(
                    .malformedField, line: field.line + 1,
                    "field \"\(field.name)\" continues on this line, but its value must fit on one line")
            }
            return field.value.isEmpty ? nil : field.value
        }

        var name: String?
        self.init(name: "")
        var seenKeys = Set<String>(minimumCapacity: stanza.fields.count)
        var dependenciesByKind: [DebianDependency.Kind: [DebianDependency]] = [:]

        for field in stanza.fields {
            guard seenKeys.insert(field.key).inserted else {
                throw error(
                    .malformedField, line: field.line,
                    "field \"\(field.name)\" appears a second time in this stanza; a stanza holds each field once")
            }
            switch field.key {
            case "package":
                guard let value = try singleLine(field) else {
                    throw error(.missingPackageName, line: field.line, "field \"Package\" is empty; give the package's name")
                }
                name = value
            case "version": version = try singleLine(field)
            case "architecture": architecture = try singleLine(field)
            case "status": status = try singleLine(field)
            case "priority": priority = try singleLine(field)
            case "section": section = try singleLine(field)
            case "homepage": homepage = try singleLine(field)
            case "maintainer": maintainer = try singleLine(field).map(DebianMaintainer.init(parsing:))
            case "installed-size":
                guard let value = try singleLine(field) else { continue }
                guard let size = Int(value), size >= 0 else {
                    throw error(
                        .malformedField, line: field.line,
                        "field \"\(field.name)\" is not a whole number of KiB")
                }
                installedSizeKiB = size
            case "source":
                guard let value = try singleLine(field) else { continue }
                guard let (package, version) = Self.parseSource(value) else {
                    throw error(
                        .malformedField, line: field.line,
                        "field \"\(field.name)\" is not a package name optionally followed by a version in parentheses")
                }
                sourcePackage = package
                sourceVersion = version
            case "description":
                summary = field.value.isEmpty ? nil : field.value
                descriptionBody = field.continuationLines
                    .lazy.map { $0 == "." ? "" : $0 }
                    .joined(separator: "\n")
            default:
                guard let kind = Self.dependencyKinds[field.key] else { continue }
                // Relationship fields may be folded over several lines.
                let value =
                    field.continuationLines.isEmpty
                    ? field.value : ([field.value] + field.continuationLines).joined(separator: " ")
                guard !value.allSatisfy(\.isControlFileWhitespace) else { continue }
                do {
                    dependenciesByKind[kind] = try DebianDependency.parseList(value, kind: kind)
                } catch {
                    throw DebianPackageDatabaseError(
                        .malformedDependency, source: source, line: field.line, error.message)
                }
            }
        }

        guard let name else {
            throw error(
                .missingPackageName, line: stanza.line,
                "the stanza starting on this line has no \"Package\" field; every stanza must name its package")
        }
        self.name = name
        dependencies = DebianDependency.Kind.allCases.flatMap { dependenciesByKind[$0] ?? [] }
    }

    /// Splits a `Source` value, `name` or `name (version)`; `nil` when it is neither.
    private static func parseSource(_ value: String) -> (String, String?)? {
        guard let open = value.firstIndex(of: "(") else {
            return value.contains(where: \.isControlFileWhitespace) ? nil : (value, nil)
        }
        let package = value[..<open].trimmingWhitespace()
        let rest = value[value.index(after: open)...]
        guard !package.isEmpty, !package.contains(where: \.isControlFileWhitespace),
            rest.hasSuffix(")")
        else { return nil }
        let version = rest.dropLast().trimmingWhitespace()
        guard !version.isEmpty, !version.contains(where: { $0.isControlFileWhitespace || $0 == "(" }) else {
            return nil
        }
        return (String(package), String(version))
    }
}
