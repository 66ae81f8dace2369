/// Groups `items` by entity, each group in the order its items come, the groups in the order
/// each entity first appears.
///
/// A short list searched from the group used last, not a dictionary: a save's items come in runs
/// of one entity, and there are few entities (a dictionary of arrays cost two lookups an item).
/// Used by the save pipeline and by stores that write an entity's rows at once.
@inlinable package func groupedByEntity<T>(_ items: some Sequence<T>, _ entity: (T) -> EntityDescription) -> [(entity: EntityDescription, items: [T])] {
    var groups: [(entity: EntityDescription, items: [T])] = []
    var last = -1
    for item in items {
        let e = entity(item)
        if last < 0 || groups[last].entity !== e {
            if let i = groups.firstIndex(where: { $0.entity === e }) {
                last = i
            } else {
                groups.append((e, []))
                last = groups.count - 1
            }
        }
        groups[last].items.append(item)
    }
    return groups
}
