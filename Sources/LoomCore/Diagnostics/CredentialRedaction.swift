/// Hides the passwords of database URLs in text meant for people: error messages, log lines,
/// a tool's output. A URL's password (`postgres://app:PASSWORD@host/db`) becomes `***`, and so
/// does the value of a `password` query parameter (`?password=PASSWORD`, libpq's spelling); the
/// rest of the text is unchanged, so the message still says which server and user it was about.
///
/// It works on any text, not only on a well-formed URL: a URL that could not be parsed is the
/// first one an error message repeats.
package enum CredentialRedaction {
    /// What replaces a password.
    package static let mask = "***"

    /// `text` with the password of every URL in it replaced by ``mask``.
    package static func redacting(_ text: String) -> String {
        guard text.contains("://") || text.contains("password=") else { return text }
        var result = text
        // `scheme://user:password@`: the userinfo ends at the last `@` before the URL's path,
        // query or end (a password may hold an `@` that was not percent-encoded).
        result.replace(/(?<head>[A-Za-z][A-Za-z0-9+.\-]*:\/\/[^:\/?#@\s]*:)(?<secret>[^\/?#\s]*)@/) { match in
            match.output.secret.isEmpty ? "\(match.output.head)@" : "\(match.output.head)\(mask)@"
        }
        // `password=value` in a query (`?` or `&` before it), up to the next `&` or the end.
        result.replace(/(?<head>[?&]password=)(?<secret>[^&#\s]*)/) { match in
            match.output.secret.isEmpty ? "\(match.output.head)" : "\(match.output.head)\(mask)"
        }
        return result
    }
}
