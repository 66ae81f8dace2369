/// The person or team responsible for a package, as written in its `Maintainer` field.
///
/// dpkg writes `Name <address>`; both parts are kept separately:
///
/// ```swift
/// let maintainer = DebianMaintainer(parsing: "Debian Adduser Developers <adduser@packages.debian.org>")
/// maintainer.name    // "Debian Adduser Developers"
/// maintainer.email   // "adduser@packages.debian.org"
/// ```
package struct DebianMaintainer: Sendable, Hashable, CustomStringConvertible {
    /// The display name; the whole field when it has no `<address>` part.
    package var name: String
    /// The e-mail address between `<` and `>`, if the field has one.
    package var email: String?

    /// Creates a maintainer from its parts.
    package init(name: String, email: String? = nil) {
        self.name = name
        self.email = email
    }

    /// Splits a `Maintainer` field value into name and address.
    ///
    /// Never fails: a value without a well-formed `<address>` at its end is taken whole as the
    /// name, and ``email`` is `nil`.
    package init(parsing text: String) {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.hasSuffix(">"), let open = trimmed.lastIndex(of: "<") else {
            self.init(name: String(trimmed), email: nil)
            return
        }
        let address = trimmed[trimmed.index(after: open)..<trimmed.index(before: trimmed.endIndex)]
            .trimmingWhitespace()
        self.init(
            name: String(trimmed[..<open].trimmingWhitespace()),
            email: address.isEmpty ? nil : String(address))
    }

    /// The field as dpkg writes it: `Name <address>`, or only the name.
    package var description: String {
        guard let email else { return name }
        return name.isEmpty ? "<\(email)>" : "\(name) <\(email)>"
    }
}
