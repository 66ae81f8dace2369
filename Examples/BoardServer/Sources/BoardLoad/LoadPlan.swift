/// What a load run does: which servers it drives, for how long, how many requests at once, and
/// the mix of operations.
///
/// The workload is the board API's: reads (the cards of a board, one card) and writes (a new
/// card, a change of a card under `If-Match`, and an increment of one shared counter card that
/// every worker changes, retrying on 412 with a fresh ETag). Each HTTP request goes to the next
/// server in turn, so with two servers an increment often reads through one and writes through
/// the other. A value: use it from any isolation.
public struct LoadPlan: Sendable {
    /// When the run stops.
    public enum Bound: Sendable, Equatable {
        /// No new operation starts once this much time has passed; those under way finish.
        case duration(Duration)
        /// This many operations in all (an increment with its retries is one).
        case operations(Int)
    }

    /// The shares of the operations, in any unit (they are normalised); the defaults are 70%
    /// reads and 30% writes.
    public struct Mix: Sendable, Equatable {
        /// `GET /boards/:id/cards`.
        public var listCards = 35.0
        /// `GET /cards/:id`.
        public var getCard = 35.0
        /// `POST /boards/:id/cards`.
        public var createCard = 10.0
        /// `PATCH /cards/:id` with `If-Match`, of a card only this worker changes.
        public var updateCard = 10.0
        /// `GET` then `PATCH /cards/:counter` with `If-Match`, `position` + 1, again on 412.
        public var increment = 10.0

        public init() {}

        /// The share of each kind, in ``OperationKind/allCases`` order.
        var weights: [Double] { [listCards, getCard, createCard, updateCard, increment] }
    }

    /// The servers' base URLs (`http://127.0.0.1:8080`): requests go to each in turn.
    public var servers: [String]
    /// When the run stops.
    public var bound: Bound
    /// How many operations are under way at once (one worker each).
    public var concurrency: Int = 16
    /// How many boards the run makes before it starts; lists and new cards spread over them.
    public var boards: Int = 32
    /// How many cards each board gets before the run starts.
    public var cardsPerBoard: Int = 8
    /// The operations' shares.
    public var mix = Mix()
    /// The seed of the workers' random choices, so that a run can be repeated.
    public var seed: UInt64 = 42
    /// How long one request may take before it counts as failed (its outcome unknown).
    public var requestTimeout: Duration = .seconds(30)
    /// How many times an increment reads the counter again after a 412 before it gives up (an error).
    public var incrementAttempts = 200
    /// The servers the check after the run reads through; `nil`: every server of ``servers``.
    /// A run that kills a server on purpose checks through the others.
    public var checkServers: [String]?
    /// Names the run's boards (`load-<name>-<n>`), so that runs on one database do not collide.
    public var name: String

    /// A plan for `servers`, stopping at `bound`; `name` defaults to a random one.
    public init(servers: [String], bound: Bound, name: String? = nil) {
        self.servers = servers
        self.bound = bound
        self.name = name ?? String(UInt32.random(in: .min ... .max), radix: 36)
    }

    /// Throws ``LoadError`` naming the first value out of range.
    public func validate() throws(LoadError) {
        guard !servers.isEmpty else { throw LoadError("The plan names no server: give at least one base URL.") }
        for server in servers where !(server.hasPrefix("http://") || server.hasPrefix("https://")) {
            throw LoadError("'\(server)' is not a server's base URL: write http://host:port.")
        }
        switch bound {
        case .duration(let duration) where duration <= .zero || duration > .seconds(24 * 3600):
            throw LoadError("The duration must be more than 0 and at most a day, not \(duration).")
        case .operations(let count) where count < 1 || count > 100_000_000:
            throw LoadError("The number of operations must be from 1 to 100,000,000, not \(count).")
        default:
            break
        }
        guard (1...4096).contains(concurrency) else { throw LoadError("The concurrency must be from 1 to 4096, not \(concurrency).") }
        guard (1...10_000).contains(boards) else { throw LoadError("The number of boards must be from 1 to 10,000, not \(boards).") }
        guard (1...1_000).contains(cardsPerBoard) else {
            throw LoadError("The number of cards per board must be from 1 to 1,000, not \(cardsPerBoard).")
        }
        guard mix.weights.allSatisfy({ $0 >= 0 && $0.isFinite }), mix.weights.reduce(0, +) > 0 else {
            throw LoadError("The mix's shares must be finite, none negative, and not all 0.")
        }
        if let checkServers = self.checkServers, checkServers.isEmpty {
            throw LoadError("The check needs at least one server: leave checkServers nil to check through every server.")
        }
        guard requestTimeout > .zero else { throw LoadError("The request timeout must be more than 0.") }
        guard incrementAttempts >= 1 else { throw LoadError("An increment needs at least one attempt.") }
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
            throw LoadError("The run's name must be letters, digits and '-', not '\(name)'.")
        }
    }
}

/// The kinds of operation a load run makes, as reports name them.
public enum OperationKind: String, CaseIterable, Codable, Sendable {
    case listCards = "list cards"
    case getCard = "get card"
    case createCard = "create card"
    case updateCard = "update card"
    case increment = "increment"
}

/// A plan that cannot run, or a run that could not start (its setup failed), saying why.
public struct LoadError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
