/// What changed in an object since it was last fetched or saved: the one answer that saves,
/// merges, conflict resolution, `objectsDidChange` events and property observers share.
extension _ObjectBacking {
    /// The slots whose value differs from the last saved or fetched one (every set slot for an
    /// object never saved), with their current values. The one definition of "changed" that
    /// saves, merges, conflict resolution, events and `changedValues()` share.
    func changedSlots() -> [(Int, StoredValue)] {
        guard let committed else {
            return values.enumerated().filter { !$0.element.isNull }.map { ($0.offset, $0.element) }
        }
        var out: [(Int, StoredValue)] = []
        for i in values.indices {
            let now = values[i]
            if !committed[i].isIdentical(to: now) { out.append((i, now)) }
        }
        return out
    }

    func changedValues() -> [String: StoredValue] {
        if state == .fault { return [:] }
        var out: [String: StoredValue] = [:]
        if committed == nil {
            // Never saved: every value is a change, unset optionals included.
            for slot in 0..<entity.storedValueCount {
                if case .order = entity.storedValue(at: slot) { continue }
                out[entity.storedValueName(at: slot)] = values[slot]
            }
            return out
        }
        for (slot, value) in changedSlots() {
            if case .order = entity.storedValue(at: slot) { continue }
            out[entity.storedValueName(at: slot)] = value
        }
        return out
    }

    func committedValues(forKeys keys: [String]?) -> [String: StoredValue] {
        if state == .fault, let context { context.fulfillFault(self) }
        guard let committed else { return [:] }
        var out: [String: StoredValue] = [:]
        for slot in 0..<entity.storedValueCount {
            if case .order = entity.storedValue(at: slot) { continue }
            let name = entity.storedValueName(at: slot)
            if keys?.contains(name) ?? true { out[name] = committed[slot] }
        }
        return out
    }
}
