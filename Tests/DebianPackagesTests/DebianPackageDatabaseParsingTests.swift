import DebianPackages
import Testing

@Suite("Parsing stanzas into packages")
struct DebianPackageDatabaseParsingTests {
    /// Two hand-made stanzas: the first uses every field the library interprets, plus fields it
    /// ignores; the second is minimal.
    static let fixture = """
        Package: hello-world
        Status: install ok installed
        Priority: optional
        Section: devel
        Installed-Size: 1234
        Maintainer: Jane Doe <jane@example.org>
        Architecture: amd64
        Multi-Arch: foreign
        Source: hello (2.10-3)
        Version: 2.10-3+b1
        Pre-Depends: libc6 (>= 2.34)
        Depends: libfoo1 (= 1.0-1), debconf (>= 0.5) | debconf-2.0, python3:any (>> 3.11~), perl:native
        Recommends: bar
        Suggests: baz (<< 2), qux (<= 1:1.0~rc1)
        Enhances: emacs
        Breaks: old-hello (<< 2.0)
        Conflicts: hello-traditional
        Replaces: old-hello (<< 2.0)
        Provides: hello-virtual (= 2.10-3)
        Conffiles:
         /etc/hello.conf 0123456789abcdef0123456789abcdef
        Description: friendly greeting program
         The GNU hello program produces a familiar, friendly greeting.
         .
         It allows non-programmers to use a classic computer science tool.
           verbatim line, indented
         .
         Last paragraph.
        Homepage: https://www.gnu.org/software/hello/

        Package: tiny
        Version: 1
        """

