import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// `chronicle_snippet`, the engine's FTS5 auxiliary function that places a passage from the
/// phrase instances and tokenizes only up to its end, checked on plain FTS5 tables.
@Suite struct SearchSnippetTests {
    /// A scratch database with an FTS5 table `d(a, b)` tokenized as the engine's indexes are.
    func scratch(_ rows: [(String, String)]) throws -> (Database, URL) {
        let dir = Fixture.scratchRoot.appendingPathComponent("chronicle-snippet-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = try Database(path: dir.appendingPathComponent("s.sqlite").path)
        try db.execute("CREATE VIRTUAL TABLE d USING fts5(a, b, tokenize='unicode61 remove_diacritics 2', prefix='2 3')")
        for (a, b) in rows { try db.execute("INSERT INTO d(a, b) VALUES (?1, ?2)", [.text(a), .text(b)]) }
        return (db, dir)
    }

    func snippet(_ db: Database, _ match: String, tokens: Int = 12) throws -> [String] {
        try db.query("SELECT chronicle_snippet(d, '[', ']', '…', ?2) FROM d WHERE d MATCH ?1 ORDER BY rowid",
                     [.text(match), .integer(Int64(tokens))]) { $0.text(0) }
    }

    func words(_ range: Range<Int>) -> String { range.map { "w\($0)" }.joined(separator: " ") }

    @Test("A short text comes back whole with the match marked, as FTS5's snippet() gives it")
    func shortTextIsWhole() throws {
        let (db, dir) = try scratch([("The quick brown fox jumps.", "")])
        defer { try? FileManager.default.removeItem(at: dir) }
        let fts5 = try db.scalarText("SELECT snippet(d, -1, '[', ']', '…', 12) FROM d WHERE d MATCH 'fox'")
        #expect(fts5 == "The quick brown [fox] jumps.")
        #expect(try snippet(db, "fox") == [fts5])
    }

    @Test("A match deep in a long text: twelve tokens around it, ellipses on both sides")
    func longTextIsCutAroundTheMatch() throws {
        let text = words(0..<500) + " needle " + words(500..<1000)
        let (db, dir) = try scratch([(text, "")])
        defer { try? FileManager.default.removeItem(at: dir) }
        let passage = try #require(try snippet(db, "needle").first)
        #expect(passage == "…w495 w496 w497 w498 w499 [needle] w500 w501 w502 w503 w504 w505…")
    }

    @Test("At the text's end the window moves back to stay full, and no closing ellipsis")
    func matchAtTheEnd() throws {
        let (db, dir) = try scratch([(words(0..<100) + " needle", "")])
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try snippet(db, "needle") == ["…w89 w90 w91 w92 w93 w94 w95 w96 w97 w98 w99 [needle]"])
        let (start, startDir) = try scratch([("needle " + words(0..<100), "")])
        defer { try? FileManager.default.removeItem(at: startDir) }
        #expect(try snippet(start, "needle") == ["[needle] w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10…"])
    }

    @Test("The window with the most distinct query words wins over an earlier one with fewer")
    func mostDistinctPhrasesWin() throws {
        let text = "alpha " + words(0..<200) + " alpha beta " + words(200..<400) + " beta"
        let (db, dir) = try scratch([(text, "")])
        defer { try? FileManager.default.removeItem(at: dir) }
        let passage = try #require(try snippet(db, "alpha beta").first)
        #expect(passage.contains("[alpha beta]") || passage.contains("[alpha] [beta]"), "\(passage)")
        #expect(passage.hasPrefix("…") && passage.hasSuffix("…"))
    }

