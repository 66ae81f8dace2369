import NIOHTTP1

/// One of a run's workers: makes one operation after another until the bound, and counts what
/// happened. Each worker alone changes the cards it owns (the seeded ones dealt to it and those
/// it made), so it knows their ETags; every worker increments the one counter.
struct Worker: Sendable {
    let index: Int
    private let weights: [Double]
    private var random: LoadRandom
    /// The revision of each card this worker changes; `nil` when a change's outcome is unknown
    /// and the card must be read again first.
    private var owned: [Int64: Int?]
    private var ownedIDs: [Int64]
    /// The cards this worker made or changed, as acknowledged.
    private(set) var ledger = LoadLedger()
    private var madeCount = 0

    private(set) var latencies: [OperationKind: [Double]] = [:]
    private(set) var errors: [String: Int] = [:]
    private(set) var requests = 0
    private(set) var operations = 0
    private(set) var conflicts = 0
    private(set) var unknown = 0
    private(set) var requestsByServer: [Int: Int] = [:]
    private(set) var successesByServer: [Int: Int] = [:]
    /// What a read of this worker's own cards found wrong during the run.
    private(set) var violations: [String] = []
    /// Answers as expected and failures, by tenth of a second since the run started.
    private(set) var timeline: [Int: (ok: Int, failed: Int)] = [:]
    private var start = ContinuousClock.now

    /// Worker number `index`, changing `owned` (seeded cards, with their revisions).
    init(index: Int, plan: LoadPlan, owned: [(card: LoadLedger.Card, revision: Int)]) {
        self.index = index
        let total = plan.mix.weights.reduce(0, +)
        weights = plan.mix.weights.map { $0 / total }
        random = LoadRandom(state: plan.seed &+ UInt64(index + 1) &* 0x2545_F491_4F6C_DD1D)
        self.owned = Dictionary(uniqueKeysWithValues: owned.map { ($0.card.id, $0.revision) })
        ownedIDs = owned.map(\.card.id)
        for (card, _) in owned { ledger.cards[card.id] = card }
    }

    mutating func run(_ shared: Shared) async {
        start = shared.start
        while shared.mayStart() {
            let kind = nextKind()
            let start = ContinuousClock.now
            let succeeded: Bool
            switch kind {
            case .listCards: succeeded = await listCards(shared)
            case .getCard: succeeded = await getCard(shared)
            case .createCard: succeeded = await createCard(shared)
            case .updateCard: succeeded = ownedIDs.isEmpty ? await createCard(shared) : await updateCard(shared)
            case .increment: succeeded = await increment(shared)
            }
            operations += 1
            if succeeded {
                let elapsed = ContinuousClock.now - start
                let milliseconds = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
                latencies[kind, default: []].append(milliseconds)
            }
        }
    }

    private mutating func nextKind() -> OperationKind {
        let roll = Double(random.next() >> 11) / Double(1 << 53)
        var sum = 0.0
        for (kind, weight) in zip(OperationKind.allCases, weights) {
            sum += weight
            if roll < sum { return kind }
        }
        return weights.lastIndex { $0 > 0 }.map { OperationKind.allCases[$0] } ?? .listCards
    }

    // MARK: Operations

    private mutating func listCards(_ shared: Shared) async -> Bool {
        let board = shared.boards[Int(random.next() % UInt64(shared.boards.count))]
        guard let reply = await send(.listCards, .GET, "/boards/\(board)/cards", shared) else { return false }
        return expect(reply, 200, .listCards) && decodes(reply, [CardReply].self, .listCards)
    }

    private mutating func getCard(_ shared: Shared) async -> Bool {
        let card = shared.someCard(using: &random)
        guard let reply = await send(.getCard, .GET, "/cards/\(card)", shared) else { return false }
        return expect(reply, 200, .getCard) && decodes(reply, CardReply.self, .getCard)
    }

    private mutating func createCard(_ shared: Shared) async -> Bool {
        let board = shared.boards[Int(random.next() % UInt64(shared.boards.count))]
        madeCount += 1
        let body = CardBody(title: "w\(index)-c\(madeCount)", details: "w\(index)-c\(madeCount)-0", position: 1000 + madeCount)
        guard let reply = await send(.createCard, .POST, "/boards/\(board)/cards", shared, body: body) else {
            if !lastRefused { unknown += 1 }
            return false
        }
        if reply.status >= 500 { unknown += 1 }
        guard expect(reply, 201, .createCard), let card = reply.decode(CardReply.self) else { return false }
        guard card.title == body.title, card.details == body.details, card.board == board else {
            violations.append("POST /boards/\(board)/cards answered card \(card.id) as '\(card.title)'/'\(card.details)' on board \(card.board), not what was sent.")
            return false
        }
        ledger.cards[card.id] = LoadLedger.Card(id: card.id, board: board, title: card.title, details: card.details)
        owned[card.id] = card.revision
        ownedIDs.append(card.id)
        shared.acknowledge(card: card.id)
        return true
    }

