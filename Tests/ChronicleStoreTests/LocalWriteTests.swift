import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

@Suite struct LocalWriteTests {
    @Test func saveTagHighlightShowsUpInProjectionAndSearch() throws {
        let f = try Fixture()
        let article = try f.save("https://example.com/swift", title: "Structured concurrency in Swift")
        try f.store.write("article.tag", entity: article, payload: ["tag": .text("swift")])
        let highlight = try f.store.write("highlight.create", payload: [
            "article_id": .text(article.lowercased), "quote": .text("actors isolate mutable state"), "note": .text("key idea"),
        ])
        #expect(try f.field(article, "title") == .text("Structured concurrency in Swift"))
        #expect(try f.tags(article) == ["swift"])
        #expect(try f.store.row(highlight.entityID)?["quote"] == .text("actors isolate mutable state"))

        let byTitle = try f.store.search("concurrency")
        #expect(byTitle.map(\.id) == [article.lowercased])
        #expect(byTitle.first?.snippet.contains("[concurrency]") == true)
        #expect(try f.store.search("actors").first?.id == article.lowercased, "a highlight hit counts for its article")
        #expect(try f.store.search("swif*").first?.id == article.lowercased)
        #expect(try f.store.status().unsentOps == 3)
    }

    @Test func badInputIsRefusedWithStableCodes() throws {
        let f = try Fixture()
        let article = try f.save()
        func code(_ body: () throws -> Void) -> String? {
            do { try body(); return nil } catch let error as ChronicleError { return error.code.rawValue } catch { return "other: \(error)" }
        }
        #expect(code { try f.store.write("article.save", payload: ["url": .text("not a url")]) } == "invalid_value")
        #expect(code { try f.store.write("article.progress", entity: article, payload: ["progress": .real(1.5)]) } == "invalid_value")
        #expect(code { try f.store.write("article.tag", entity: UUID(), payload: ["tag": .text("x")]) } == "unknown_entity")
        #expect(code { try f.store.write("article.parsed", entity: article, payload: ["text": .text("x")]) } == "server_only_field")
        #expect(code { try f.store.write("article.explode", entity: article) } == "unknown_op_type")
        #expect(code { try f.store.write("article.update", entity: article, payload: ["colour": .text("x")]) } == "unknown_field")
        #expect(try f.store.status().unsentOps == 1, "nothing was written by the refused ops")
    }

    @Test func anyTypedStringIsAValidSearch() throws {
        let f = try Fixture()
        try f.save(title: "Hello (world) \"quoted\" NEAR AND OR")
        for query in ["\"", "(", ")", "AND", "OR NOT", "NEAR(", "a:b", "🎉", "🎉 hello", "\"unbalanced", "*", "-x", "^", "hello*", "''", "x\"y", "col:hello"] {
            _ = try f.store.search(query)
        }
        #expect(try f.store.search("🎉 hello").count == 1)
        #expect(try f.store.search("NEAR").count == 1)
    }
}

@Suite struct SearchVisibilityTests {
    @Test func deletedRowsAndRowsOfDeletedOwnersAreNotFoundUntilRestored() throws {
        let f = try Fixture()
        let article = try f.save("https://example.com/k", title: "Kayaks")
        try f.store.write("article.tag", entity: article, payload: ["tag": .text("paddling")])
        try f.store.write("highlight.create", payload: ["article_id": .text(article.lowercased), "quote": .text("rivers bend")])
        #expect(try f.store.search("rivers").count == 1)
        #expect(try f.store.search("paddling").count == 1)
        try f.store.write("article.delete", entity: article)
        for query in ["kayaks", "rivers", "paddling"] { #expect(try f.store.search(query).isEmpty, "\(query) after delete") }
        #expect(try f.store.verify().passed)
        try f.store.write("article.restore", entity: article)
        for query in ["kayaks", "rivers", "paddling"] { #expect(try f.store.search(query).count == 1, "\(query) after restore") }
        #expect(try f.store.verify().passed)
        let before = try f.store.digest()
        try f.store.rebuild()
        #expect(try f.store.digest() == before)
        #expect(try f.store.search("rivers").count == 1)
    }
}
