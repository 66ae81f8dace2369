import DebianPackages
import Testing

@Suite("Maintainer fields")
struct DebianMaintainerTests {
    @Test(arguments: [
        ("Debian Adduser Developers <adduser@packages.debian.org>", "Debian Adduser Developers", "adduser@packages.debian.org"),
        ("  Jane Doe   <  jane@example.org >  ", "Jane Doe", "jane@example.org"),
        ("Team <list> <real@example.org>", "Team <list>", "real@example.org"),
        ("<only@example.org>", "", "only@example.org"),
        ("Just A Name", "Just A Name", nil),
        ("Broken <address", "Broken <address", nil),
        ("Empty <>", "Empty", nil),
    ] as [(String, String, String?)])
    func maintainerIsSplitIntoNameAndEmail(text: String, name: String, email: String?) {
        let maintainer = DebianMaintainer(parsing: text)
        #expect(maintainer.name == name)
        #expect(maintainer.email == email)
    }

    @Test func descriptionIsTheFieldAsDpkgWritesIt() {
        #expect(DebianMaintainer(name: "Jane Doe", email: "jane@example.org").description == "Jane Doe <jane@example.org>")
        #expect(DebianMaintainer(name: "Jane Doe").description == "Jane Doe")
    }
}
