package import Foundation

/// Reads the package database dpkg keeps at `/var/lib/dpkg/status`, or a file of the same
/// format.
///
/// The file is a list of stanzas separated by empty lines, each a list of `Field: value`
/// lines; a value continues on following lines that start with a space:
///
/// ```text
/// Package: adduser
/// Status: install ok installed
/// Version: 3.134
/// Depends: passwd
/// Description: add and remove users and groups
///  This package includes the 'adduser' and 'deluser' commands …
/// ```
///
/// Every function is synchronous and may be called from any isolation; run it off the main
/// actor for large files.
///
/// ```swift
/// let (packages, source) = try DebianPackageDatabase.loadSystemOrSample()
/// print("\(packages.count) packages from \(source)")
/// ```
package enum DebianPackageDatabase {
    /// Where dpkg keeps its database on Debian and derived systems.
    package static let systemPath = "/var/lib/dpkg/status"

    /// The source name of the sample database bundled with this library, as returned by
    /// ``loadSystemOrSample()`` and used in errors about the sample.
    package static let bundledSampleName = "status-sample"

    /// Parses the text of a status database into packages, in file order.
    ///
    /// ```swift
    /// let packages = try DebianPackageDatabase.parse("Package: hello\nVersion: 2.10-3\n", source: "inline")
    /// ```
    ///
    /// Text with no stanzas (empty, or only empty lines) gives no packages.
    ///
    /// - Parameters:
    ///   - text: The whole database.
    ///   - source: A name for `text` used in error messages, such as a file name.
    /// - Throws: ``DebianPackageDatabaseError`` with code `malformedField`,
    ///   `missingPackageName` or `malformedDependency`, and the line at fault.
    /// - Complexity: O(*n*) in the length of `text`: one pass over its UTF-8 bytes.
    package static func parse(_ text: String, source: String) throws -> [DebianPackage] {
        var packages: [DebianPackage] = []
        try ControlFileScanner.forEachStanza(in: text, source: source) { stanza in
            packages.append(try DebianPackage(stanza: stanza, source: source))
        }
        return packages
    }

    /// Parses a status database given as UTF-8 bytes.
    ///
    /// - Parameters:
    ///   - data: The whole database, UTF-8 encoded.
    ///   - source: A name for `data` used in error messages, such as a file name.
    /// - Throws: ``DebianPackageDatabaseError`` with code `invalidUTF8` and the first line
    ///   that is not valid UTF-8, or the errors parsing text throws.
    package static func parse(_ data: Data, source: String) throws -> [DebianPackage] {
        guard let text = String(validating: data, as: UTF8.self) else {
            throw DebianPackageDatabaseError(
                .invalidUTF8, source: source, line: firstLineNotValidUTF8(in: data),
                "line is not valid UTF-8 text; convert the file to UTF-8")
        }
        return try parse(text, source: source)
    }

    /// Reads and parses a status database file.
    ///
    /// ```swift
    /// let packages = try DebianPackageDatabase.load(contentsOf: URL(filePath: "/var/lib/dpkg/status"))
    /// ```
    ///
    /// Errors name the file by its path.
    ///
    /// - Parameter url: A file URL.
    /// - Throws: ``DebianPackageDatabaseError`` with code `unreadable` (and the file system's
    ///   error as `underlying`) when the file cannot be read, or the errors parsing data
    ///   throws.
    package static func load(contentsOf url: URL) throws -> [DebianPackage] {
        let source = url.isFileURL ? url.path(percentEncoded: false) : url.absoluteString
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw DebianPackageDatabaseError(
                .unreadable, source: source, line: nil,
                "cannot read the file; check that it exists and is readable", underlying: error)
        }
        return try parse(data, source: source)
    }

    /// Parses the sample database bundled with this library: the first 250 packages of a
    /// Debian 12 system's `/var/lib/dpkg/status`.
    ///
    /// Errors name the sample ``bundledSampleName``.
    ///
    /// - Throws: ``DebianPackageDatabaseError`` with code `unreadable` if the resource bundle
    ///   lacks the sample, which means the package is built without its resources.
    package static func bundledSample() throws -> [DebianPackage] {
        guard let url = Bundle.module.url(forResource: bundledSampleName, withExtension: nil) else {
            throw DebianPackageDatabaseError(
                .unreadable, source: bundledSampleName, line: nil,
                "the resource is missing from the DebianPackages bundle; check that Package.swift copies Resources/\(bundledSampleName)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw DebianPackageDatabaseError(
                .unreadable, source: bundledSampleName, line: nil,
                "cannot read the bundled resource", underlying: error)
        }
        return try parse(data, source: bundledSampleName)
    }

    /// Parses this system's database when it can be read, and the bundled sample otherwise.
    ///
    /// ```swift
    /// let (packages, source) = try DebianPackageDatabase.loadSystemOrSample()
    /// // source is "/var/lib/dpkg/status", or "status-sample" on a system without dpkg
    /// ```
    ///
    /// Only a file that cannot be read falls back to the sample: a system database that
    /// is readable but malformed throws, so that the problem is seen.
    ///
    /// - Returns: The packages, and ``systemPath`` or ``bundledSampleName`` to say which was
    ///   read.
    /// - Throws: ``DebianPackageDatabaseError`` from ``load(contentsOf:)`` or
    ///   ``bundledSample()``.
    package static func loadSystemOrSample() throws -> (packages: [DebianPackage], source: String) {
        do {
            return (try load(contentsOf: URL(filePath: systemPath)), systemPath)
        } catch DebianPackageDatabaseError.Code.unreadable {
            return (try bundledSample(), bundledSampleName)
        }
    }

    /// The 1-based number of the first line that is not valid UTF-8 in `data`, which is
    /// known to hold some invalid UTF-8.
    ///
    /// UTF-8 never uses the newline byte inside a multi-byte character, so each line can be
    /// checked on its own.
    private static func firstLineNotValidUTF8(in data: Data) -> Int? {
        var lineNumber = 0
        for line in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            if String(validating: line, as: UTF8.self) == nil {
                return lineNumber
            }
        }
        return nil
    }
}
