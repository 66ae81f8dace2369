/// Why a relationship field could not be parsed; the caller adds the source and line.
struct RelationshipSyntaxError: Error {
    var message: String
}

extension DebianDependency {
    /// Parses the value of a relationship field, such as
    /// `libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0, python3:any`.
    ///
    /// Entries are separated by commas, alternatives by `|`. Each alternative is a package name,
    /// an optional `:architecture` qualifier, and an optional `(relation version)`. Whitespace
    /// between these parts is optional. Architecture restrictions (`[amd64]`) and build
    /// profiles (`<!nocheck>`) belong to source packages and are rejected.
    ///
    /// - Throws: ``RelationshipSyntaxError`` naming the entry and alternative at fault.
    /// - Complexity: O(*n*) in the length of `text`.
    static func parseList(_ text: String, kind: Kind) throws(RelationshipSyntaxError) -> [DebianDependency] {
        let bytes = Array(text.utf8)
        var dependencies: [DebianDependency] = []
        let entries = bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
        for (entryOffset, entry) in entries.enumerated() {
            let alternatives = entry.split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
            var references: [DebianPackageReference] = []
            references.reserveCapacity(alternatives.count)
            for (alternativeOffset, alternative) in alternatives.enumerated() {
                references.append(
                    try parseReference(alternative) { problem in
                        var position = "\(kind.fieldName) entry \(entryOffset + 1)"
                        if alternatives.count > 1 { position += ", alternative \(alternativeOffset + 1)," }
                        return RelationshipSyntaxError(message: "\(position) \(problem)")
                    })
            }
            dependencies.append(DebianDependency(kind, alternatives: references))
        }
        return dependencies
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
            || byte == UInt8(ascii: "\n")
    }

    /// Whether `byte` may be in a package or architecture name: letters, digits, `+`, `-`, `.`.
    ///
    /// Debian Policy allows only lowercase letters; uppercase is accepted here as dpkg once did.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    private static func isRelationByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "<") || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "=")
    }

    private static func relation(_ bytes: ArraySlice<UInt8>) -> DebianVersionConstraint.Relation? {
        switch String(decoding: bytes, as: UTF8.self) {
        case "<<": .strictlyEarlier
        case "<=", "<": .earlierOrEqual
        case "=": .exactlyEqual
        case ">=", ">": .laterOrEqual
        case ">>": .strictlyLater
        default: nil
        }
    }

    /// Parses `name[:arch] [(relation version)]`, surrounded by optional whitespace.
    ///
    /// `fail` makes the error for a problem, naming where the alternative is.
    private static func parseReference(
        _ bytes: ArraySlice<UInt8>, fail: (String) -> RelationshipSyntaxError
    ) throws(RelationshipSyntaxError) -> DebianPackageReference {
        var index = bytes.startIndex
        let end = bytes.endIndex
        func skipWhitespace() {
            while index < end, isWhitespace(bytes[index]) { index += 1 }
        }

        skipWhitespace()
        if index == end {
            throw fail("is empty; remove the extra \",\" or \"|\"")
        }
        let nameStart = index
        while index < end, isNameByte(bytes[index]) { index += 1 }
        guard index > nameStart else {
            throw fail("does not start with a package name (letters, digits, \"+\", \"-\" or \".\")")
        }
        var reference = DebianPackageReference(name: String(decoding: bytes[nameStart..<index], as: UTF8.self))

        if index < end, bytes[index] == UInt8(ascii: ":") {
            index += 1
            let architectureStart = index
            while index < end, isNameByte(bytes[index]) { index += 1 }
            guard index > architectureStart else {
                throw fail("has a \":\" not followed by an architecture name (such as \"any\")")
            }
            reference.architecture = String(decoding: bytes[architectureStart..<index], as: UTF8.self)
        }

        skipWhitespace()
        if index < end, bytes[index] == UInt8(ascii: "(") {
            index += 1
            skipWhitespace()
            let relationStart = index
            while index < end, isRelationByte(bytes[index]) { index += 1 }
            guard let relation = relation(bytes[relationStart..<index]) else {
                throw fail("has a version constraint without a valid relation; use <<, <=, =, >= or >>")
            }
            skipWhitespace()
            let versionStart = index
            while index < end, bytes[index] != UInt8(ascii: ")"), !isWhitespace(bytes[index]),
                bytes[index] != UInt8(ascii: "(")
            {
                index += 1
            }
            guard index > versionStart else {
                throw fail("has a version constraint without a version")
            }
            let version = String(decoding: bytes[versionStart..<index], as: UTF8.self)
            skipWhitespace()
            guard index < end, bytes[index] == UInt8(ascii: ")") else {
                throw fail("has a version constraint without its closing \")\"")
            }
            index += 1
            reference.versionConstraint = DebianVersionConstraint(relation, version)
            skipWhitespace()
        }

        guard index == end else {
            throw fail("has unexpected text after the package name and version constraint")
        }
        return reference
    }
}
