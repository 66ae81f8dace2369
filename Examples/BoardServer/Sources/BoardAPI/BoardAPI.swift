public import Hummingbird
public import Loom

/// The board server's routes over one container: every request works in a background context
/// of its own, made for it and dropped after it (`PersistentContainer.performBackgroundTask`).
///
/// ```
/// GET    /boards                  POST /boards                 {"name"}
/// GET    /boards/:id              PATCH, DELETE /boards/:id    (If-Match)
/// GET    /boards/:id/cards        POST /boards/:id/cards       {"title", "details", "position", "labels"}
/// GET    /boards/:id/labels       POST /boards/:id/labels      {"name", "color"}
/// GET    /cards/:id               PATCH, DELETE /cards/:id     (If-Match)
/// GET    /cards/:id/comments      POST /cards/:id/comments     {"text", "author"}
/// GET    /labels/:id              PATCH, DELETE /labels/:id    (If-Match)
/// GET    /labels/:id/cards        GET /health
/// GET    /boards/:id/cards/events (Server-Sent Events)   GET /boards/:id/live (a page)
/// GET    /health/streams
/// ```
///
/// A GET of one object answers with its `ETag`; a PATCH or DELETE with `If-Match` fails with 412
/// when the object changed since, even when the change commits between this request's check
/// and its save (Loom's optimistic locking catches that one). Errors are JSON,
/// `{"error":{"message":"…"}}`: 400 for a body that is not the JSON expected, 404 for an unknown
/// ID, 409 for a uniqueness conflict, 422 for a value the model or the API refuses, 503 when the
/// store cannot answer.
///
/// Sendable: its routes run on any of the server's tasks at once.
public struct BoardAPI: Sendable {
    /// The container every request's context comes from.
    public let container: PersistentContainer
    /// How often a live stream sends a heartbeat (a comment line), so that proxies keep it open
    /// and a client that went away is noticed.
    public let heartbeat: Duration
    /// The live streams open (`GET /health/streams`).
    let streams = LiveStreams()

    /// Serves `container`, whose store holds the board model (see ``BoardDatabase``); live
    /// streams send a heartbeat every `heartbeat`. Callable from any isolation.
    public init(container: PersistentContainer, heartbeat: Duration = .seconds(15)) {
        self.container = container
        self.heartbeat = heartbeat
    }

    /// A router with every route and the error mapping.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: LoomErrorMiddleware())
        router.get("health") { _, _ in "ok" }
        addBoardRoutes(to: router)
        addCardRoutes(to: router)
        addLabelRoutes(to: router)
        addEventRoutes(to: router)
        addPageRoutes(to: router)
        return router
    }

    /// An application serving the routes on `host:port` (port 0: any free port); `onRunning`
    /// is called with the port once the server accepts connections.
    public func application(
        host: String, port: Int, onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: "BoardServer"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) })
    }

    // MARK: What the routes share

    /// The ID in the path parameter `name`, as an ID of this store: 400 when it is not a number,
    /// 404 when no object can have it.
    func id<Model: PersistentModel>(of type: Model.Type, _ context: BasicRequestContext, _ name: String = "id") throws -> ObjectID<Model> {
        let text = context.parameters.get(name) ?? ""
        guard let key = Int64(text) else {
            throw HTTPError(.badRequest, message: "'\(text)' is not \(Model.entity.name) ID: IDs are integers.")
        }
        guard key > 0 else { throw HTTPError(.notFound, message: "No \(Model.named(key)) exists.") }
        return container.coordinator.objectID(of: Model.self, key: key)
    }

    /// GET of one object: its representation and ETag.
    func get<Model: Resource>(_ type: Model.Type, _ context: BasicRequestContext) async throws -> Response {
        let id = try id(of: Model.self, context)
        let (json, revision) = try await container.performBackgroundTask { context in
            let object = try context.existingObject(with: id)
            return (object.json, object.revision)
        }
        return try HTTPExchange.json(json, revision: revision)
    }

    /// PATCH of one object: checks `If-Match`, applies the body, and saves with the revision
    /// counted up when the representation changed. A value set again counts as a change in Loom
    /// (as in Core Data), so the representations before and after are compared instead.
    func patch<Model: Resource, Input: Decodable & Sendable>(
        _ type: Model.Type, with input: Input.Type, _ request: Request, _ context: BasicRequestContext,
        apply: @escaping @Sendable (Input, Model, ManagedObjectContext) throws -> Void
    ) async throws -> Response {
        let id = try id(of: Model.self, context)
        let precondition = ETag.ifMatch(of: request)
        let input = try await HTTPExchange.decode(Input.self, from: request)
        let (json, revision) = try await container.performBackgroundTask { context in
            let object = try context.existingObject(with: id)
            try precondition?.check(object.revision, of: Model.named(id.primaryKey))
            let before = object.json
            try apply(input, object, context)
            if object.json != before {
                object.revision += 1
                try context.save()
            }
            return (object.json, object.revision)
        }
        return try HTTPExchange.json(json, revision: revision)
    }

    /// DELETE of one object (and what its delete rules cascade to), checking `If-Match`.
    func delete<Model: Resource>(_ type: Model.Type, _ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let id = try id(of: Model.self, context)
        let precondition = ETag.ifMatch(of: request)
        try await container.performBackgroundTask { context in
            let object = try context.existingObject(with: id)
            try precondition?.check(object.revision, of: Model.named(id.primaryKey))
            context.delete(object)
            try context.save()
        }
        return Response(status: .noContent)
    }
}
