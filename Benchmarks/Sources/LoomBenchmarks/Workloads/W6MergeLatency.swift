/// W6: how long after a background save the view context sees the change (merge latency),
/// against re-reading the changed rows by hand (raw SQLite, GRDB's `ValueObservation`).
///
/// Waits for merging between contexts in Loom. To add it: save on a background context, time
/// until the view context's change notification (or until the merged object shows the new
/// value), and implement ``run(_:_:)``; the runner, report and JSON need no change.
final class MergeLatency: Workload {
    let id = "W6"
    let title = "Merge latency from a background save to the view context"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord, .loom]
    let metrics: [Metric] = []
    let unavailableReason: String? = "Loom does not merge changes between contexts yet."

    func prepare(_ bench: Bench) throws {}

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] { [:] }
}
