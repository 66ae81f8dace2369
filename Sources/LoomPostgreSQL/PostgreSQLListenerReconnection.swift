extension PostgreSQLStore.Configuration {
    /// How the store's listener (the connection that `LISTEN`s for other servers' commits and
    /// reads them from the history) connects again once its connection is lost: the server
    /// restarted, ended the session, or stopped answering within
    /// ``PostgreSQLStore/Configuration/responseTimeout``.
    ///
    /// It waits ``initialDelay``, tries, and doubles the wait after each failed attempt up to
    /// ``maximumDelay``; once connected it `LISTEN`s again and reads the history after the last
    /// transaction it handed on, so every commit made while it was away still arrives, once
    /// and in commit order. After ``maximumAttempts`` failed attempts in a row (never, by
    /// default) it gives up: the coordinator's `remoteChangesFailure` says why and its
    /// `remoteChanges()` streams end; other servers' commits are then seen only by reading.
    /// The store's other connections need no policy: a call that finds its connection lost
    /// throws, and the next call opens a new one.
    ///
    /// A value: use it from any thread.
    public struct ListenerReconnection: Sendable, Equatable {
        /// The wait before the first attempt to connect again (100 ms by default).
        public var initialDelay: Duration = .milliseconds(100)
        /// The longest wait between two attempts (2 seconds by default): also how late, at
        /// most, the listener notices that the server is back.
        public var maximumDelay: Duration = .seconds(2)
        /// How many failed attempts in a row end the listening (`nil`, the default: never).
        public var maximumAttempts: Int?
        /// How often the listener reads the history when no notification woke it (1 second by
        /// default): the bound on how late a commit whose notification was lost arrives.
        public var pollInterval: Duration = .seconds(1)

        public init() {}

        /// The wait before attempt `attempt` (1 for the first after a loss), doubled each time
        /// from ``initialDelay`` up to ``maximumDelay``.
        func delay(beforeAttempt attempt: Int) -> Duration {
            let initial = max(.zero, initialDelay), maximum = max(initial, maximumDelay)
            var delay = initial
            for _ in 1..<max(1, min(attempt, 64)) where delay < maximum { delay *= 2 }
            return min(delay, maximum)
        }
    }
}
