import DebianPackages
import Testing

@Suite("Parsing relationship fields")
struct DebianDependencyParsingTests {
    private func dependencies(_ value: String, field: String = "Depends") throws -> [DebianDependency] {
        try #require(try DebianPackageDatabase.parse("Package: p\n\(field): \(value)\n", source: "t").first)
            .dependencies
    }

    @Test func everyRelationIsRecognized() throws {
        let parsed = try dependencies("a (<< 1), b (<= 1), c (= 1), d (>= 1), e (>> 1)")
        #expect(parsed.map { $0.alternatives[0].versionConstraint?.relation } == [
            .strictlyEarlier, .earlierOrEqual, .exactlyEqual, .laterOrEqual, .strictlyLater,
        ])
    }

    @Test func obsoleteRelationsReadAsDpkgDoes() throws {
        let parsed = try dependencies("a (< 1), b (> 2)")
        #expect(parsed.map(\.description) == ["a (<= 1)", "b (>= 2)"])
    }

    @Test func whitespaceAroundPartsIsOptional() throws {
        let parsed = try dependencies("a(>=1.0)|b:any(<<2) ,c ( = 3 )")
        #expect(parsed.map(\.description) == ["a (>= 1.0) | b:any (<< 2)", "c (= 3)"])
    }

    @Test func everyKindIsReadFromItsField() throws {
        for kind in DebianDependency.Kind.allCases {
            #expect(try dependencies("x", field: kind.fieldName) == [
                DebianDependency(kind, alternatives: [DebianPackageReference(name: "x")])
            ])
        }
    }

    @Test func descriptionRoundTrips() throws {
        let text = "libc6 (>= 2.34), debconf (>= 0.5) | debconf-2.0, python3:any, perl:native (= 5.36.0-7)"
        let parsed = try dependencies(text)
        #expect(parsed.map(\.description).joined(separator: ", ") == text)
    }
}
