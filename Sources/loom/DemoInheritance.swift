import DebianPackages
import Foundation
import Loom
#if PostgreSQL
import LoomPostgreSQL
#endif

/// The inheritance part's model: the packages as a catalog whose entries are of several kinds.
/// `CatalogEntry` is abstract (no object of its own); a development library is a library. Its
/// uniqueness constraint holds across every kind of entry.
@Model(abstract: true) class CatalogEntry {
    #Unique<CatalogEntry>([\.name, \.architecture])
    var name: String = ""
    var architecture: String = ""
    var sizeKiB: Int = 0
    var shelf: CatalogShelf?                              // declared on the parent, inherited by every kind
}

@Model class LibraryEntry: CatalogEntry {
    var section: String = ""
}

@Model final class DevelopmentLibraryEntry: LibraryEntry {
    var headers: Bool = true
}

@Model final class ProgramEntry: CatalogEntry {
    var priority: String?
    var maintainer: CatalogMaintainer?                    // a leaf's relationship
}

/// Who maintains the programs: a flat entity related to a leaf of the hierarchy.
@Model final class CatalogMaintainer {
    var name: String = ""
    @Relationship(inverse: \ProgramEntry.maintainer) var programs: Set<ProgramEntry> = []
}

/// Where entries are shelved, by the first letter of their name: a flat entity whose to-many
/// leads to the abstract parent, so it holds entries of every kind.
@Model final class CatalogShelf {
    var letter: String = ""
    @Relationship(inverse: \CatalogEntry.shelf) var entries: Set<CatalogEntry> = []
}

