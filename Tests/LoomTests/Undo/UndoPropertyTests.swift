import Foundation
import Loom
@testable import LoomCore
import Testing

/// The undo stack's property: random runs of random edits (attributes, to-one, to-many,
/// ordered, many-to-many, inserts, cascade deletes, saves) in random steps; undoing k steps
/// restores exactly the graph before them and redoing them gives the graph after them, every
/// inverse consistent after every step; undoing everything, saved or not, then saving leaves the
/// store as it was before the first step.
///
/// `LOOM_UNDO_RUNS` sets the number of runs on the in-memory store (300 by default; the issue's
/// full figure is 10,000), `LOOM_UNDO_SEED` the first run's seed. A failure names its run's
/// seed: `LOOM_UNDO_SEED=<seed> LOOM_UNDO_RUNS=1` replays it. `LOOM_UNDO_TRACE=1` prints each
/// run's seed before it starts (a trap names no seed), `=2` also every edit, step and graph.
@MainActor
@Suite("Undo property", .timeLimit(.minutes(60)))
struct UndoPropertyTests {
    static var runs: Int { Int(ProcessInfo.processInfo.environment["LOOM_UNDO_RUNS"] ?? "") ?? 300 }
    static var firstSeed: UInt64 { UInt64(ProcessInfo.processInfo.environment["LOOM_UNDO_SEED"] ?? "") ?? 44_0000 }

    @Test("Random steps on the in-memory store: undo restores, redo re-applies, the store ends as it began")
    func inMemory() async throws {
        let started = Date()
        for run in 0..<Self.runs {
            var one = UndoRun(seed: Self.firstSeed &+ UInt64(run), kind: .inMemory)
            if ProcessInfo.processInfo.environment["LOOM_UNDO_TRACE"] != nil { FileHandle.standardError.write(Data("undo seed \(one.seed)\n".utf8)) }
            if try !one.check() { return }
            // The runs are on the main actor: let other main-actor work in between.
            await Task.yield()
        }
        print("Undo property: \(Self.runs) runs in \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
    }

    @Test("Random steps on the stores that save to files and servers", arguments: StoreKind.persistentCases)
    func persistent(kind: StoreKind) async throws {
        for run in 0..<max(1, Self.runs / 15) {
            var one = UndoRun(seed: Self.firstSeed &+ 1_000_000 &+ UInt64(run), kind: kind)
            if try !one.check() { return }
            await Task.yield()
        }
    }
}

/// One run: a container, a starting graph, random steps, then undo, redo and a save checked.
@MainActor
struct UndoRun {
    let seed: UInt64
    let kind: StoreKind
    var random: SeededGenerator
    var counter = 0

    init(seed: UInt64, kind: StoreKind) {
        self.seed = seed
        self.kind = kind
        self.random = SeededGenerator(seed: seed)
    }

    static let types: [any PersistentModel.Type] = StoreKind.graphTypes + [Playlist.self, Song.self]

    func makeContainer() throws -> PersistentContainer {
        let schema = try Schema(Self.types)
        switch kind {
        case .inMemory: return PersistentContainer(store: InMemoryStore(schema: schema))
        case .sqlite: return PersistentContainer(store: try SQLiteStore(url: TemporaryDirectory.make().appending(path: "undo.loom"), schema: schema))
        case .postgres: return PersistentContainer(store: try PostgresServer.makeStore(schema))
        }
    }

    mutating func int(_ bound: Int) -> Int { Int(random.next() % UInt64(max(bound, 1))) }
    mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[int(items.count)] }
    mutating func name(_ prefix: String) -> String {
        counter += 1
        return "\(prefix)\(counter)"
    }

