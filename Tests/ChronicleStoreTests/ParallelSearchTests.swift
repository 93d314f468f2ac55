import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// `search(parallel:)`: a search ranks its indexes on two read connections at once when both
/// can be given the same snapshot, and must return exactly what one connection returns.
@Suite struct ParallelSearchTests {
    /// A premium library of articles with tags, highlights, notes and full text, some rows
    /// renamed or deleted (`ParallelSearchBuildTests.library`).
    func premiumLibrary(articles: Int) throws -> Fixture {
        let f = try Fixture(seed: 3)
        let server = ServerLog(library: f.store.libraryID)
        let build = ParallelSearchBuildTests()
        var batches = build.library(server, articles: articles)
        let saved = batches.joined().filter { $0.type == "article.save" }.map(\.entityID)
        var extra = [server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("premium")])]
        for (i, id) in saved.enumerated() where i % 2 == 0 {
            // 203 words in every other article (the index has a row for each, with text or not):
            // the full text is an index of long rows (`SearchRank.hasLongRows`).
            let words = (0..<10).map { _ in ParallelSearchBuildTests.words.shuffled().joined(separator: " ") }.joined(separator: " ")
            extra.append(server.op("article.parsed", entity: id, from: Op.serverDeviceID,
                                   payload: ["text": .text("body \(i) passage \(words)"), "word_count": .integer(203)]))
        }
        batches.append(extra)
        for batch in batches { try f.store.applyConfirmed(batch) }
        return f
    }

    static let queries: [String] = {
        let words = ParallelSearchBuildTests.words
        // Prefixes of 2 bytes (a prefix index) and of 4 (merged; read on in the full text).
        var queries = words + words.map { String($0.prefix(2)) + "*" } + words.map { String($0.prefix(4)) + "*" } + words.map { $0 + "s" }
        for (a, b) in zip(words, words.dropFirst(3) + words.prefix(3)) {
            queries += ["\(a) \(b)", "\"\(a) \(b)\"", "\(a) OR \(b)", "\(a) -\(b)"]
        }
        // What people type: operators, unbalanced quotes and parentheses, emoji, nothing that matches.
        return queries + ["renamed", "body 12", "\"tunnel", "(copper", "NEAR(tunnel plane)", "🙂 ember", "zzzz", "a*", "-", "\"\""]
    }()

    @Test("Two connections give the same hits, scores, snippets and titles as one, for every kind of query")
    func twoConnectionsGiveTheHitsOfOne() throws {
        let f = try premiumLibrary(articles: 400)
        // The split sends indexes to both connections.
        let workers = try f.store.read { db in try f.store.searchWorkers(db) }
        #expect(workers.count == f.store.searchPlans.count)
        #expect(Set(workers) == [0, 1], "\(workers)")
        #expect(try f.store.read { first in try f.store.read { second in try f.store.sameSnapshot(first, second) } })
        var nonEmpty = 0
        for query in Self.queries {
            for (limit, window) in [(20, DeviceStore.searchRankWindow), (5, 30), (100, 1_000), (1, 1)] {
                let one = try f.store.search(query, limit: limit, rankWindow: window, parallel: false)
                let two = try f.store.search(query, limit: limit, rankWindow: window, parallel: true)
                #expect(two == one, "\(query) limit \(limit) window \(window)")
                if !one.isEmpty { nonEmpty += 1 }
            }
        }
        #expect(nonEmpty > 3 * Self.queries.count, "most queries find something: \(nonEmpty)")
        #expect(try f.store.search("body", limit: 200, parallel: true).contains { $0.matchedIn == "article_text_fts" })
    }

    @Test("A long prefix is read on past its window in the index of long rows only, with bm25()'s scores")
    func longPrefixesReadOnInLongRows() throws {
        let f = try premiumLibrary(articles: 400)
        let layout = try f.store.read { db in try f.store.searchLayout(db) }
        let longRows = Dictionary(uniqueKeysWithValues: zip(f.store.searchPlans.map(\.index), layout.longRows))
        let totals = try f.store.read { db in try f.store.searchPlans.map { try DeviceStore.indexTotals($0.index, in: db) } }
        #expect(longRows["article_text_fts"] == true, "203 words in every other row: \(totals)")
        #expect(longRows["article_fts"] == false && longRows["article_tags_fts"] == false)
        #expect(SearchRank.hasLongRows(rows: 10, tokens: 1_000) && !SearchRank.hasLongRows(rows: 10, tokens: 999))
        #expect(!SearchRank.hasLongRows(rows: 0, tokens: 0))
        let projection = ProjectionSchema(schema: f.store.schema)
        let (_, text) = try #require(projection.searchIndexes.first { $0.1.index == "article_text_fts" })
        let weights = text.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
        var fromText = 0
        // 5 and 6 bytes read on in the full text; 4 bytes has a prefix index there (a document index)
        // and is read windowed, with the same scores.
        // ("passage" and "body" are in the full text only.)
        for query in ["tunne*", "glaci*", "passa*", "tunn*", "body*"] {
            #expect(SearchRank.readsOn(SearchQuery(query)))
            #expect(SearchRank.readsOn(SearchQuery(query), prefixLengths: ProjectionSchema.prefixIndexLengths(of: text)) == (query.count > 5))
            for window in [5, DeviceStore.searchRankWindow] {   // 5: a full window, its older matches counted by reading on
                for parallel in [false, true] {
                    for hit in try f.store.search(query, limit: 50, rankWindow: window, parallel: parallel) where hit.matchedIn == "article_text_fts" {
                        let expected = try f.store.read { db in
                            try db.query("SELECT bm25(article_text_fts, \(weights)) FROM article_text_fts WHERE article_text_fts MATCH ?1 AND rowid = (SELECT rowid FROM article WHERE id = ?2)",
                                         [.text(SearchQuery(query).match), .text(hit.id)]) { $0.double(0) }
                        }
                        #expect([hit.score] == expected, "\(query), window \(window)")
                        fromText += 1
                    }
                }
            }
        }
        #expect(fromText > 20, "the full text gave hits: \(fromText)")
    }

    @Test("A search index an earlier build defined otherwise is made again, and filled, at the store's upkeep")
    func redefinedIndexesAreMadeAgainOnOpen() throws {
        let f = try premiumLibrary(articles: 120)
        #expect(try f.store.recreateRedefinedSearchIndexes() == [], "a store of this build has nothing to redo")
        let queries = ["tunn*", "glacier", "\"copper orbit\"", "body"]
        let before = try queries.map { try f.store.search($0, limit: 50) }
        let projection = ProjectionSchema(schema: f.store.schema)
        let (entity, text) = try #require(projection.searchIndexes.first { $0.1.index == "article_text_fts" })
        let current = projection.searchTableStatement(text, in: entity)
        // The full-text index as builds before 12-03 defined it: no prefix index of 4.
        let earlier = current.replacingOccurrences(of: "prefix='2 3 4'", with: "prefix='2 3'")
        #expect(earlier != current)
        try f.store.writeTransaction { db in
            try db.execute("DROP TABLE article_text_fts")
            try db.execute(earlier)
            try db.execute(ProjectionSchema.searchRankSQL(text))
            try db.execute("INSERT INTO article_text_fts(article_text_fts) VALUES ('rebuild')")
        }
        let definition = { try f.store.read { db in try db.scalarText("SELECT sql FROM sqlite_schema WHERE name = 'article_text_fts'") } }
        #expect(try definition() == earlier)
        #expect(try queries.map { try f.store.search($0, limit: 50) } == before, "the same results either way")

        // On a full disk the remake fails whole: the old index stays, and answers as before.
        // (A filler takes the file's free pages first, so the larger index cannot fit.)
        try f.store.writeTransaction { db in
            try db.execute("CREATE TABLE filler(x)")
            try db.execute("INSERT INTO filler VALUES (zeroblob((SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size)))")
        }
        try f.store.limitFileSize(pages: try f.store.pageCount())
        #expect(throws: (any Error).self) { try f.store.recreateRedefinedSearchIndexes() }
        try f.store.limitFileSize(pages: nil)
        try f.store.writeTransaction { db in try db.execute("DROP TABLE filler") }
        #expect(try definition() == earlier)
        #expect(try queries.map { try f.store.search($0, limit: 50) } == before)

        let reopened = try DeviceStore.open(at: f.path)
        #expect(try reopened.upkeepDue().redefinedSearchIndexes == ["article_text_fts"], "opening changes nothing")
        #expect(try reopened.performUpkeep().redefinedSearchIndexes == ["article_text_fts"])
        #expect(try reopened.read { db in try db.scalarText("SELECT sql FROM sqlite_schema WHERE name = 'article_text_fts'") } == current)
        #expect(try queries.map { try reopened.search($0, limit: 50) } == before)
        #expect(try reopened.search("body", limit: 50).contains { $0.matchedIn == "article_text_fts" }, "refilled")
        let report = try reopened.verify()
        #expect(report.passed, "\(report.checks.filter { !$0.passed })")
        #expect(try reopened.recreateRedefinedSearchIndexes() == [])
    }

    @Test("The indexes are split into two shares of about equal size, read again as the library grows")
    func sharesFollowTheIndexesSizes() throws {
        #expect(DeviceStore.shares([100, 60, 50, 0]) == [0, 1, 1, 0])
        #expect(DeviceStore.shares([5, 5]) == [0, 1])
        let f = try Fixture()
        let empty = try f.store.read { db in try f.store.searchWorkers(db) }
        #expect(empty == DeviceStore.shares(Array(repeating: 0, count: f.store.searchPlans.count)))
        // Titles grow; the split follows once the sizes are read again.
        for n in 0..<20 { try f.save("https://example.com/\(n)", title: "a long title of many words number \(n)") }
        let sizes = try f.store.read { db in try f.store.searchPlans.map { try DeviceStore.indexedTokens($0.index, in: db) } }
        for _ in 0..<DeviceStore.searchWorkersRefresh { _ = try f.store.read { db in try f.store.searchWorkers(db) } }
        #expect(try f.store.read { db in try f.store.searchWorkers(db) } == DeviceStore.shares(sizes))
        #expect(sizes.contains { $0 > 0 })
        #expect(DeviceStore.shares(sizes) != empty, "the split moved")
    }

    @Test("An index's size is read from FTS5's averages record: the tokens its rows hold")
    func indexSizeFromTheAveragesRecord() throws {
        let f = try Fixture()
        try f.save("https://example.com/1", title: "one two three")
        try f.save("https://example.com/2", title: "four five")
        // article_fts indexes title, author and url: 5 title tokens, the urls' tokens, no authors.
        let urlTokens = 2 * 4 // https, example, com, and the number
        #expect(try f.store.read { db in try DeviceStore.indexedTokens("article_fts", in: db) } == Int64(5 + urlTokens))
        #expect(try f.store.read { db in try DeviceStore.indexedTokens("note_fts", in: db) } == 0)
        let bytes: [UInt8] = [0x81, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x85]
        bytes.withUnsafeBytes { raw in
            #expect(SearchRank.sqliteVarint(raw, at: 0)! == (128, 2))
            #expect(SearchRank.sqliteVarint(raw, at: 2)! == (127, 1))
            #expect(SearchRank.sqliteVarint(raw, at: 3)! == (-1, 9))
            #expect(SearchRank.sqliteVarint(raw, at: 12) == nil, "a varint cut short")
        }
    }

    /// Two scratch connections, told apart by what `SELECT v FROM t` gives.
    func twoConnections() throws -> (Database, Database, URL) {
        let dir = Fixture.scratchRoot.appendingPathComponent("chronicle-help-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let connections = try [1, 2].map { n -> Database in
            let db = try Database(path: dir.appendingPathComponent("\(n).sqlite").path)
            try db.execute("CREATE TABLE t(v INTEGER)")
            try db.execute("INSERT INTO t(v) VALUES (?1)", [.integer(Int64(n))])
            return db
        }
        return (connections[0], connections[1], dir)
    }

    @Test("A count offered and not taken is run by its own worker; one taken is run by the other, its result or error handed back",
          .timeLimit(.minutes(1)))
    func countHelpHandsWorkBetweenTwoWorkers() throws {
        let (mine, other, dir) = try twoConnections()
        defer { try? FileManager.default.removeItem(at: dir) }
        let job: SearchCountHelp.Job = { db in try db.scalarInt("SELECT v FROM t") ?? 0 }

        // No one serves: the offer is taken back.
        let alone = SearchCountHelp(workers: 2)
        #expect(try alone.offer(job).result(orRunOn: mine) == 1)

        // The other worker is done with its own indexes and serves: it counts on its connection.
        let help = SearchCountHelp(workers: 2)
        let served = DispatchSemaphore(value: 0)
        let otherDB = UnsafeSendable(other)
        DispatchQueue.global().async {
            help.serve(on: otherDB.value)
            served.signal()
        }
        // Wait until the server has taken the offer, then for its result.
        let offer = help.offer(job)
        while !help.isIdle { usleep(1_000) }
        #expect(try offer.result(orRunOn: mine) == 2)
        // A second offer while none is pending goes to the server too; an error comes back as an error.
        let failing = help.offer { db in try db.scalarInt("SELECT nothing FROM nowhere") ?? 0 }
        while !help.isIdle { usleep(1_000) }
        #expect(throws: SQLiteError.self) { try failing.result(orRunOn: mine) }
        // The server stops once every worker is done.
        help.serve(on: mine)
        #expect(served.wait(timeout: .now() + 10) == .success)
    }

    @Test("While one offer is pending a second stays with its worker")
    func aSecondOfferStaysWithItsWorker() throws {
        let (mine, other, dir) = try twoConnections()
        defer { try? FileManager.default.removeItem(at: dir) }
        let help = SearchCountHelp(workers: 2)
        let first = help.offer { db in try db.scalarInt("SELECT v FROM t") ?? 0 }
        let second = help.offer { db in 10 + (try db.scalarInt("SELECT v FROM t") ?? 0) }
        #expect(try second.result(orRunOn: mine) == 11)
        #expect(try first.result(orRunOn: other) == 2, "taken back by its worker, on that worker's connection")
    }

    @Test("While a write holds the writer, a search does not wait for it: it ranks on one connection",
          .timeLimit(.minutes(1)))
    func aSearchDuringAWriteDoesNotWait() throws {
        let f = try premiumLibrary(articles: 150)
        let expected = try f.store.search("tunnel", limit: 50, parallel: false)
        let writing = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        let store = f.store
        DispatchQueue.global().async {
            _ = try? store.writeTransaction { db in
                try db.execute("INSERT INTO chronicle_meta(key, value) VALUES ('test_marker', 1)")
                writing.signal()
                release.wait()
            }
            finished.signal()
        }
        writing.wait()
        #expect(try !store.read { first in try store.read { second in try store.sameSnapshot(first, second) } })
        // The write is not committed: the search sees the store as it was, on one connection.
        #expect(try store.search("tunnel", limit: 50, parallel: true) == expected)
        release.signal()
        finished.wait()
        #expect(try store.read { first in try store.read { second in try store.sameSnapshot(first, second) } })
        #expect(try store.search("tunnel", limit: 50, parallel: true) == expected)
    }

    @Test("Another connection's commit changes the writer's data_version, its own does not: what sameSnapshot relies on")
    func anotherConnectionsCommitIsSeenByTheWriter() throws {
        let f = try Fixture()
        try f.save("https://example.com/first", title: "first")
        func version() throws -> Int64? { try f.store.writer.withLock { try $0.scalarInt("PRAGMA data_version") } }
        let start = try version()
        try f.save("https://example.com/own", title: "the writer's own commit")
        #expect(try version() == start)
        // Another connection to the file: another process's store, or the `sqlite3` shell.
        let other = try Database(path: f.path)
        try other.execute("INSERT INTO chronicle_meta(key, value) VALUES ('test_marker', 1)")
        #expect(try version() != start)
    }
}
