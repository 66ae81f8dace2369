import Foundation
import Loom
@_spi(LoomStore) import LoomCore
import LoomTools
import Testing

/// `loom query`'s text language: each construct parses to the node `#Predicate` would give,
/// errors point at their column, and the results equal `#Predicate` fetches on the same store.
@Suite("Text queries")
struct TextQueryTests {
    /// The graph models' schema as a tool sees it: from the saved record, without model types.
    static let schema: Schema = {
        let modelSchema = try! Schema(StoreKind.graphTypes)
        return try! Schema(record: modelSchema.record)
    }()

    func parse(_ text: String) throws -> TextQuery { try TextQuery(parsing: text, schema: Self.schema) }

    func predicate(_ text: String) throws -> PredicateNode? { try parse(text).predicate }

    /// The node of an attribute of `entity`, by name.
    func attribute(_ entity: String, _ name: String) -> PredicateNode {
        .attribute(Self.schema.entity(named: entity)!.attributeIndex(named: name)!)
    }

    func reference(_ entity: String, _ name: String) -> RelationshipReference { RelationshipReference(entityName: entity, name: name) }

    func text(_ s: String) -> PredicateNode { .constant(.text(s)) }
    func integer(_ v: Int64) -> PredicateNode { .constant(.integer(v)) }

    /// The error a query throws.
    func failure(_ text: String) -> TextQueryError? {
        do {
            _ = try parse(text)
            return nil
        } catch let error as TextQueryError {
            return error
        } catch {
            Issue.record(error)
            return nil
        }
    }

    // MARK: Constructs

    @Test func comparisonsBetweenAttributesAndLiterals() throws {
        let pages = attribute("Novel", "pages")
        #expect(try predicate("Novel where pages > 100") == .compare(.greater, pages, integer(100)))
        #expect(try predicate("Novel where pages >= -3") == .compare(.greaterOrEqual, pages, integer(-3)))
        #expect(try predicate("Novel where pages <= 2.5") == .compare(.lessOrEqual, pages, .constant(.real(2.5))))
        #expect(try predicate("Novel where 100 < pages") == .compare(.less, integer(100), pages))
        #expect(try predicate("Novel where pages = 1") == .compare(.equal, pages, integer(1)))
        #expect(try predicate("Novel where year != nil") == .compare(.notEqual, attribute("Novel", "year"), .constant(.null)))
        #expect(try predicate("Novel where pages == year") == .compare(.equal, pages, attribute("Novel", "year")))
        #expect(try predicate(#"Novel where title == "say \"hi\"\n\u{E9}\\""#) == .compare(.equal, attribute("Novel", "title"), text("say \"hi\"\n\u{E9}\\")))
        #expect(try parse("Novel").predicate == nil)
    }

    @Test func andBindsTighterThanOrAndNotTighterThanAnd() throws {
        let a = PredicateNode.compare(.greater, attribute("Novel", "pages"), integer(1))
        let b = PredicateNode.compare(.less, attribute("Novel", "pages"), integer(0))
        let c = PredicateNode.compare(.equal, attribute("Novel", "year"), .constant(.null))
        #expect(try predicate("Novel where pages > 1 or pages < 0 and not year == nil") == .or(a, .and(b, .not(c))))
        #expect(try predicate("Novel where pages > 1 || pages < 0 && !year == nil") == .or(a, .and(b, .not(c))))
        #expect(try predicate("Novel where (pages > 1 or pages < 0) and year == nil") == .and(.or(a, b), c))
        #expect(try predicate("Novel where not (pages > 1 and pages < 0)") == .not(.and(a, b)))
        #expect(try predicate("Novel where pages > 1 AND pages < 0 Or year == nil") == .or(.and(a, b), c))
        #expect(try predicate("Novel where pages > 1 and pages < 0 and year == nil") == .and(.and(a, b), c))
    }

    @Test func stringOperatorsAndTheirCaseOptions() throws {
        let title = attribute("Novel", "title")
        #expect(try predicate(#"Novel where title contains "un""#) == .string(.contains, title, text("un")))
        #expect(try predicate(#"Novel where title beginswith "D""#) == .string(.hasPrefix, title, text("D")))
        #expect(try predicate(#"Novel where title hasPrefix "D""#) == .string(.hasPrefix, title, text("D")))
        #expect(try predicate(#"Novel where title endswith "e""#) == .string(.hasSuffix, title, text("e")))
        #expect(try predicate(#"Novel where title contains[c] "UN""#) == .string(.contains, .lowercase(title), .lowercase(text("UN"))))
        #expect(try predicate(#"Novel where title ==[c] "dune""#) == .compare(.equal, .lowercase(title), .lowercase(text("dune"))))
        #expect(try predicate(#"Novel where title contains[cd] "é""#) == .string(.containsIgnoringCaseAndDiacritics, title, text("é")))
    }