    /// Runs the run; records an issue naming the seed and returns `false` at the first failure.
    mutating func check() throws -> Bool {
        let container = try makeContainer()
        let context = container.viewContext
        try seedGraph(context)
        try context.save()
        let start = try GraphState(context)
        let stack = UndoStack()
        context.undoManager = stack

        var before: [GraphState] = [], after: [GraphState] = []
        let steps = 1 + int(8)
        for step in 0..<steps {
            let state = try GraphState(context)
            UndoRun.trace("step \(step) from\n  " + state.lines.joined(separator: "\n  "))
            let count = stack.stepCounts.undo
            let edits = 1 + int(4)
            var run = self
            if chance(50) {
                try context.undoGroup("step \(step)") { for _ in 0..<edits { try run.edit(context) } }
            } else {
                for _ in 0..<edits { try run.edit(context) }
                context.processPendingChanges()
            }
            self = run
            if stack.stepCounts.undo > count {
                before.append(state)
                after.append(try GraphState(context))
                guard expectConsistent(after.last!, "after step \(step)") else { return false }
            }
            if chance(20) { UndoRun.trace("save"); try context.save() }
        }

        let k = before.isEmpty ? 0 : 1 + int(before.count)
        for i in 0..<k {
            context.undo()
            let now = try GraphState(context)
            UndoRun.trace("undo \(i)\n  " + now.lines.joined(separator: "\n  "))
            guard expect(now, before[before.count - 1 - i], "undoing step \(i + 1) of \(k)"), expectConsistent(now, "after undo \(i + 1)") else { return false }
        }
        if chance(30) { UndoRun.trace("save"); try context.save() }
        for i in 0..<k {
            context.redo()
            let now = try GraphState(context)
            UndoRun.trace("redo \(i)\n  " + now.lines.joined(separator: "\n  "))
            guard expect(now, after[after.count - k + i], "redoing step \(i + 1) of \(k)"), expectConsistent(now, "after redo \(i + 1)") else { return false }
        }
        if chance(50) { UndoRun.trace("save"); try context.save() }
        while context.canUndo { context.undo(); let now = try GraphState(context); UndoRun.trace("undo\n  " + now.lines.joined(separator: "\n  ")) }
        guard expect(try GraphState(context), start, "undoing every step") else { return false }
        try context.save()
        let stored = try GraphState(container.newBackgroundContext().performAndWait { try GraphState($0) })
        guard expect(stored, start, "the store after undoing every step and saving") else { return false }
        return true
    }

    static func trace(_ text: @autoclosure () -> String) {
        if ProcessInfo.processInfo.environment["LOOM_UNDO_TRACE"] == "2" { print("TRACE " + text()) }
    }

    func expect(_ actual: GraphState, _ expected: GraphState, _ what: String) -> Bool {
        guard actual != expected else { return true }
        let missing = expected.lines.filter { !actual.lines.contains($0) }, extra = actual.lines.filter { !expected.lines.contains($0) }
        Issue.record("Undo property, seed \(seed) (\(kind)): \(what): expected \(missing), found \(extra)")
        return false
    }

    func expectConsistent(_ state: GraphState, _ what: String) -> Bool {
        guard state.problems.isEmpty else {
            Issue.record("Undo property, seed \(seed) (\(kind)): \(what): inverses out of step: \(state.problems)")
            return false
        }
        return true
    }

    // MARK: The graph

    mutating func seedGraph(_ context: ManagedObjectContext) throws {
        var authors: [Author] = []
        for _ in 0..<(2 + int(3)) {
            let author = Author(name: name("a"), rating: int(5))
            context.insert(author)
            authors.append(author)
        }
        for _ in 0..<(2 + int(4)) {
            let novel = Novel(title: name("n"), pages: int(500), author: pick(authors))
            context.insert(novel)
            for _ in 0..<int(3) { novel.chapters.append(Chapter(title: name("c"))) }
            if chance(40) { context.insert(Review(text: name("r"), novel: novel)) }
        }
        for _ in 0..<(1 + int(3)) { context.insert(Tag(name: name("t"))) }
        for _ in 0..<(1 + int(2)) { context.insert(Playlist(title: name("p"))) }
        for _ in 0..<(1 + int(4)) { context.insert(Song(name: name("s"))) }
        if let author = pick(authors) { author.profile = Profile(bio: name("b")) }
    }

    func all<M: PersistentModel>(_ type: M.Type, _ context: ManagedObjectContext) throws -> [M] {
        try context.fetch(FetchRequest<M>()).sorted { $0.anyObjectID.primaryKey < $1.anyObjectID.primaryKey }
    }