extension DemoCommand {
    /// Saves some packages as a small hierarchy in a store of its own next to the demo's (a
    /// temporary file, or a schema of the same PostgreSQL database), then fetches the abstract
    /// parent polymorphically, filters by type with `is` and `as?`, and checks each count
    /// against the per-class ones.
    @MainActor
    static func showInheritance(of packages: [DebianPackage], beside location: Location) async throws {
        let place = try scratch(beside: location, named: "catalog")
        defer { destroy(place) }
        let models: [any PersistentModel.Type] = [CatalogEntry.self, LibraryEntry.self, DevelopmentLibraryEntry.self, ProgramEntry.self, CatalogMaintainer.self, CatalogShelf.self]
        let schema = try Schema(models)
        let container = switch place {
        case .file(let url): PersistentContainer(store: try SQLiteStore(url: url, schema: schema))
        #if PostgreSQL
        case .postgres(let configuration, _): PersistentContainer(store: try PostgreSQLStore(configuration: configuration, schema: schema))
        #endif
        }
        let view = container.viewContext
        var maintainers: [String: CatalogMaintainer] = [:]
        var shelves: [String: CatalogShelf] = [:]
        for package in packages {
            let section = package.section ?? ""
            let entry: CatalogEntry
            if section.hasSuffix("libdevel") {
                entry = DevelopmentLibraryEntry(context: view)
            } else if section.hasSuffix("libs") {
                let library = LibraryEntry(context: view)
                library.section = section
                entry = library
            } else {
                let program = ProgramEntry(context: view)
                program.priority = package.priority
                if let name = package.maintainer?.name {
                    let maintainer = maintainers[name] ?? CatalogMaintainer(context: view)
                    maintainer.name = name
                    maintainers[name] = maintainer
                    program.maintainer = maintainer
                }
                entry = program
            }
            entry.name = package.name
            entry.architecture = package.architecture ?? ""
            entry.sizeKiB = package.installedSizeKiB ?? 0
            let letter = String(package.name.prefix(1))
            let shelf = shelves[letter] ?? CatalogShelf(context: view)
            shelf.letter = letter
            shelves[letter] = shelf
            entry.shelf = shelf
        }
        try view.save()

        // The constraint declared on the abstract parent: a program named as a saved library of
        // the same architecture is refused by the store, though they are in different tables.
        var refusal = "no library to copy"
        if let library = try view.fetch(FetchRequest<LibraryEntry>(sortBy: [SortDescriptor(\.name)])).first {
            let copy = ProgramEntry(context: view)
            copy.name = library.name
            copy.architecture = library.architecture
            do {
                try view.save()
                throw LoomError(.storeFailure, "The inheritance demo's program named \(library.name) was saved beside the library of that name: the uniqueness constraint of CatalogEntry did not hold across its sub-entities.")
            } catch let error as LoomError where error.code == .uniquenessViolation {
                let existing = error.conflicts.first.flatMap { conflict -> String? in
                    if case .uniqueness(_, let existing) = conflict.kind { return existing.entityName }
                    return nil
                } ?? "?"
                refusal = "a ProgramEntry named \(library.name) (\(library.architecture)) is refused: \(error.code), it conflicts with the saved \(existing)"
                view.delete(copy)
            }
        }

        // A fetch of the abstract parent: every entry, each of its own class, in one order.
        var largest = FetchRequest<CatalogEntry>(sortBy: [SortDescriptor(\.sizeKiB, order: .reverse), SortDescriptor(\.name)])
        largest.fetchLimit = 3
        let top = try view.fetch(largest).map { "\($0.name) (\(type(of: $0)), \($0.sizeKiB) KiB)" }
        let all = try view.count(for: FetchRequest<CatalogEntry>())
        let libraries = try view.count(for: FetchRequest<CatalogEntry>(predicate: #Predicate { $0 is LibraryEntry }))
        var plain = FetchRequest<LibraryEntry>()
        plain.includesSubentities = false
        let plainLibraries = try view.count(for: plain)
        let development = try view.count(for: FetchRequest<DevelopmentLibraryEntry>())
        let programs = try view.count(for: FetchRequest<ProgramEntry>())
        let important = try view.count(for: FetchRequest<CatalogEntry>(predicate: #Predicate { ($0 as? ProgramEntry)?.priority == "important" }))
        // Aggregates and a batched fetch of the parent cover every sub-entity's table too.
        let totals = try view.fetch(PropertyFetchRequest<CatalogEntry>(properties: [.count(as: "entries"), .sum(\.sizeKiB, as: "kib"), .average(\.sizeKiB, as: "mean")]))
        let (counted, kib, mean) = (try totals[0]["entries", as: Int.self], try totals[0]["kib", as: Int?.self] ?? 0, try totals[0]["mean", as: Double?.self] ?? 0)
        let batched = try view.fetch(FetchRequest<CatalogEntry>(sortBy: [SortDescriptor(\.name)]), batchSize: 100)
        let batchedKiB = batched.reduce(0) { $0 + $1.sizeKiB }
        // The leaf's relationship, from the parent's fetch through `as?`, against the
        // maintainer's own to-many.
        var busiest = FetchRequest<CatalogMaintainer>(sortBy: [SortDescriptor(\.name)])
        busiest.relationshipKeyPathsForPrefetching = [\.programs]
        let most = try view.fetch(busiest).max { $0.programs.count < $1.programs.count }
        let maintainerName = most?.name ?? ""
        let maintained = try view.count(for: FetchRequest<CatalogEntry>(predicate: #Predicate { ($0 as? ProgramEntry)?.maintainer?.name == maintainerName }))
        let maintainedDirectly = most?.programs.count ?? 0
        // The parent's own relationship: a shelf's entries are of every kind, and a predicate
        // through the to-one to the shelf finds as many.
        let fullest = try view.fetch(FetchRequest<CatalogShelf>(sortBy: [SortDescriptor(\.letter)])).max { $0.entries.count < $1.entries.count }
        let fullestLetter = fullest?.letter ?? ""
        let shelved = fullest?.entries.count ?? 0
        let shelvedKinds = Set((fullest?.entries ?? []).map { String(describing: type(of: $0)) }).sorted()
        let onShelf = try view.count(for: FetchRequest<CatalogEntry>(predicate: #Predicate { $0.shelf?.letter == fullestLetter }))
        try await container.close()
        print("\nInheritance: \(packages.count) packages saved as catalog entries of three classes under an abstract CatalogEntry (\(plainLibraries) libraries, \(development) development libraries, \(programs) programs) in \(place)")
        print("  a fetch of CatalogEntry counts \(all) entries; the largest: \(top.joined(separator: ", "))")
        print("  `$0 is LibraryEntry` keeps \(libraries) (libraries and development libraries); `($0 as? ProgramEntry)?.priority == \"important\"` keeps \(important)")
        print("  #Unique<CatalogEntry>([\\.name, \\.architecture]) holds across the sub-entities' tables: \(refusal)")
        print("  one values fetch of CatalogEntry: \(counted) entries, \(kib) KiB in all, \(Int(mean.rounded())) KiB on average; a batched fetch of it reads \(batched.count) in batches of \(batched.batchSize)")
        if let most {
            print("  `($0 as? ProgramEntry)?.maintainer?.name == \"\(most.name)\"` keeps \(maintained) entries, as many as that maintainer's programs (\(maintainedDirectly))")
        }
        print("  a relationship declared on the abstract parent: shelf \"\(fullestLetter)\" holds \(shelved) entries of \(shelvedKinds.count) classes (\(shelvedKinds.joined(separator: ", "))); `$0.shelf?.letter == \"\(fullestLetter)\"` keeps \(onShelf)")
        if onShelf != shelved || maintained != maintainedDirectly || counted != all || batched.count != all || batchedKiB != kib || all != packages.count || all != plainLibraries + development + programs || libraries != plainLibraries + development {
            throw LoomError(.storeFailure, "The inheritance demo's counts disagree: \(all) entries, \(plainLibraries) + \(development) + \(programs) by class, \(libraries) libraries, \(maintained) of \(maintainedDirectly) maintained programs, \(onShelf) of \(shelved) shelved entries.")
        }
    }
}