    @Test("A phrase is marked as one run; prefixes and folded diacritics mark the whole word")
    func phrasesPrefixesAndDiacritics() throws {
        let (db, dir) = try scratch([
            ("the network is only bookkeeping here", ""),
            ("Ein Café in Zürich, 🎉 am Fluss", ""),
        ])
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try snippet(db, "\"only bookkeeping\"") == ["the network is [only bookkeeping] here"])
        #expect(try snippet(db, "bookk*") == ["the network is only [bookkeeping] here"])
        #expect(try snippet(db, "cafe zurich") == ["Ein [Café] in [Zürich], 🎉 am Fluss"])
    }

    @Test("The passage comes from the column that matched")
    func columnThatMatched() throws {
        let (db, dir) = try scratch([("a title with nothing", "the body mentions kestrels twice: kestrels")])
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try snippet(db, "kestrels") == ["the body mentions [kestrels] twice: [kestrels]"])
        #expect(try snippet(db, "b:kestrels", tokens: 3) == ["…[kestrels] twice: [kestrels]"])
    }

    @Test("Wrong arguments are an SQL error with a sentence, not a crash")
    func wrongArguments() throws {
        let (db, dir) = try scratch([("fox", "")])
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            _ = try db.query("SELECT chronicle_snippet(d, '[') FROM d WHERE d MATCH 'fox'") { $0.text(0) }
            Issue.record("two arguments were accepted")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_snippet: expects"))
        }
        // Over a table of two columns, the text of one column is neither four arguments nor four and two texts.
        do {
            _ = try db.query("SELECT chronicle_snippet(d, '[', ']', '…', 12, a) FROM d WHERE d MATCH 'fox'") { $0.text(0) }
            Issue.record("five arguments were accepted")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_snippet: expects"))
        }
    }

    /// `d`'s rows as a phrase index: `p(a, b)`, contentless, the word pairs of each column.
    func pairs(_ db: Database) throws {
        try db.execute("CREATE VIRTUAL TABLE p USING fts5(a, b, content='', tokenize=\"\(SearchPairs.pairTokenize)\")")
        try db.execute("INSERT INTO p(rowid, a, b) SELECT rowid, chronicle_pairs(a), chronicle_pairs(b) FROM d")
    }

    @Test("Over a phrase index, with the columns' text given, a phrase's passage is the word index's")
    func passagesOverAPhraseIndex() throws {
        // Words that fold (diacritics, case), split at `_` and apostrophes, a phrase at a text's
        // start and end, in either column, once or many times, and texts short and long.
        let vocabulary = ["tunnel", "Plane", "plane", "snake_case", "don't", "Déjà", "vu", "basement", "van", "tunnel,", "(plane)"]
        var rng = SplitMix64(seed: 11)
        func text(_ count: Int) -> String { (0..<count).map { _ in vocabulary[rng.below(vocabulary.count)] }.joined(separator: " ") }
        var rows: [(String, String)] = [("tunnel plane", "plane tunnel"), ("the snake_case plane", "déjà vu, again: deja VU")]
        for n in 0..<120 { rows.append((text(1 + n % 9), text(n % 3 == 0 ? 0 : 5 + (n * 7) % 60))) }
        let (db, dir) = try scratch(rows)
        defer { try? FileManager.default.removeItem(at: dir) }
        try pairs(db)
        var compared = 0
        for phrase in ["tunnel plane", "plane tunnel", "snake case plane", "case plane", "deja vu", "don t", "t basement van",
                       "plane plane", "tunnel plane tunnel", "van van van"] {
            let words = try #require(SearchPairs.words(of: phrase, on: db.handle))
            let fromWords = try db.query("SELECT rowid, chronicle_snippet(d, '[', ']', '…', 12) FROM d WHERE d MATCH ?1 ORDER BY rowid",
                                         [.text("\"" + phrase + "\"")]) { "\($0.int(0)): \($0.text(1))" }
            let fromPairs = try db.query("""
                SELECT p.rowid, chronicle_snippet(p, '[', ']', '…', 12, d.a, d.b) FROM p CROSS JOIN d ON d.rowid = p.rowid
                WHERE p MATCH ?1 ORDER BY p.rowid
                """, [.text(SearchPairs.phraseMatch(words))]) { "\($0.int(0)): \($0.text(1))" }
            #expect(fromPairs == fromWords, "\(phrase)")
            compared += fromWords.count
        }
        #expect(compared > 100, "phrases matched \(compared) rows")
        #expect(try db.query("SELECT chronicle_snippet(p, '[', ']', '…', 12, d.a, d.b) FROM p CROSS JOIN d ON d.rowid = p.rowid WHERE p MATCH 'snake_case case_plane' AND p.rowid = 2") { $0.text(0) }
                == ["the [snake_case plane]"])
    }

    @Test("A phrase's snippets are read in one pass per run of nearby hits; other queries' in one over them all")
    func snippetPasses() {
        let gap = SearchSnippet.phrasePassGap
        #expect(SearchSnippet.passes(over: [], phraseOfWords: true).isEmpty)
        #expect(SearchSnippet.passes(over: [90, 5, 5 + gap + 1, 40], phraseOfWords: false) == [5...(5 + gap + 1)])
        // A gap of exactly `phrasePassGap` stays in the run.
        #expect(SearchSnippet.passes(over: [90, 5, 5 + 3 * gap, 40, 90 + gap, 7 * gap], phraseOfWords: true)
                == [5...(90 + gap), (5 + 3 * gap)...(5 + 3 * gap), (7 * gap)...(7 * gap)])
    }
}

