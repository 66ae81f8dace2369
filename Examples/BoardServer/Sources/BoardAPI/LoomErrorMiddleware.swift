import Hummingbird
import Loom
import Logging

/// Turns the `LoomError`s that routes throw into HTTP answers carrying Loom's message: the error
/// already says what happened, to which entity and attribute, and never holds attribute values.
struct LoomErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as LoomError {
            let status = Self.status(for: error, conditional: request.headers[.ifMatch] != nil)
            if status == .internalServerError || status == .serviceUnavailable {
                context.logger.error("\(request.method) \(request.uri.path): \(error.code.rawValue): \(error.message)")
            }
            throw HTTPError(status, message: error.message)
        }
    }

    /// The status of a failure: the client's mistakes are 4xx, a store that cannot answer is 503.
    static func status(for error: LoomError, conditional: Bool) -> HTTPResponse.Status {
        switch error.code {
        case .objectNotFound, .objectNotSavedYet:
            return .notFound
        case .versionConflict:
            // Another request saved the object between this one's read and its save. A client
            // that sent If-Match learns that its precondition no longer holds.
            return conditional ? .preconditionFailed : .conflict
        case .uniquenessViolation:
            return .conflict
        case .missingRequiredValue, .typeMismatch, .deleteDenied:
            return .unprocessableContent
        case .storeFailure, .closed, .commitOutcomeUnknown:
            return .serviceUnavailable
        default:
            return .internalServerError
        }
    }
}
