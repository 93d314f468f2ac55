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

@Suite struct SearchRankingTests {
    @Test("Hits come best bm25 first, one per row, however many of a row's highlights match")
    func hitsAreRankedAndOnePerRow() throws {
        let f = try Fixture()
        let strong = try f.save("https://example.com/1", title: "Kestrel kestrel kestrel")
        let weak = try f.save("https://example.com/2", title: "A long walk past the quarry, the river, the old mill and one kestrel")
        let viaHighlights = try f.save("https://example.com/3", title: "Birds of prey")
        for quote in ["a kestrel hovers", "the kestrel dives", "kestrel again"] {
            try f.store.write("highlight.create", payload: ["article_id": .text(viaHighlights.lowercased), "quote": .text(quote)])
        }
        let hits = try f.store.search("kestrel")
        #expect(hits.map(\.id).count == 3, "three articles, each once")
        #expect(Set(hits.map(\.id)) == Set([strong, weak, viaHighlights].map(\.lowercased)))
        #expect(hits.first?.id == strong.lowercased, "the title saying it three times ranks first")
        #expect(hits.map(\.score) == hits.map(\.score).sorted(), "scores ascend (bm25: lower is better)")
        #expect(hits.firstIndex { $0.id == weak.lowercased }! > 0)
        #expect(try f.store.search("kestrel", limit: 1).map(\.id) == [strong.lowercased])
    }

    @Test("A one-word, phrase or prefix query scores each hit as bm25() does, whether or not the window holds every match")
    func onePhraseScoresAreBM25() throws {
        let f = try Fixture()
        var articles: [String: String] = [:]   // id → title
        for n in 0..<60 {
            let title = (n % 3 == 0 ? "kestrel over the river " : "heron by the mill ") + String(repeating: "kestrel ", count: n % 4) + "walk \(n)"
            articles[try f.save("https://example.com/\(n)", title: title).lowercased] = title
        }
        let projection = ProjectionSchema(schema: f.store.schema)
        let (_, index) = try #require(projection.searchIndexes.first { $0.1.index == "article_fts" })
        let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
        // `kest*` and `kestre*`: prefixes no prefix index serves, which FTS5 answers by merging
        // (titles are short rows, so not read on past the window: `ParallelSearchTests` has that).
        for text in ["kestrel", "\"over the river\"", "\"by the mill\"", "kes*", "kest*", "kestre*", "walk"] {
            for window in [20, 1_000] {   // 20: a full window ("by the mill" has 40 matches, so 20 older ones)
                let hits = try f.store.search(text, limit: 20, rankWindow: window)
                #expect(hits.count == 20, "\(text): a full page")
                for hit in hits where hit.matchedIn == "article_fts" {
                    let expected = try f.store.read { db in
                        try db.query("SELECT bm25(article_fts, \(weights)) FROM article_fts WHERE article_fts MATCH ?1 AND rowid = (SELECT rowid FROM article WHERE id = ?2)",
                                     [.text(SearchQuery(text).match), .text(hit.id)]) { $0.double(0) }
                    }
                    #expect([hit.score] == expected, "\(text), window \(window), \(articles[hit.id] ?? "?")")
                }
            }
        }
    }

    @Test("Past the ranking window, the newest matches are the ones ranked, and a page is still full")
    func rankingWindowKeepsTheNewestMatches() throws {
        let f = try Fixture()
        let window = DeviceStore.searchRankWindow
        // The oldest rows match best but fall outside the window of the newest `window` matches.
        var oldest: [String] = []
        for n in 0..<5 { oldest.append(try f.save("https://example.com/old\(n)", title: "heron heron heron heron").lowercased) }
        var newer: [String] = []
        for n in 0..<window { newer.append(try f.save("https://example.com/new\(n)", title: "heron number \(n) of many by the lake").lowercased) }
        let hits = try f.store.search("heron", limit: 25)
        #expect(hits.count == 25)
        #expect(Set(hits.map(\.id)).isDisjoint(with: oldest), "rows older than the window are not ranked")
        #expect(Set(hits.map(\.id)).isSubset(of: Set(newer)))
        // Equally good matches (same words, same lengths): the newest ones make the page.
        #expect(Set(hits.map(\.id)) == Set(newer.suffix(25)))
    }
}
