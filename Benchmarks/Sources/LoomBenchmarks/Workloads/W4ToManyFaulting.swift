/// W4: walk a to-many relationship from every object of a fetch, firing the relationship
/// faults (Core Data's "N+1" case), against a JOIN (raw SQLite, GRDB's associations).
///
/// Waits for relationships in Loom. To add it: give `Item` a to-many `tags` relationship (and
/// `ItemData` its tag keys, generated from the same seed), fill it in the templates, and
/// implement ``run(_:_:)``; the runner, report and JSON need no change.
final class ToManyFaulting: Workload {
    let id = "W4"
    let title = "To-many relationship faulting"
    let contenders: [Contender] = [.raw, .grdb, .grdbRecord, .loom]
    let metrics: [Metric] = []
    let unavailableReason: String? = "Loom has no relationships yet, so the benchmark entity has no to-many column either."

    func prepare(_ bench: Bench) throws {}

    func run(_ contender: Contender, _ round: Round) async throws -> [String: Double] { [:] }
}