    private mutating func updateCard(_ shared: Shared) async -> Bool {
        let id = ownedIDs[Int(random.next() % UInt64(ownedIDs.count))]
        var revision: Int
        if let known = owned[id] ?? nil {
            revision = known
        } else {
            // The last change's outcome is unknown: read the card, which only this worker changes.
            guard let reply = await send(.updateCard, .GET, "/cards/\(id)", shared) else { return false }
            guard expect(reply, 200, .updateCard), let card = reply.decode(CardReply.self) else { return false }
            settle(card)
            revision = card.revision
        }
        let details = "w\(index)-u\(operations)"
        let body = CardBody(details: details)
        guard let reply = await send(.updateCard, .PATCH, "/cards/\(id)", shared, body: body, ifMatch: "\"\(revision)\"") else {
            if !lastRefused { uncertain(id, details) }
            return false
        }
        if reply.status >= 500 {
            uncertain(id, details)
        } else if reply.status != 200 {
            // A 412 here is a fault: no one else changes this card.
            owned[id] = .some(nil)
        }
        guard expect(reply, 200, .updateCard), let card = reply.decode(CardReply.self) else { return false }
        guard card.details == details, card.revision == revision + 1 else {
            violations.append("PATCH /cards/\(id) (If-Match \"\(revision)\") answered revision \(card.revision) with '\(card.details)', not revision \(revision + 1) with '\(details)'.")
            owned[id] = .some(nil)
            return false
        }
        owned[id] = card.revision
        ledger.cards[id]?.details = details
        ledger.cards[id]?.possibleDetails = []
        return true
    }

    private mutating func increment(_ shared: Shared) async -> Bool {
        for _ in 0..<shared.plan.incrementAttempts {
            guard let read = await send(.increment, .GET, "/cards/\(shared.counter)", shared) else { return false }
            guard expect(read, 200, .increment), let counter = read.decode(CardReply.self), let etag = read.etag else { return false }
            let body = CardBody(position: counter.position + 1)
            guard let reply = await send(.increment, .PATCH, "/cards/\(shared.counter)", shared, body: body, ifMatch: etag) else {
                if !lastRefused {
                    ledger.unknownIncrements += 1
                    unknown += 1
                }
                return false
            }
            if reply.status == 412 {
                conflicts += 1
                count(success: true)
                continue
            }
            if reply.status >= 500 {
                ledger.unknownIncrements += 1
                unknown += 1
            }
            guard expect(reply, 200, .increment) else { return false }
            ledger.acknowledgedIncrements += 1
            return true
        }
        errors["increment: gave up after \(shared.plan.incrementAttempts) conflicts", default: 0] += 1
        return false
    }

    // MARK: Requests and their outcomes

    /// Sends a request to the next server in turn; `nil` (the failure counted) when it got no answer.
    private mutating func send(
        _ kind: OperationKind, _ method: HTTPMethod, _ path: String, _ shared: Shared,
        body: CardBody? = nil, ifMatch: String? = nil
    ) async -> BoardClient.Reply? {
        let server = (index + requests) % shared.client.servers.count
        requests += 1
        requestsByServer[server, default: 0] += 1
        lastServer = server
        do {
            return try await shared.client.send(method, path, to: server, body: body, ifMatch: ifMatch)
        } catch {
            errors["\(kind.rawValue): \(error.summary)", default: 0] += 1
            count(success: false)
            lastRefused = error.summary == "connection refused"
            return nil
        }
    }

    private var lastServer = 0
    /// Whether the last request that got no answer was refused a connection: it was never sent,
    /// so a write's outcome is known (not made).
    private var lastRefused = false

    /// Whether `reply` has `status`; counts an error by its status when not.
    private mutating func expect(_ reply: BoardClient.Reply, _ status: Int, _ kind: OperationKind) -> Bool {
        count(success: reply.status == status)
        guard reply.status == status else {
            errors["\(kind.rawValue): \(reply.status)", default: 0] += 1
            return false
        }
        return true
    }

    /// Counts a request's outcome for its server and in the timeline.
    private mutating func count(success: Bool) {
        if success { successesByServer[lastServer, default: 0] += 1 }
        let elapsed = ContinuousClock.now - start
        let tenth = Int(elapsed.components.seconds * 10 + elapsed.components.attoseconds / 100_000_000_000_000_000)
        if success { timeline[tenth, default: (0, 0)].ok += 1 } else { timeline[tenth, default: (0, 0)].failed += 1 }
    }

    private mutating func decodes<T: Decodable>(_ reply: BoardClient.Reply, _ type: T.Type, _ kind: OperationKind) -> Bool {
        guard reply.decode(type) != nil else {
            errors["\(kind.rawValue): a body of the wrong shape", default: 0] += 1
            return false
        }
        return true
    }

    /// A change of card `id` to `details` got no answer, or a 5xx: either outcome is possible.
    private mutating func uncertain(_ id: Int64, _ details: String) {
        unknown += 1
        owned[id] = .some(nil)
        ledger.cards[id]?.possibleDetails.insert(details)
    }

    /// Takes `card`, read after a change of unknown outcome, as this worker's card now: its
    /// details must be the acknowledged ones or one of those whose outcome was unknown.
    private mutating func settle(_ card: CardReply) {
        if let known = ledger.cards[card.id], card.details != known.details, !known.possibleDetails.contains(card.details) {
            violations.append("Lost write: card \(card.id)'s details were '\(card.details)', not '\(known.details)' as acknowledged.")
        }
        owned[card.id] = card.revision
        ledger.cards[card.id]?.details = card.details
        ledger.cards[card.id]?.possibleDetails = []
    }
}
