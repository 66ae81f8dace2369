import Foundation
import Loom
@_spi(LoomStore) @testable import LoomCore
import Testing

/// The static translation of `#Predicate` (through the conditional conformances of
/// `PredicateTranslation+Static.swift`) builds the nodes the general, dynamic translation builds.
@Suite("Predicate translation")
struct PredicateTranslationTests {
    /// The node of each translation, as a fetch sets the translator up, and whether the static
    /// one applied to the whole tree.
    func translations<M: PersistentModel>(_ predicate: Predicate<M>, in schema: Schema) throws -> (translated: PredicateNode, general: PredicateNode, isStatic: Bool) {
        let entity = try schema.requireEntity(named: M.entity.name)
        var translator = PredicateTranslator(schema: schema, entity: entity, propertyName: M.loomPropertyName(for:))
        translator.bindings[predicate.variable.key] = .object
        return (try translator.translate(predicate: predicate.expression), try translator.translate(any: predicate.expression),
                predicate.expression is any LoomStaticExpression)
    }

    @Test("Comparisons, logic, optionals, strings and constants: the same nodes, most through the static translation")
    func sameNodes() throws {
        let schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        let low = 100, high = 300, wanted = [120, 400], science = Genre.science
        let rating: Double? = 2.5
        let predicates: [(Predicate<Book>, isStatic: Bool)] = [
            (#Predicate { $0.pages >= low && $0.pages < high }, true),
            (#Predicate { $0.pages < 200 || $0.pages == 500 && $0.title != "x" }, true),
            (#Predicate { !($0.pages > 100) }, true),
            (#Predicate { $0.rating == nil }, true),
            (#Predicate { ($0.rating ?? -1) > 1.5 }, true),
            (#Predicate { $0.rating! > 2 }, true),
            (#Predicate { $0.rating.flatMap { $0 >= 2 } == true }, true),
            (#Predicate { $0.rating == rating }, true),
            (#Predicate { $0.genre == science }, true),
            (#Predicate { wanted.contains($0.pages) }, true),
            (#Predicate { $0.pages % 200 == 0 }, true),
            (#Predicate { $0.title.count == 5 && $0.title.starts(with: "G") }, true),
            (#Predicate { $0.title.localizedStandardContains("EPS") || $0.title.contains("ta") }, true),
            (#Predicate { $0.title.localizedLowercase == "gamma" }, true),
        ]
        for (predicate, isStatic) in predicates {
            let (staticNode, dynamicNode, tookStatic) = try translations(predicate, in: schema)
            #expect(staticNode == dynamicNode)
            #expect(tookStatic == isStatic)
        }
    }

    @Test("Through relationships: the same nodes")
    func sameNodesThroughRelationships() throws {
        let schema = try SQLDialectTests.graphSchema()
        let novels: [Predicate<Novel>] = [
            #Predicate { $0.author?.name == "Ann" },
            #Predicate { $0.author != nil && $0.author?.rating ?? 0 < 3 },
            #Predicate { $0.author?.publisher?.name == "Pan" },
            #Predicate { $0.author!.rating > 3 },
            #Predicate { $0.tags.isEmpty },
        ]
        for predicate in novels {
            let (staticNode, dynamicNode, _) = try translations(predicate, in: schema)
            #expect(staticNode == dynamicNode)
        }
        let authors: [Predicate<Author>] = [
            #Predicate { $0.novels.allSatisfy { $0.pages > 100 } },
            #Predicate { !$0.novels.isEmpty && $0.novels.contains { $0.pages > 300 } },
        ]
        for predicate in authors {
            let (staticNode, dynamicNode, _) = try translations(predicate, in: schema)
            #expect(staticNode == dynamicNode)
        }
    }

    @Test("Constants of the common types convert by their type as the general conversion does")
    func commonConstants() throws {
        let date = Date(timeIntervalSince1970: 1_234_567.25)
        #expect(StoredValue.convertingCommon(42) == StoredValue.converting(42))
        #expect(StoredValue.convertingCommon(-2.5) == StoredValue.converting(-2.5))
        #expect(StoredValue.convertingCommon(Int64.min) == StoredValue.converting(Int64.min))
        #expect(StoredValue.convertingCommon(true) == StoredValue.converting(true))
        #expect(StoredValue.convertingCommon(false) == StoredValue.converting(false))
        #expect(StoredValue.convertingCommon(date) == StoredValue.converting(date))
        #expect(StoredValue.convertingCommon("a\u{0}é") == StoredValue.converting("a\u{0}é"))
        #expect(StoredValue.convertingCommon(42) == .integer(42))
        // Anything else is left to the general conversion.
        #expect(StoredValue.convertingCommon(Int32(7)) == nil)
        #expect(StoredValue.convertingCommon(Optional(7)) == nil)
        #expect(StoredValue.convertingCommon(Genre.science) == nil)
        #expect(StoredValue.convertingCommon(UUID()) == nil)
    }

    @Test("Key paths are found by object, by value past the remembered limit, and never by a stale object")
    func keyPathNames() throws {
        // A literal: the same object each time, remembered once.
        for _ in 0..<3 { #expect(Book.loomPropertyName(for: \Book.title) == "title") }
        // Key paths made at run time are new objects each time: each is found by value, and
        // the table remembers no more than its limit.
        let names = ["isbn", "title", "pages", "rating", "genre", "published"]
        for i in 0..<(KeyPathNames.identityLimit + 50) {
            let name = names[i % names.count]
            let made = try #require(Book._loomKeyPath(for: name, optionalChained: false))
            let appended = try #require((\Book.self as AnyKeyPath).appending(path: made))
            #expect(Book.loomPropertyName(for: appended) == name)
        }
        #expect(KeyPathNames.rememberedCount(for: Book.self) <= KeyPathNames.identityLimit)
        #expect(Book.loomPropertyName(for: \Book.scratch) == nil)   // transient: not persistent
        #expect(Book.loomPropertyName(for: \Book.pages) == "pages")
    }

    @Test("What Loom cannot translate is still an error naming it")
    func unsupportedStaysAnError() throws {
        let schema = try Schema([Book.self, Shelf.self, Sample.self, Tally.self])
        let predicate = #Predicate<Book> { $0.pages > ([1, 2].max() ?? 0) }
        let entity = try schema.requireEntity(named: "Book")
        var translator = PredicateTranslator(schema: schema, entity: entity, propertyName: Book.loomPropertyName(for:))
        translator.bindings[predicate.variable.key] = .object
        let error = try #require(throws: LoomError.self) { try translator.translate(predicate: predicate.expression) }
        #expect(error.code == .unsupportedPredicate)
        #expect(error.message.contains("SequenceMaximum"))
    }
}