    @Test func everyInterpretedFieldIsRead() throws {
        let packages = try DebianPackageDatabase.parse(Self.fixture, source: "fixture")
        try #require(packages.count == 2)
        let hello = packages[0]
        #expect(hello.name == "hello-world")
        #expect(hello.status == "install ok installed")
        #expect(hello.isInstalled)
        #expect(hello.priority == "optional")
        #expect(hello.section == "devel")
        #expect(hello.installedSizeKiB == 1234)
        #expect(hello.maintainer == DebianMaintainer(name: "Jane Doe", email: "jane@example.org"))
        #expect(hello.architecture == "amd64")
        #expect(hello.sourcePackage == "hello")
        #expect(hello.sourceVersion == "2.10-3")
        #expect(hello.version == "2.10-3+b1")
        #expect(hello.homepage == "https://www.gnu.org/software/hello/")
        #expect(hello.summary == "friendly greeting program")
        #expect(
            hello.descriptionBody == """
                The GNU hello program produces a familiar, friendly greeting.

                It allows non-programmers to use a classic computer science tool.
                  verbatim line, indented

                Last paragraph.
                """)
    }

    @Test func relationshipFieldsAreParsedInFieldOrder() throws {
        let hello = try DebianPackageDatabase.parse(Self.fixture, source: "fixture")[0]
        #expect(hello.dependencies.map(\.kind) == [
            .preDepends, .depends, .depends, .depends, .depends, .recommends, .suggests, .suggests,
            .enhances, .breaks, .conflicts, .replaces, .provides,
        ])
        #expect(hello.dependencies(.depends) == [
            DebianDependency(.depends, alternatives: [
                DebianPackageReference(name: "libfoo1", versionConstraint: DebianVersionConstraint(.exactlyEqual, "1.0-1"))
            ]),
            DebianDependency(.depends, alternatives: [
                DebianPackageReference(name: "debconf", versionConstraint: DebianVersionConstraint(.laterOrEqual, "0.5")),
                DebianPackageReference(name: "debconf-2.0"),
            ]),
            DebianDependency(.depends, alternatives: [
                DebianPackageReference(
                    name: "python3", architecture: "any",
                    versionConstraint: DebianVersionConstraint(.strictlyLater, "3.11~"))
            ]),
            DebianDependency(.depends, alternatives: [DebianPackageReference(name: "perl", architecture: "native")]),
        ])
        #expect(hello.dependencies(.suggests).map(\.description) == ["baz (<< 2)", "qux (<= 1:1.0~rc1)"])
        #expect(hello.dependencies(.suggests)[0].alternatives[0].versionConstraint?.relation == .strictlyEarlier)
        #expect(hello.dependencies(.preDepends).map(\.description) == ["libc6 (>= 2.34)"])
        #expect(hello.dependencies(.provides).map(\.description) == ["hello-virtual (= 2.10-3)"])
    }

    @Test func absentFieldsAreNil() throws {
        let tiny = try DebianPackageDatabase.parse(Self.fixture, source: "fixture")[1]
        #expect(tiny == DebianPackage(name: "tiny", version: "1"))
        #expect(tiny.summary == nil)
        #expect(tiny.descriptionBody == "")
        #expect(!tiny.isInstalled)
    }

    @Test(arguments: ["", "\n", "\n\n  \n\t\n"])
    func textWithoutStanzasHasNoPackages(text: String) throws {
        #expect(try DebianPackageDatabase.parse(text, source: "empty").isEmpty)
    }

    @Test func stanzasMayBeSeparatedBySeveralOrWhitespaceOnlyLines() throws {
        let text = "\n\nPackage: a\n\n\n \t\nPackage: b\n  \nPackage: c"
        #expect(try DebianPackageDatabase.parse(text, source: "t").map(\.name) == ["a", "b", "c"])
    }

    @Test func windowsLineEndsAreAccepted() throws {
        let text = "Package: a\r\nVersion: 1.0\r\nDescription: short\r\n body\r\n .\r\n end\r\n\r\nPackage: b\r\n"
        let packages = try DebianPackageDatabase.parse(text, source: "crlf")
        #expect(packages.map(\.name) == ["a", "b"])
        #expect(packages[0].version == "1.0")
        #expect(packages[0].descriptionBody == "body\n\nend")
    }

    @Test func fieldNamesAreCaseInsensitiveAndValuesTrimmed() throws {
        let text = "PACKAGE:   spaced  \ninstalled-size:\t42\nversion:1.0"
        let package = try #require(try DebianPackageDatabase.parse(text, source: "t").first)
        #expect(package.name == "spaced")
        #expect(package.installedSizeKiB == 42)
        #expect(package.version == "1.0")
    }

    @Test func emptyValuesAreTreatedAsAbsent() throws {
        let text = "Package: a\nVersion:\nDepends:\nInstalled-Size: \nDescription:\n"
        let package = try #require(try DebianPackageDatabase.parse(text, source: "t").first)
        #expect(package == DebianPackage(name: "a"))
    }

    @Test func foldedRelationshipFieldsAreJoined() throws {
        let text = "Package: a\nDepends: b,\n c (>= 1),\n\td | e\n"
        let package = try #require(try DebianPackageDatabase.parse(text, source: "t").first)
        #expect(package.dependencies.map(\.description) == ["b", "c (>= 1)", "d | e"])
    }

    @Test func descriptionContinuationMayStartWithATab() throws {
        let text = "Package: a\nDescription: one\n\ttwo\n \t.three\n"
        let package = try #require(try DebianPackageDatabase.parse(text, source: "t").first)
        #expect(package.descriptionBody == "two\n\t.three")
    }

    @Test func sourceWithoutVersionHasNilSourceVersion() throws {
        let package = try #require(try DebianPackageDatabase.parse("Package: a\nSource: b", source: "t").first)
        #expect(package.sourcePackage == "b")
        #expect(package.sourceVersion == nil)
    }

    @Test func statusOtherThanInstalledIsNotInstalled() throws {
        let package = try #require(
            try DebianPackageDatabase.parse("Package: a\nStatus: deinstall ok config-files", source: "t").first)
        #expect(!package.isInstalled)
    }
}
