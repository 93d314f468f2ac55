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
    }
}
