import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
@testable import BoardAPI

/// A Server-Sent Events client: a URLSession data task (libcurl on Linux) whose body is read as
/// it arrives and parsed into events, as EventSource does. `close()` drops the connection, as a
/// browser tab that closes.
final class EventStream: NSObject, URLSessionDataDelegate, Sendable {
    /// One event: its `id:`, `event:` and `data:` fields.
    struct Event: Sendable {
        var id: String?
        var name: String
        var data: String

        /// The event's data decoded as `type`.
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(T.self, from: Data(data.utf8))
        }
    }

    private struct State {
        var status: Int?
        var contentType: String?
        var buffer = Data()
        var events: [Event] = []
        var comments = 0
        var retry: Int?
        var ended = false
    }

    private let state = Mutex(State())
    private let connection = Mutex<(session: URLSession, task: URLSessionDataTask)?>(nil)

    /// Opens `path` of the server on `port`.
    init(port: Int, path: String) {
        super.init()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 600
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/\(path)")!)
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        let task = session.dataTask(with: request)
        connection.withLock { $0 = (session, task) }
        task.resume()
    }

    /// Drops the connection.
    func close() {
        guard let (session, task) = connection.withLock({ $0 }) else { return }
        task.cancel()
        session.invalidateAndCancel()
    }

    /// The response's status and content type, once they came.
    var response: (status: Int, contentType: String?)? {
        state.withLock { state in state.status.map { ($0, state.contentType) } }
    }

    /// How many comment lines (heartbeats) came so far.
    var comments: Int { state.withLock(\.comments) }

    /// The last `retry:` field.
    var retry: Int? { state.withLock(\.retry) }

    /// The next event, waiting up to `timeout` for it.
    func next(within timeout: Duration = .seconds(30)) async throws -> Event {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (event, ended) = state.withLock { state in
                (state.events.isEmpty ? nil : state.events.removeFirst(), state.ended)
            }
            if let event { return event }
            guard !ended else { throw ServerFailure("The event stream ended") }
            guard ContinuousClock.now < deadline else { throw ServerFailure("No event within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until `condition` holds of the stream, for up to `timeout`.
    func wait(within timeout: Duration = .seconds(30), until condition: (EventStream) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition(self) {
            guard ContinuousClock.now < deadline else { throw ServerFailure("The stream did not get there within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Whether the response ended (the server closed it, or the connection failed).
    var hasEnded: Bool { state.withLock(\.ended) }

    /// Events already received and not read yet.
    var pending: Int { state.withLock { $0.events.count } }

    private func noteResponse(of task: URLSessionTask, in state: inout State) {
        guard state.status == nil, let http = task.response as? HTTPURLResponse else { return }
        state.status = http.statusCode
        state.contentType = http.value(forHTTPHeaderField: "Content-Type")
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { state in
            noteResponse(of: dataTask, in: &state)
            state.buffer.append(data)
            // Events end with a blank line; the server sends "\n" line ends.
            while let end = state.buffer.firstRange(of: Data("\n\n".utf8)) {
                let block = String(decoding: state.buffer[..<end.lowerBound], as: UTF8.self)
                state.buffer.removeSubrange(..<end.upperBound)
                var event = Event(id: nil, name: "message", data: "")
                var hasData = false
                for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                    if line.hasPrefix(":") { state.comments += 1; continue }
                    let (field, value) = line.firstIndex(of: ":").map {
                        (line[..<$0], line[line.index(after: $0)...].drop { $0 == " " })
                    } ?? (line[...], ""[...])
                    switch field {
                    case "id": event.id = String(value)
                    case "event": event.name = String(value)
                    case "data": event.data += (hasData ? "\n" : "") + value; hasData = true
                    case "retry": state.retry = Int(value)
                    default: break
                    }
                }
                if hasData { state.events.append(event) }
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        state.withLock { state in
            noteResponse(of: task, in: &state)
            state.ended = true
        }
    }
}

/// A result of the board's live stream, as a client keeps it: sections of cards.
struct LiveCardList: Equatable {
    var sections: [[CardJSON]]

    init(_ results: CardResultsJSON) {
        sections = results.sections.map(\.cards)
    }

    var cards: [CardJSON] { sections.flatMap { $0 } }

    /// Applies a `changes` event as a client does (and the page's script): removals at old
    /// positions, last first; sections; insertions and moves at new positions, first first;
    /// updates. Throws when a position does not exist: the diff does not fit the list.
    mutating func apply(_ change: CardChangesJSON) throws {
        func check(_ condition: Bool, _ what: String) throws {
            if !condition { throw ServerFailure("The change does not fit the list: \(what)") }
        }
        let removed = (change.deleted + change.moved.map(\.from)).sorted { ($0.section, $0.item) > ($1.section, $1.item) }
        for position in removed {
            try check(sections.indices.contains(position.section) && sections[position.section].indices.contains(position.item), "removal at \(position)")
            sections[position.section].remove(at: position.item)
        }
        for index in change.deletedSections.sorted(by: >) {
            try check(sections.indices.contains(index) && sections[index].isEmpty, "section \(index) deleted")
            sections.remove(at: index)
        }
        for index in change.insertedSections.map(\.index).sorted() {
            try check(index <= sections.count, "section \(index) inserted")
            sections.insert([], at: index)
        }
        let inserted = (change.inserted.map { ($0.at, $0.card) } + change.moved.map { ($0.to, $0.card) })
            .sorted { ($0.0.section, $0.0.item) < ($1.0.section, $1.0.item) }
        for (position, card) in inserted {
            try check(sections.indices.contains(position.section) && position.item <= sections[position.section].count, "insertion at \(position)")
            sections[position.section].insert(card, at: position.item)
        }
        for update in change.updated {
            try check(sections.indices.contains(update.at.section) && sections[update.at.section].indices.contains(update.at.item), "update at \(update.at)")
            sections[update.at.section][update.at.item] = update.card
        }
    }
}
