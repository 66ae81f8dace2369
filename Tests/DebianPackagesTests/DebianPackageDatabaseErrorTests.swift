import DebianPackages
import Foundation
import Testing

@Suite("Errors in status databases")
struct DebianPackageDatabaseErrorTests {
    private func parseError(_ text: String) throws -> DebianPackageDatabaseError {
        try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.parse(text, source: "status")
        }
    }

    @Test func lineThatIsNotAFieldIsReportedWithItsLine() throws {
        let error = try parseError("Package: a\nVersion: 1\n\nPackage: b\nVersion 2\n")
        #expect(error.code == .malformedField)
        #expect(error.source == "status")
        #expect(error.line == 5)
        #expect(
            error.description
                == "status:5: line is neither \"Field: value\" nor a continuation line (continuation lines start with a space or tab; field names are printable ASCII without spaces)"
        )
    }

    @Test(arguments: [": no name", "-Dash: x", "#comment: x", "Two words: x", "Naïve: x"])
    func invalidFieldNamesAreMalformed(line: String) throws {
        let error = try parseError("Package: a\n\(line)\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 2)
    }

    @Test func continuationLineBeforeAnyFieldIsMalformed() throws {
        let error = try parseError("Package: a\n\n continued\nPackage: b\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 3)
        #expect(error.description.hasPrefix("status:3: continuation line has no field to continue"))
    }

    @Test func stanzaWithoutPackageIsReportedAtItsFirstLine() throws {
        let error = try parseError("Package: a\n\n\nVersion: 1\nStatus: install ok installed\n")
        #expect(error.code == .missingPackageName)
        #expect(error.line == 4)
        #expect(error.description.hasPrefix("status:4: the stanza starting on this line has no \"Package\" field"))
    }

    @Test func emptyPackageIsReportedAtItsField() throws {
        let error = try parseError("Version: 1\nPackage:\n")
        #expect(error.code == .missingPackageName)
        #expect(error.line == 2)
    }

    @Test func nonNumericInstalledSizeIsMalformed() throws {
        let error = try parseError("Package: a\nInstalled-Size: 12 KiB\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 2)
        #expect(error.message == "field \"Installed-Size\" is not a whole number of KiB")
    }

    @Test func repeatedFieldIsMalformedWhateverItsCase() throws {
        let error = try parseError("Package: a\nVersion: 1\nversion: 2\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 3)
        #expect(error.message.contains("\"version\" appears a second time"))
    }

    @Test func singleLineFieldWithContinuationIsMalformedAtTheContinuation() throws {
        let error = try parseError("Package: a\nVersion: 1\n 2\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 3)
    }

    @Test(arguments: ["b (1.0", "b (1.0) x", "two words", "(1.0)"])
    func malformedSourceIsMalformed(value: String) throws {
        let error = try parseError("Package: a\nSource: \(value)\n")
        #expect(error.code == .malformedField)
        #expect(error.line == 2)
    }

    @Test(arguments: [
        ("b (>= 1.0", "Depends entry 1 has a version constraint without its closing \")\""),
        ("b (=> 1.0)", "Depends entry 1 has a version constraint without a valid relation; use <<, <=, =, >= or >>"),
        ("b (>= )", "Depends entry 1 has a version constraint without a version"),
        ("b (1.0)", "Depends entry 1 has a version constraint without a valid relation; use <<, <=, =, >= or >>"),
        ("b, , c", "Depends entry 2 is empty; remove the extra \",\" or \"|\""),
        ("b, c,", "Depends entry 3 is empty; remove the extra \",\" or \"|\""),
        ("b | c |", "Depends entry 1, alternative 3, is empty; remove the extra \",\" or \"|\""),
        ("b [amd64]", "Depends entry 1 has unexpected text after the package name and version constraint"),
        ("b c", "Depends entry 1 has unexpected text after the package name and version constraint"),
        ("b:", "Depends entry 1 has a \":\" not followed by an architecture name (such as \"any\")"),
        ("(>= 1)", "Depends entry 1 does not start with a package name (letters, digits, \"+\", \"-\" or \".\")"),
        ("b (>= 1) (<< 2)", "Depends entry 1 has unexpected text after the package name and version constraint"),
    ])
    func malformedDependencyIsReportedAtItsField(value: String, message: String) throws {
        let error = try parseError("Package: a\nVersion: 1\nDepends: \(value)\n")
        #expect(error.code == .malformedDependency)
        #expect(error.line == 3)
        #expect(error.message == message)
    }

    @Test func codesMatchAsCatchPatterns() throws {
        do {
            _ = try DebianPackageDatabase.parse("Version: 1\n", source: "status")
            Issue.record("parsing a stanza without Package should throw")
        } catch DebianPackageDatabaseError.Code.malformedField {
            Issue.record("wrong code matched")
        } catch DebianPackageDatabaseError.Code.missingPackageName {
            // expected
        }
    }

    @Test func invalidUTF8IsAnErrorWithItsLine() throws {
        var data = Data("Package: a\nVersion: 1\n\nPackage: b\nMaintainer: Jos".utf8)
        data.append(contentsOf: [0xC3, 0x28])  // a lead byte followed by a non-continuation byte
        data.append(contentsOf: Array("\nVersion: 2\n".utf8))
        let error = try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.parse(data, source: "status")
        }
        #expect(error.code == .invalidUTF8)
        #expect(error.line == 5)
        #expect(error.description == "status:5: line is not valid UTF-8 text; convert the file to UTF-8")
    }

    @Test(arguments: [[0xFF] as [UInt8], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xC0, 0x80]])
    func everyKindOfInvalidUTF8IsRejected(bytes: [UInt8]) throws {
        let data = Data("Package: a\nDescription: x".utf8) + Data(bytes)
        let error = try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.parse(data, source: "status")
        }
        #expect(error.code == .invalidUTF8)
        #expect(error.line == 2)
    }

    @Test func validUTF8DataParses() throws {
        let data = Data("Package: a\nMaintainer: José Müller <jose@example.org>\n".utf8)
        let package = try #require(try DebianPackageDatabase.parse(data, source: "status").first)
        #expect(package.maintainer?.name == "José Müller")
    }

    @Test func missingFileIsUnreadable() throws {
        let url = FileManager.default.temporaryDirectory.appending(path: "no-such-dpkg-status-\(UUID())")
        let error = try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.load(contentsOf: url)
        }
        #expect(error.code == .unreadable)
        #expect(error.line == nil)
        #expect(error.source == url.path(percentEncoded: false))
        #expect(error.underlying != nil)
        #expect(error.description.hasPrefix("\(url.path(percentEncoded: false)): cannot read the file"))
    }

    @Test func directoryIsUnreadable() throws {
        let error = try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.load(contentsOf: FileManager.default.temporaryDirectory)
        }
        #expect(error.code == .unreadable)
    }
}