    /// One random edit.
    mutating func edit(_ context: ManagedObjectContext) throws {
        defer { UndoRun.trace("edit done") }
        let authors = try all(Author.self, context), novels = try all(Novel.self, context)
        let tags = try all(Tag.self, context), chapters = try all(Chapter.self, context)
        let playlists = try all(Playlist.self, context), songs = try all(Song.self, context)
        let choice = int(20)
        UndoRun.trace("edit \(choice)")
        switch choice {
        case 0:
            let author = Author(name: name("a"), rating: int(5))
            context.insert(author)
            if chance(50) { author.mentor = pick(authors) }
        case 1:
            context.insert(Novel(title: name("n"), pages: int(500), author: pick(authors)))
        case 2:
            if let novel = pick(novels) {
                var list = novel.chapters
                list.insert(Chapter(title: name("c")), at: int(list.count + 1))
                novel.chapters = list
            } else {
                context.insert(Tag(name: name("t")))
            }
        case 3:
            if let novel = pick(novels) { context.insert(Review(text: name("r"), novel: novel)) } else { context.insert(Song(name: name("s"))) }
        case 4:
            if chance(50) { context.insert(Playlist(title: name("p"))) } else { context.insert(Song(name: name("s"))) }
        case 5:
            if let author = pick(authors) { if chance(50) { author.rating = int(10) } else { author.name = name("a") } }
        case 6:
            if let novel = pick(novels) { if chance(50) { novel.pages = int(900) } else { novel.year = chance(30) ? nil : 1900 + int(120) } }
        case 7:
            if let chapter = pick(chapters) { chapter.title = name("c") } else if let song = pick(songs) { song.name = name("s") }
        case 8:
            if let novel = pick(novels) { novel.author = chance(20) ? nil : pick(authors) }
        case 9:
            if let chapter = pick(chapters) { chapter.novel = chance(20) ? nil : pick(novels) }
        case 10:
            if let author = pick(authors) {
                let mentor = pick(authors)
                author.mentor = mentor === author || chance(20) ? nil : mentor
            }
        case 11:
            if let author = pick(authors) {
                switch int(3) {
                case 0: author.profile = Profile(bio: name("b"))
                case 1: author.profile = nil
                default: author.profile = pick(authors.compactMap(\.profile))
                }
            }
        case 12:
            if let author = pick(authors), let novel = pick(novels) {
                if chance(50) { author.novels.insert(novel) } else { author.novels.remove(novel) }
            }
        case 13:
            if let author = pick(authors), let student = pick(authors), student !== author {
                if chance(50) { author.students.insert(student) } else { author.students.remove(student) }
            }
        case 14:
            if let novel = pick(novels) {
                if chance(30) { novel.chapters = novel.chapters.shuffled(using: &random) }
                else if let chapter = pick(novel.chapters) { novel.chapters.removeAll { $0 === chapter } }
            }
        case 15:
            if let novel = pick(novels), let tag = pick(tags) {
                if chance(50) { novel.tags.insert(tag) } else { tag.novels.remove(novel) }
            }
        case 16:
            if let list = pick(playlists) {
                var songsNow = list.songs
                switch int(3) {
                case 0: songsNow.shuffle(using: &random)
                case 1: if !songsNow.isEmpty { songsNow.remove(at: int(songsNow.count)) }
                default: if let song = pick(songs), !songsNow.contains(where: { $0 === song }) { songsNow.insert(song, at: int(songsNow.count + 1)) }
                }
                list.songs = songsNow
            }
        case 17:
            if let song = pick(songs), let list = pick(playlists) {
                if chance(50) { song.playlists.insert(list) } else { song.playlists.remove(list) }
            }
        case 18:
            // Deletes: an author cascades to its novels, their chapters and reviews.
            switch int(6) {
            case 0: if let author = pick(authors) { context.delete(author) }
            case 1: if let novel = pick(novels) { context.delete(novel) }
            case 2: if let chapter = pick(chapters) { context.delete(chapter) }
            case 3:
                if let tag = pick(tags) {
                    tag.novels = []     // Tag.novels is noAction: emptied first, as an app must
                    context.delete(tag)
                }
            case 4: if let song = pick(songs) { context.delete(song) } else if let list = pick(playlists) { context.delete(list) }
            default: if let profile = pick(authors.compactMap(\.profile)) { context.delete(profile) }
            }
        default:
            if let review = pick(try all(Review.self, context)) {
                if chance(50) { review.stars = int(6) } else if let novel = pick(novels) { review.novel = novel }
            }
        }
    }
}

