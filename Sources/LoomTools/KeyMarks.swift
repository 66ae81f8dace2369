@_spi(LoomStore) import LoomCore

/// The key allocator's mark for `entity` (`loom_keys.next`, the next key it hands out; 1 when
/// it has none): its own row in a store written when each entity had one, else its hierarchy's
/// root's row, which every entity of a hierarchy reserves from (one key space per hierarchy).
func keyMark(of entity: EntityDescription, in marks: [String: Int64]) -> Int64 {
    marks[entity.name] ?? marks[entity.rootEntity.name] ?? 1
}