/// `chronicle_bm25`, FTS5's bm25() with row lengths remembered per connection until the next write.
@Suite struct SearchRankTests {
    func scratch() throws -> (String, URL) {
        let dir = Fixture.scratchRoot.appendingPathComponent("chronicle-rank-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("r.sqlite").path
        let db = try Database(path: path)
        try db.execute("CREATE VIRTUAL TABLE d USING fts5(a, b, tokenize='unicode61 remove_diacritics 2', prefix='2 3')")
        let words = ["kestrel", "heron", "river", "mill", "quarry", "walk", "lake", "kestrels"]
        var rng = SystemRandomNumberGenerator()
        for n in 0..<300 {
            let a = (0..<(1 + n % 7)).map { _ in words.randomElement(using: &rng)! }.joined(separator: " ")
            let b = (0..<(n % 40)).map { _ in words.randomElement(using: &rng)! }.joined(separator: " ")
            try db.execute("INSERT INTO d(a, b) VALUES (?1, ?2)", [.text(a), .text(b)])
        }
        return (path, dir)
    }

    func scores(_ db: Database, _ match: String, _ function: String) throws -> [Double] {
        try db.query("SELECT \(function) FROM d WHERE d MATCH ?1 ORDER BY rowid DESC", [.text(match)]) { $0.double(0) }
    }

    @Test("The same scores as FTS5's bm25(), bit for bit, cold and from remembered lengths")
    func sameScoresAsBM25() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = try Database(path: path)
        for match in ["kestrel", "kestrel heron", "\"river mill\"", "kes*", "a:heron", "heron OR lake", "river NOT mill", "nothing"] {
            let expected = try scores(db, match, "bm25(d, 3, 1)")
            #expect(try scores(db, match, "chronicle_bm25(d, 'd', 3, 1)") == expected, "\(match), cold")
            #expect(try scores(db, match, "chronicle_bm25(d, 'd', 3, 1)") == expected, "\(match), remembered")
        }
        #expect(try scores(db, "heron", "chronicle_bm25(d, 'd')") == (try scores(db, "heron", "bm25(d)")), "weights default to 1")
    }