/// A context's graph as lines of text, one per object, with the keys of what it relates to;
/// and the inverses that disagree.
struct GraphState: Equatable {
    var lines: [String] = []
    var problems: [String] = []

    static func == (lhs: GraphState, rhs: GraphState) -> Bool { lhs.lines == rhs.lines }

    init(_ state: GraphState) { self = state }

    init(_ context: ManagedObjectContext) throws {
        func key(_ object: (any PersistentModel)?) -> String { object.map { "\($0.anyObjectID.primaryKey)" } ?? "-" }
        func keys(_ objects: some Sequence<some PersistentModel>) -> [Int64] { objects.map(\.anyObjectID.primaryKey).sorted() }
        func all<M: PersistentModel>(_ type: M.Type) throws -> [M] {
            try context.fetch(FetchRequest<M>()).sorted { $0.anyObjectID.primaryKey < $1.anyObjectID.primaryKey }
        }
        func agree(_ holds: Bool, _ what: @autoclosure () -> String) { if !holds { problems.append(what()) } }

        for a in try all(Author.self) {
            lines.append("Author \(key(a)) \(a.name) \(a.rating) mentor \(key(a.mentor)) profile \(key(a.profile)) novels \(keys(a.novels)) students \(keys(a.students))")
            for n in a.novels { agree(n.author === a, "Author \(key(a)) lists novel \(key(n)), whose author is \(key(n.author))") }
            for s in a.students { agree(s.mentor === a, "Author \(key(a)) lists student \(key(s)), whose mentor is \(key(s.mentor))") }
            if let m = a.mentor { agree(m.students.contains(a), "Author \(key(a))'s mentor \(key(m)) does not list it") }
            if let p = a.profile { agree(p.author === a, "Author \(key(a))'s profile \(key(p)) belongs to \(key(p.author))") }
        }
        for p in try all(Profile.self) {
            lines.append("Profile \(key(p)) \(p.bio) author \(key(p.author))")
            if let a = p.author { agree(a.profile === p, "Profile \(key(p))'s author \(key(a)) has profile \(key(a.profile))") }
        }
        for n in try all(Novel.self) {
            lines.append("Novel \(key(n)) \(n.title) \(n.pages) \(n.year.map(String.init) ?? "-") author \(key(n.author)) tags \(keys(n.tags)) chapters \(n.chapters.map(\.anyObjectID.primaryKey)) reviews \(keys(n.reviews))")
            if let a = n.author { agree(a.novels.contains(n), "Novel \(key(n))'s author \(key(a)) does not list it") }
            for t in n.tags { agree(t.novels.contains(n), "Novel \(key(n)) has tag \(key(t)), which does not list it") }
            for c in n.chapters { agree(c.novel === n, "Novel \(key(n)) lists chapter \(key(c)), whose novel is \(key(c.novel))") }
            for r in n.reviews { agree(r.novel === n, "Novel \(key(n)) lists review \(key(r)), whose novel is \(key(r.novel))") }
        }
        for t in try all(Tag.self) {
            lines.append("Tag \(key(t)) \(t.name) novels \(keys(t.novels))")
            for n in t.novels { agree(n.tags.contains(t), "Tag \(key(t)) lists novel \(key(n)), which does not have it") }
        }
        for c in try all(Chapter.self) {
            lines.append("Chapter \(key(c)) \(c.title) novel \(key(c.novel))")
            if let n = c.novel { agree(n.chapters.contains { $0 === c }, "Chapter \(key(c))'s novel \(key(n)) does not list it") }
        }
        for r in try all(Review.self) {
            lines.append("Review \(key(r)) \(r.text) \(r.stars) novel \(key(r.novel))")
            agree(r.novel.reviews.contains(r), "Review \(key(r))'s novel \(key(r.novel)) does not list it")
        }
        for p in try all(Playlist.self) {
            lines.append("Playlist \(key(p)) \(p.title) songs \(p.songs.map(\.anyObjectID.primaryKey))")
            for s in p.songs { agree(s.playlists.contains(p), "Playlist \(key(p)) lists song \(key(s)), which does not list it") }
        }
        for s in try all(Song.self) {
            lines.append("Song \(key(s)) \(s.name) playlists \(keys(s.playlists))")
            for p in s.playlists { agree(p.songs.contains { $0 === s }, "Song \(key(s)) is in playlist \(key(p)), which does not list it") }
        }
    }
}
