/// One `Name: value` field of a control-file stanza, with its continuation lines.
struct ControlField {
    /// The field name as written (`Pre-Depends`), for messages.
    var name: String
    /// The field name in lowercase, for lookup: field names are case-insensitive.
    var key: String
    /// The 1-based line of `Name: value`.
    var line: Int
    /// The text after the colon on the first line, without surrounding whitespace.
    var value: String
    /// The following lines that start with a space or tab, each without that first character
    /// and without trailing whitespace.
    var continuationLines: [String] = []
}

/// A paragraph of a control file: fields up to an empty line.
struct ControlStanza {
    /// The 1-based line of the stanza's first field.
    var line: Int
    var fields: [ControlField] = []
}

/// Splits deb822 control-file text (the format of `/var/lib/dpkg/status`) into stanzas.
///
/// Lines are scanned as UTF-8 bytes, once; strings are made only for field names and values.
/// Lines holding only whitespace separate stanzas, as empty lines do. A trailing `\r` is
/// ignored, so files with Windows line ends read the same.
enum ControlFileScanner {
    /// Calls `body` with each stanza of `text`, in order.
    ///
    /// - Throws: ``DebianPackageDatabaseError`` with code `malformedField` for a line that is
    ///   neither a field nor a continuation line, and whatever `body` throws.
    /// - Complexity: O(*n*) in the length of `text`.
    static func forEachStanza(
        in text: String, source: String, _ body: (ControlStanza) throws -> Void
    ) throws {
        var text = text
        text.makeContiguousUTF8()
        let scanned: Void? = try text.utf8.withContiguousStorageIfAvailable { bytes in
            try scan(bytes, source: source, body)
        }
        if scanned == nil {
            try Array(text.utf8).withUnsafeBufferPointer { bytes in
                try scan(bytes, source: source, body)
            }
        }
    }

    private static let newline = UInt8(ascii: "\n")
    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")
    private static let carriageReturn = UInt8(ascii: "\r")
    private static let colon = UInt8(ascii: ":")

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == space || byte == tab || byte == carriageReturn
    }

    /// Whether `byte` may be in a field name: printable US-ASCII other than the colon.
    private static func isFieldNameByte(_ byte: UInt8) -> Bool {
        byte > space && byte < 0x7F && byte != colon
    }

    private static func string(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    private static func scan(
        _ bytes: UnsafeBufferPointer<UInt8>, source: String, _ body: (ControlStanza) throws -> Void
    ) throws {
        // The fields of the stanza being read; a stanza is open while this is not empty.
        var fields: [ControlField] = []
        var stanzaLine = 0
        var lineNumber = 0
        var index = 0
        while index < bytes.count {
            lineNumber += 1
            let lineStart = index
            var lineEnd = index
            while lineEnd < bytes.count, bytes[lineEnd] != newline { lineEnd += 1 }
            index = lineEnd + 1
            while lineEnd > lineStart, isWhitespace(bytes[lineEnd - 1]) { lineEnd -= 1 }

            if lineEnd == lineStart {
                if !fields.isEmpty {
                    try body(ControlStanza(line: stanzaLine, fields: fields))
                    fields.removeAll(keepingCapacity: true)
                }
                continue
            }

            let first = bytes[lineStart]
            if first == space || first == tab {
                guard !fields.isEmpty else {
                    throw DebianPackageDatabaseError(
                        .malformedField, source: source, line: lineNumber,
                        "continuation line has no field to continue: a stanza must start with a \"Field: value\" line")
                }
                fields[fields.count - 1].continuationLines.append(string(bytes, (lineStart + 1)..<lineEnd))
                continue
            }

            var colonIndex = lineStart
            while colonIndex < lineEnd, isFieldNameByte(bytes[colonIndex]) { colonIndex += 1 }
            guard colonIndex > lineStart, colonIndex < lineEnd, bytes[colonIndex] == colon,
                first != UInt8(ascii: "-"), first != UInt8(ascii: "#")
            else {
                throw DebianPackageDatabaseError(
                    .malformedField, source: source, line: lineNumber,
                    "line is neither \"Field: value\" nor a continuation line (continuation lines start with a space or tab; field names are printable ASCII without spaces)")
            }
            var valueStart = colonIndex + 1
            while valueStart < lineEnd, isWhitespace(bytes[valueStart]) { valueStart += 1 }

            let name = string(bytes, lineStart..<colonIndex)
            if fields.isEmpty {
                stanzaLine = lineNumber
            }
            fields.append(
                ControlField(
                    name: name, key: name.lowercased(), line: lineNumber,
                    value: string(bytes, valueStart..<lineEnd)))
        }
        if !fields.isEmpty {
            try body(ControlStanza(line: stanzaLine, fields: fields))
        }
    }
}