    @Test("A write by another connection makes the remembered lengths go: no stale score")
    func aWriteForgetsTheLengths() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let reader = try Database(path: path), writer = try Database(path: path)
        _ = try scores(reader, "kestrel", "chronicle_bm25(d, 'd', 3, 1)")   // remembers the lengths
        // Every row that says kestrel gets much longer.
        try writer.execute("UPDATE d SET b = b || ' ' || ?1 WHERE d MATCH 'kestrel'", [.text(Array(repeating: "walk", count: 50).joined(separator: " "))])
        let fresh = try scores(reader, "kestrel", "bm25(d, 3, 1)")
        #expect(try scores(reader, "kestrel", "chronicle_bm25(d, 'd', 3, 1)") == fresh)
    }

    @Test("Inside a write transaction, rows the same connection changed are ranked by their new length")
    func aWriteTransactionRanksWhatItChanged() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = try Database(path: path)
        _ = try scores(db, "kestrel", "chronicle_bm25(d, 'd', 3, 1)")   // remembers the lengths
        try db.transaction { db in
            try db.execute("UPDATE d SET b = b || ' ' || ?1 WHERE d MATCH 'kestrel'", [.text(Array(repeating: "walk", count: 50).joined(separator: " "))])
            #expect(try scores(db, "kestrel", "chronicle_bm25(d, 'd', 3, 1)") == (try scores(db, "kestrel", "bm25(d, 3, 1)")))
        }
        #expect(try scores(db, "kestrel", "chronicle_bm25(d, 'd', 3, 1)") == (try scores(db, "kestrel", "bm25(d, 3, 1)")))
    }

    @Test("One phrase: chronicle_bm25_term with its IDF from the count of its matches gives bm25()'s scores, bit for bit, full window or not")
    func termScoresWithTheirIDFAreBM25() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = try Database(path: path)
        let counts = try #require(db.searchWindowCounts)
        for (match, tokens) in [("kestrel", 1), ("\"river mill\"", 2), ("kes*", 1), ("\"lake\"", 1), ("\"walk lake\"", 2)] {
            let expected = try scores(db, match, "bm25(d, 3, 1)")
            #expect(expected.count > 10, "\(match) matches enough rows to fill a small window")
            for window in [1, 10, expected.count, expected.count + 1, 1_000] {
                // As DeviceStore.search reads it.
                let rows = try db.query("SELECT rowid, chronicle_bm25_term(d, 'd', ?2, 3, 1) FROM d WHERE d MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
                                        [.text(match), .integer(Int64(window))]) { ($0.int(0), $0.double(1)) }
                #expect(counts.rows == 300, "the index's row count")
                #expect(counts.tokens == tokens)
                #expect(rows.count == min(window, expected.count))
                var restCounted = false
                let idf = try counts.idf(returned: rows.count, window: window) {
                    restCounted = true
                    return try db.scalarInt("SELECT count(*) FROM d WHERE d MATCH ?1 AND rowid < ?2", [.text(match), .integer(rows.last!.0)]) ?? 0
                }
                #expect(rows.map { SearchRank.score(idf: idf, term: $0.1) } == Array(expected.prefix(window)), "\(match), window \(window)")
                #expect(restCounted == (tokens > 1 && window <= expected.count), "\(match): only a full window of several words counts its older rows")
                #expect(counts.hits == (tokens == 1 && window <= expected.count ? Int64(expected.count) : nil),
                        "a full window of one token is counted by FTS5's phrase query")
            }
        }
        // Two phrases need bm25()'s own IDFs: refused, never a wrong score.
        do {
            _ = try scores(db, "kestrel heron", "chronicle_bm25_term(d, 'd', 10, 3, 1)")
            Issue.record("two phrases were ranked")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_bm25_term: ranks a query of exactly one phrase"))
        }
        do {
            _ = try scores(db, "kestrel", "chronicle_bm25_term(d, 'd', 'ten', 3, 1)")
            Issue.record("a window that is not a count was accepted")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_bm25_term: expects"))
        }
    }

    @Test("Reading on past the window: the window's rows get chronicle_bm25_term's values, later rows NULL, and every match is counted")
    func readingOnCountsEveryMatch() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = try Database(path: path)
        let counts = try #require(db.searchWindowCounts)
        // A prefix FTS5 merges (no prefix index of 4 or 5 bytes), one served by the 3-byte index,
        // a word, a phrase of two words.
        for match in ["kest*", "kestr*", "her*", "lake", "\"river mill\""] {
            let expected = try scores(db, match, "bm25(d, 3, 1)")
            #expect(expected.count > 10, "\(match) matches enough rows to fill a small window")
            for window in [1, 10, expected.count - 1, expected.count, expected.count + 1, 1_000] {
                let rows = try db.query("SELECT rowid, chronicle_bm25_term_reading_on(d, 'd', ?2, 3, 1) FROM d WHERE d MATCH ?1 ORDER BY rowid DESC",
                                        [.text(match), .integer(Int64(window))]) { ($0.int(0), $0.isNull(1) ? nil : $0.double(1)) }
                #expect(rows.count == expected.count, "\(match), window \(window): every match is read")
                #expect(counts.hits == Int64(expected.count), "\(match), window \(window): and counted")
                #expect(counts.readingOn && !counts.callerCountsRest)
                let ranked = rows.prefix { $0.1 != nil }.map { $0.1! }
                #expect(ranked.count == min(window, expected.count))
                #expect(rows.dropFirst(ranked.count).allSatisfy { $0.1 == nil }, "past the window, NULL")
                var restCounted = false
                let idf = counts.idf(returned: ranked.count, window: window) { restCounted = true; return 0 }
                #expect(!restCounted)
                #expect(ranked.map { SearchRank.score(idf: idf, term: $0) } == Array(expected.prefix(window)), "\(match), window \(window)")
            }
        }
        // The windowed function after it counts as before: the flag is the statement's own.
        _ = try db.query("SELECT chronicle_bm25_term(d, 'd', 5, 3, 1) FROM d WHERE d MATCH 'heron' ORDER BY rowid DESC LIMIT 5") { $0.double(0) }
        #expect(!counts.readingOn)
        do {
            _ = try scores(db, "kestrel heron", "chronicle_bm25_term_reading_on(d, 'd', 10, 3, 1)")
            Issue.record("two phrases were ranked")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_bm25_term_reading_on: ranks a query of exactly one phrase"))
        }
    }

    @Test("A search reads on only for one prefix of one token that no prefix index serves")
    func whichQueriesReadOn() {
        #expect(ProjectionSchema.prefixIndexLengths == [2, 3])
        for text in ["kest*", "k*", "kestr*", "\"kest\"*", "KÉST*", "kestrel*"] {
            #expect(SearchRank.readsOn(SearchQuery(text)), "\(text)")
        }
        // A 2- or 3-byte prefix has an index of its own; a word, two terms, a prefix of several tokens.
        for text in ["ke*", "kes*", "Kes*", "kestrel", "kest* heron", "\"river mi\"*", "kest-rel*", ""] {
            #expect(!SearchRank.readsOn(SearchQuery(text)), "\(text)")
        }
        // An index over documents has a prefix index of 4 bytes too: only longer prefixes read on there.
        let documents = ProjectionSchema.documentPrefixIndexLengths
        #expect(documents == [2, 3, 4])
        #expect(!SearchRank.readsOn(SearchQuery("kest*"), prefixLengths: documents))
        #expect(SearchRank.readsOn(SearchQuery("kestr*"), prefixLengths: documents))
    }

    @Test("Indexes over documents (a field longer than 100,000 characters) keep a prefix index of 4 bytes as well")
    func documentsHaveAFourBytePrefixIndex() {
        let projection = ProjectionSchema(schema: .readItLater)
        var documents: [String] = []
        for (entity, index) in projection.searchIndexes {
            let sql = projection.searchTableStatement(index, in: entity)
            if index.holdsDocuments {
                documents.append(index.index)
                #expect(sql.contains("prefix='2 3 4'"), "\(sql)")
            } else {
                #expect(sql.contains("prefix='2 3'"), "\(sql)")
            }
            #expect(ProjectionSchema.prefixIndexLengths(of: index) == (index.holdsDocuments ? [2, 3, 4] : [2, 3]))
        }
        // Article text and transcripts (2,000,000 characters); note bodies (100,000) are not documents.
        #expect(documents.sorted() == ["article_text_fts", "episode_fts"])
        #expect(SearchIndexSpec.documentLengthMin == 100_000)
    }

    @Test("Without the index's name it is an SQL error with a sentence")
    func wrongArguments() throws {
        let (path, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = try Database(path: path)
        do {
            _ = try scores(db, "heron", "chronicle_bm25(d)")
            Issue.record("no name was accepted")
        } catch let error as SQLiteError {
            #expect(error.message.contains("chronicle_bm25: expects"))
        }
    }
}
