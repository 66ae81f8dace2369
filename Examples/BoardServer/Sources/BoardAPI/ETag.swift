import Foundation
import Hummingbird

/// A representation's revision as an HTTP entity tag, and the `If-Match` precondition.
struct ETag: Sendable {
    /// The revisions `If-Match` accepts; `nil` for `*` (any current representation).
    var acceptedRevisions: Set<Int>?

    /// The `If-Match` header of `request`, or `nil` when it has none (the write is unconditional).
    /// An entity tag that is not one of this server's matches nothing: the write fails with 412.
    static func ifMatch(of request: Request) -> ETag? {
        guard let header = request.headers[.ifMatch] else { return nil }
        var revisions = Set<Int>()
        for tag in header.split(separator: ",") {
            let tag = tag.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return ETag(acceptedRevisions: nil) }
            if let revision = Int(tag.trimmingPrefix("W/").trimmingCharacters(in: CharacterSet(charactersIn: "\""))) {
                revisions.insert(revision)
            }
        }
        return ETag(acceptedRevisions: revisions)
    }

    /// The `ETag` header for `revision`: a strong tag, `"<revision>"`.
    static func header(for revision: Int) -> String { "\"\(revision)\"" }

    /// Throws 412 Precondition Failed when `revision` is not one this precondition accepts,
    /// naming the current revision so that the client knows to read it again.
    func check(_ revision: Int, of what: String) throws {
        guard let acceptedRevisions, !acceptedRevisions.contains(revision) else { return }
        throw HTTPError(
            .preconditionFailed,
            message: "\(what) has changed: its current ETag is \(ETag.header(for: revision)), not the one in If-Match. Read it again and retry with the new ETag.")
    }
}
