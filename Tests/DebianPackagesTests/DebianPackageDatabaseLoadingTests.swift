import DebianPackages
import Foundation
import Testing

@Suite("Loading the bundled sample and the system database")
struct DebianPackageDatabaseLoadingTests {
    private static let systemDatabaseIsReadable = FileManager.default.isReadableFile(
        atPath: DebianPackageDatabase.systemPath)

    @Test func bundledSampleHasRealPackagesWithDependencies() throws {
        let packages = try DebianPackageDatabase.bundledSample()
        #expect(packages.count > 200)
        #expect(packages.contains { !$0.dependencies.isEmpty })
        #expect(packages.contains { $0.dependencies.contains { $0.alternatives.count > 1 } })
        #expect(packages.allSatisfy { !$0.name.isEmpty && $0.version != nil && $0.summary != nil })
        let adduser = try #require(packages.first { $0.name == "adduser" })
        #expect(adduser.maintainer?.email == "adduser@packages.debian.org")
        #expect(adduser.dependencies(.depends).map(\.description) == ["passwd"])
        #expect(adduser.descriptionBody.contains("\n\n"))
    }

    @Test func bundledSampleDependenciesRoundTripThroughTheirDescription() throws {
        for package in try DebianPackageDatabase.bundledSample() {
            for kind in DebianDependency.Kind.allCases {
                let written = package.dependencies(kind).map(\.description).joined(separator: ", ")
                guard !written.isEmpty else { continue }
                let reparsed = try DebianPackageDatabase.parse(
                    "Package: \(package.name)\n\(kind.fieldName): \(written)\n", source: "round trip")
                #expect(reparsed.first?.dependencies == package.dependencies(kind), "\(package.name) \(kind)")
            }
        }
    }

    @Test(.enabled(if: systemDatabaseIsReadable, "this system has no readable /var/lib/dpkg/status"))
    func systemDatabaseParses() throws {
        let packages = try DebianPackageDatabase.load(contentsOf: URL(filePath: DebianPackageDatabase.systemPath))
        #expect(!packages.isEmpty)
        // A name appears once per architecture (Multi-Arch: same packages may appear twice).
        let keys = packages.map { "\($0.name):\($0.architecture ?? "")" }
        #expect(Set(keys).count == keys.count)
    }

    @Test func loadSystemOrSampleReadsTheSystemDatabaseWhenReadable() throws {
        let (packages, source) = try DebianPackageDatabase.loadSystemOrSample()
        if Self.systemDatabaseIsReadable {
            #expect(source == DebianPackageDatabase.systemPath)
        } else {
            #expect(source == DebianPackageDatabase.bundledSampleName)
            #expect(packages == (try DebianPackageDatabase.bundledSample()))
        }
        #expect(!packages.isEmpty)
    }

    @Test func loadReadsAFile() throws {
        let url = FileManager.default.temporaryDirectory.appending(path: "dpkg-status-\(UUID())")
        try Data("Package: a\nVersion: 1\n\nPackage: b\n".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try DebianPackageDatabase.load(contentsOf: url).map(\.name) == ["a", "b"])
    }

    @Test func errorsInAFileNameItsPath() throws {
        let url = FileManager.default.temporaryDirectory.appending(path: "dpkg-status-\(UUID())")
        try Data("Package: a\nbroken\n".utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        let error = try #require(throws: DebianPackageDatabaseError.self) {
            try DebianPackageDatabase.load(contentsOf: url)
        }
        #expect(error.description.hasPrefix("\(url.path(percentEncoded: false)):2: line is neither"))
    }
}