    @Test func membershipInAListOfLiterals() throws {
        #expect(try predicate(#"Author where name in ["Ann", "Bob"]"#) == .isIn(attribute("Author", "name"), [.text("Ann"), .text("Bob")]))
        #expect(try predicate("Novel where year in [1965, nil]") == .isIn(attribute("Novel", "year"), [.integer(1965), .null]))
        #expect(try predicate("Novel where year in []") == .isIn(attribute("Novel", "year"), []))
    }

    @Test func toOneRelationshipPaths() throws {
        let author = reference("Novel", "author")
        #expect(try predicate(#"Novel where author.name == "Ann""#) == .compare(.equal, .toOne(author, attribute("Author", "name")), text("Ann")))
        #expect(try predicate(#"Novel where author.publisher.name == "Pan""#)
                == .compare(.equal, .toOne(author, .toOne(reference("Author", "publisher"), attribute("Publisher", "name"))), text("Pan")))
        let authorSlot = Self.schema.entity(named: "Novel")!.storedValueIndex(named: "author")!
        #expect(try predicate("Novel where author == nil") == .compare(.equal, .attribute(authorSlot), .constant(.null)))
        #expect(try predicate("Novel where author != 3") == .compare(.notEqual, .attribute(authorSlot), integer(3)))
        let uri = AnyObjectID(storeIdentifier: UUID(), entityName: "Author", primaryKey: 7).uriRepresentation.absoluteString
        #expect(try predicate("Novel where author == \"\(uri)\"") == .compare(.equal, .attribute(authorSlot), integer(7)))
    }

    @Test func anyAllAndCountOnToManyRelationships() throws {
        let novels = reference("Author", "novels")
        let pages = attribute("Novel", "pages")
        #expect(try predicate("Author where any novels.pages > 300") == .anyRelated(novels, .compare(.greater, pages, integer(300))))
        #expect(try predicate("Author where ALL novels.pages > 100") == .allRelated(novels, .compare(.greater, pages, integer(100))))
        #expect(try predicate(#"Author where any novels.tags.@count == 0"#) == .anyRelated(novels, .compare(.equal, .relatedCount(reference("Novel", "tags")), integer(0))))
        #expect(try predicate(#"Novel where any author.novels.title == "Emma""#)
                == .toOne(reference("Novel", "author"), .anyRelated(novels, .compare(.equal, attribute("Novel", "title"), text("Emma")))))
        let count = PredicateNode.compare(.greaterOrEqual, .relatedCount(novels), integer(2))
        #expect(try predicate("Author where novels.@count >= 2") == count)
        #expect(try predicate("Author where count(novels) >= 2") == count)
        #expect(try predicate("Novel where author.novels.@count > 1")
                == .compare(.greater, .toOne(reference("Novel", "author"), .relatedCount(novels)), integer(1)))
    }

    @Test func literalsTakeTheTypeOfTheAttribute() throws {
        let born = attribute("Author", "born")
        let day = try #require(ISO8601DateFormatter().date(from: "2000-01-01T00:00:00Z"))
        #expect(try predicate(#"Author where born > "2000-01-01""#) == .compare(.greater, born, .constant(.real(day.timeIntervalSinceReferenceDate))))
        #expect(try predicate(#"Author where born > "2000-01-01T00:00:00Z""#) == .compare(.greater, born, .constant(.real(day.timeIntervalSinceReferenceDate))))
        #expect(try predicate(#"Author where born > "2000-01-01T00:00:00.500Z""#) == .compare(.greater, born, .constant(.real(day.timeIntervalSinceReferenceDate + 0.5))))
        #expect(try predicate("Novel where true") == integer(1))
    }

    @Test func sortLimitAndOffset() throws {
        let query = try parse("Novel where pages > 0 sort author.name desc, title ASC, year limit 10 offset 5")
        let novel = Self.schema.entity(named: "Novel")!
        #expect(query.entity === novel)
        #expect(query.sortKeys == [
            SortKey(attributeIndex: 0, ascending: false, relationshipPath: [reference("Novel", "author")]),
            SortKey(attributeIndex: novel.attributeIndex(named: "title")!, ascending: true),
            SortKey(attributeIndex: novel.attributeIndex(named: "year")!, ascending: true),
        ])
        #expect(query.limit == 10)
        #expect(query.offset == 5)
        let bare = try parse("Novel limit 3")
        #expect(bare.limit == 3 && bare.offset == 0 && bare.sortKeys.isEmpty)
        #expect(try parse("Novel offset 2").offset == 2)
        #expect(try parse("`Novel` where `title` == \"x\"").predicate == .compare(.equal, attribute("Novel", "title"), text("x")))
    }

    // MARK: Errors

    @Test("Syntax errors report their column", arguments: [
        (#"Novel where title == "abc"#, 22, "no closing"),
        ("Novel where title ==", 21, "expected a property name or a value"),
        ("Novel where (pages > 1", 23, "expected ')'"),
        ("Novel where pages # 3", 19, "unexpected character '#'"),
        ("Novel where pages > 1 sortt title", 23, "expected 'and', 'or', 'sort', 'limit', 'offset' or the end of the query"),
        ("Novel limit x", 13, "'limit' takes a whole number"),
        ("Novel where title", 18, "expected a comparison"),
        (#"Novel where title == "a\qb""#, 24, "unknown escape"),
        ("Novel where pages > 1 and", 26, "expected a property name or a value"),
        (#"Novel where title contains[x] "a""#, 27, "expected an option in brackets"),
        ("42 where pages > 1", 1, "expected an entity name"),
        ("Novel where year in [1, 2", 26, "expected ',' or ']'"),
        ("Novel where pages > 12abc", 23, "runs into a name"),
        ("Novel where year in [pages]", 22, "literals only"),
        ("Novel where pages > 1 limit 2 sort title", 31, "expected 'offset' or the end of the query"),
    ] as [(String, Int, String)])
    func syntaxErrorColumns(query: String, column: Int, message: String) throws {
        let error = try #require(failure(query))
        #expect(error.code == .syntax)
        #expect(error.column == column, "\(error)")
        #expect(error.message.contains(message), "\(error.message)")
    }

    @Test func unknownNamesAreNamedWithTheNearestOne() throws {
        let entity = try #require(failure("Novle where pages > 1"))
        #expect(entity.code == .unknownEntity && entity.column == 1)
        #expect(entity.message.contains("no entity 'Novle'") && entity.message.contains("did you mean 'Novel'?"))
        let attribute = try #require(failure(#"Novel where titel == "x""#))
        #expect(attribute.code == .unknownProperty && attribute.column == 13)
        #expect(attribute.message == "no attribute or relationship 'titel' in Novel (did you mean 'title'?)")
        let relationship = try #require(failure(#"Novel where autor.name == "x""#))
        #expect(relationship.column == 13 && relationship.message.hasPrefix("no relationship 'autor' in Novel (did you mean 'author'?)"))
        let far = try #require(failure(#"Novel where author.zzz == "x""#))
        #expect(far.column == 20 && far.message == "no attribute or relationship 'zzz' in Author")
        let sortKey = try #require(failure("Novel sort nme"))
        #expect(sortKey.code == .unknownProperty && sortKey.column == 12)
    }

    @Test func pathsAndLiteralsThatDoNotFitAreRefused() throws {
        let toMany = try #require(failure(#"Author where novels.title == "x""#))
        #expect(toMany.code == .invalidPath && toMany.column == 14 && toMany.message.contains("any novels.title"))
        let throughAttribute = try #require(failure(#"Novel where title.name == "x""#))
        #expect(throughAttribute.code == .invalidPath && throughAttribute.column == 19)
        let wrongType = try #require(failure(#"Novel where pages == "many""#))
        #expect(wrongType.code == .typeMismatch && wrongType.column == 22 && wrongType.message.contains("Novel.pages is an integer64 attribute"))
        let badDate = try #require(failure(#"Author where born > "yesterday""#))
        #expect(badDate.code == .typeMismatch && badDate.column == 21 && badDate.message.contains("ISO-8601"))
        let anyWithoutToMany = try #require(failure("Novel where any author.name == 1"))
        #expect(anyWithoutToMany.code == .invalidPath && anyWithoutToMany.column == 13)
        let anyAgainstPath = try #require(failure("Author where any novels.pages > rating"))
        #expect(anyAgainstPath.code == .unsupported && anyAgainstPath.column == 33)
        let textOperatorOnNumber = try #require(failure(#"Novel where pages contains "1""#))
        #expect(textOperatorOnNumber.code == .typeMismatch && textOperatorOnNumber.column == 13)
        let sortToMany = try #require(failure("Author sort novels.title"))
        #expect(sortToMany.code == .invalidPath && sortToMany.column == 13)
    }

    @Test func anErrorRendersTheQueryWithACaretUnderTheColumn() throws {
        let error = try #require(failure(#"Novel where titel == "Dune""#))
        #expect(error.caretDiagram == "Novel where titel == \"Dune\"\n            ^")
        #expect(error.description.hasPrefix("error: no attribute or relationship 'titel' in Novel"))
        let multiline = try #require(failure("Novel\nwhere titel == 1"))
        #expect(multiline.caretDiagram == "where titel == 1\n      ^")
    }

    @Test("A predicate nested more than 256 levels or joining more than 1000 conditions is refused: deeper, its translation would overflow the stack")
    func deeplyNestedPredicatesAreRefused() throws {
        #expect(failure("Author where " + String(repeating: "not ", count: 255) + "name == \"a\"") == nil)
        #expect(failure("Author where " + String(repeating: "not ", count: 3000) + "name == \"a\"")?.code == .unsupported)
        #expect(failure("Author where " + String(repeating: "(", count: 300) + "true" + String(repeating: ")", count: 300))?.code == .unsupported)
        #expect(failure("Author where " + Array(repeating: "name == \"a\"", count: 1002).joined(separator: " or "))?.code == .unsupported)
    }
}
