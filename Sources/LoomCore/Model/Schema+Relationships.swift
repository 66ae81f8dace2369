extension Schema {
    /// Every relationship of an entity, resolved, in the entity's order.
    @_spi(LoomStore) public func relationships(of entity: EntityDescription) -> [ResolvedRelationship] {
        resolved[ObjectIdentifier(entity)] ?? []
    }

    /// One relationship of an entity, resolved. The entity must be one of this schema's and
    /// `index` one of its relationships' positions (a programmer error otherwise).
    @_spi(LoomStore) public func relationship(_ index: Int, of entity: EntityDescription) -> ResolvedRelationship {
        resolved[ObjectIdentifier(entity)]![index]
    }

    /// The relationship a reference names, or `nil` when the schema has no such relationship.
    @_spi(LoomStore) public func relationship(_ reference: RelationshipReference) -> ResolvedRelationship? {
        guard let entity = entityByName[reference.entityName], let index = entity.relationshipIndex(named: reference.name) else { return nil }
        return relationship(index, of: entity)
    }

    /// The join tables that hold keys of `entity`, with the column they are in.
    @_spi(LoomStore) public func joinTables(involving entity: EntityDescription) -> [(table: JoinTable, column: String)] {
        var out: [(JoinTable, String)] = []
        for table in joinTables {
            if table.sourceEntityName == entity.name { out.append((table, JoinTable.sourceColumn)) }
            if table.targetEntityName == entity.name { out.append((table, JoinTable.targetColumn)) }
        }
        return out
    }

    /// Resolves every relationship: destination, inverse and storage. Appends a sentence to
    /// `problems` for each relationship that cannot be resolved.
    static func resolveRelationships(
        _ entities: [EntityDescription], byName: [String: EntityDescription], subentities: [String: [EntityDescription]],
        problems: inout [String]
    ) -> ([ObjectIdentifier: [ResolvedRelationship]], [JoinTable]) {
        var resolved: [ObjectIdentifier: [ResolvedRelationship]] = [:]
        var joinTables: [String: JoinTable] = [:]
        for entity in entities where resolved[ObjectIdentifier(entity)] == nil {
            var list: [ResolvedRelationship] = []
            for (j, r) in entity.relationships.enumerated() {
                let place = "\(entity.name).\(r.name)"
                let destinationName = r.destinationEntityName
                guard let destination = byName[destinationName] else {
                    problems.append("\(place) leads to entity \(destinationName), which is not in this model; add it to the model's types")
                    continue
                }
                if case .model(let box) = r.destination, box.type.entity !== destination {
                    problems.append("\(place) leads to the class \(box.type), but this model's \(destinationName) entity is another one")
                    continue
                }
                guard let k = inverseIndex(of: r, at: j, in: entity, destination: destination, place: place, problems: &problems) else { continue }
                let inverse = destination.relationships[k]
                let storage: RelationshipStorage
                switch (r.kind, inverse.kind) {
                case (.toOne, _):
                    storage = .foreignKey(slot: entity.relationshipSlots[j])
                case (_, .toOne):
                    storage = .inverseForeignKey(slot: destination.relationshipSlots[k])
                default:
                    // Named after the entities that declare the two sides: a sub-entity's
                    // inherited many-to-many shares its parent's table.
                    let own = entity.declaringEntity(ofRelationship: j), other = destination.declaringEntity(ofRelationship: k)
                    let mine = "\(own.name).\(r.name)", theirs = "\(other.name).\(inverse.name)"
                    let owns = mine <= theirs
                    let tableName = owns ? "Z_\(own.name)_\(r.name)" : "Z_\(other.name)_\(inverse.name)"
                    let table = JoinTable(name: tableName, sourceEntityName: owns ? own.name : other.name,
                                          targetEntityName: owns ? other.name : own.name)
                    joinTables[tableName] = table
                    storage = .joinTable(table, ownColumn: owns ? JoinTable.sourceColumn : JoinTable.targetColumn,
                                         otherColumn: owns ? JoinTable.targetColumn : JoinTable.sourceColumn)
                }
                list.append(ResolvedRelationship(source: entity, index: j, destination: destination, inverseIndex: k, storage: storage,
                                                 leadsToSubentities: subentities[destination.name] != nil))
            }
            resolved[ObjectIdentifier(entity)] = list
        }
        let tableNames = Set(joinTables.keys)
        for entity in entities where tableNames.contains(entity.name) {
            problems.append("entity \(entity.name) has the name of a join table; rename it")
        }
        return (resolved, joinTables.values.sorted { $0.name < $1.name })
    }

    /// The inverse of relationship `j` of `entity`: the one it names, or the one relationship
    /// of the destination that names it.
    private static func inverseIndex(
        of r: RelationshipDescription, at j: Int, in entity: EntityDescription, destination: EntityDescription,
        place: String, problems: inout [String]
    ) -> Int? {
        let k: Int
        if let inverseName = r.inverseName {
            guard let found = destination.relationshipIndex(named: inverseName) else {
                problems.append("\(place) names '\(inverseName)' as its inverse, which is not a relationship of \(destination.name)")
                return nil
            }
            let inverse = destination.relationships[found]
            // A relationship a sub-entity inherits has its parent's inverse, which leads to the parent.
            guard entity.isOrInherits(fromEntityNamed: inverse.destinationEntityName) else {
                problems.append("\(place) names \(destination.name).\(inverseName) as its inverse, but that leads to \(inverse.destinationEntityName), not back to \(entity.name)")
                return nil
            }
            if let back = inverse.inverseName, back != r.name {
                problems.append("\(place) names \(destination.name).\(inverseName) as its inverse, but that one names \(entity.name).\(back); make them agree")
                return nil
            }
            k = found
        } else {
            let candidates = destination.relationships.indices.filter { i in
                let other = destination.relationships[i]
                return other.inverseName == r.name && entity.isOrInherits(fromEntityNamed: other.destinationEntityName) && !(destination === entity && i == j)
            }
            guard candidates.count == 1 else {
                if candidates.isEmpty {
                    problems.append("\(place) has no inverse: every relationship needs one, so that both sides stay in step; write @Relationship(inverse: \\\(destination.name).<property>) on one of the two sides")
                } else {
                    problems.append("\(place) is named as the inverse of several relationships of \(destination.name); give each relationship its own inverse")
                }
                return nil
            }
            k = candidates[0]
        }
        if destination === entity && k == j {
            problems.append("\(place) is its own inverse, which Loom does not support yet; model it as two relationships that are each other's inverse")
            return nil
        }
        return k
    }
}
