import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// `chronicle_pairs`, the text of an index of adjacent word pairs: what it gives, and that a
/// pair index built with it answers phrases exactly as the word index does, scores included.
@Suite struct SearchPairsTests {
    /// A scratch database with `chronicle_pairs` registered, a word index `w(a, b)` tokenized
    /// as the engine's indexes are and a pair index `p(a, b)` over the same rows.
    func scratch() throws -> (Database, URL) {
        let dir = Fixture.scratchRoot.appendingPathComponent("chronicle-pairs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = try Database(path: dir.appendingPathComponent("p.sqlite").path)
        #expect(SearchPairs.register(on: db.handle))
        let tokenize = ProjectionSchema.searchTokenizer.joined(separator: " ")
        try db.execute("CREATE VIRTUAL TABLE w USING fts5(a, b, tokenize='\(tokenize)', prefix='2 3')")
        try db.execute("CREATE VIRTUAL TABLE p USING fts5(a, b, content='', tokenize=\"\(SearchPairs.pairTokenize)\")")
        return (db, dir)
    }

    func insert(_ db: Database, _ rowid: Int64, _ a: String?, _ b: String?) throws {
        let values: [Value] = [.integer(rowid), a.map { .text($0) } ?? .null, b.map { .text($0) } ?? .null]
        try db.execute("INSERT INTO w(rowid, a, b) VALUES (?1, ?2, ?3)", values)
        try db.execute("INSERT INTO p(rowid, a, b) VALUES (?1, chronicle_pairs(?2), chronicle_pairs(?3))", values)
    }

    func pairs(_ db: Database, _ text: String?) throws -> String? {
        try db.scalarText("SELECT chronicle_pairs(?1)", [text.map { .text($0) } ?? .null])
    }

    /// Rowid and bm25() score (weights 2 and 1) of every row `match` finds, newest first.
    func ranked(_ db: Database, _ table: String, _ match: String) throws -> [String] {
        try db.query("SELECT rowid, bm25(\(table), 2, 1) FROM \(table) WHERE \(table) MATCH ?1 ORDER BY rowid DESC",
                     [.text(match)]) { "\($0.int(0)): \($0.double(1))" }
    }

    @Test("Each word joined to the next, the last to nothing, folded as the word indexes fold it")
    func pairText() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try pairs(db, "Déjà vu, again") == "deja_vu vu_again again_")
        #expect(try pairs(db, "solo") == "solo_")
        #expect(try pairs(db, "snake_case x") == "snake_case case_x x_", "`_` separates words, as in the word index")
        #expect(try pairs(db, "l'ÉTÉ à Zürich 2026") == "l_ete ete_a a_zurich zurich_2026 2026_")
        #expect(try pairs(db, "!! ... — «»") == "")
        #expect(try pairs(db, "🦅!") == "🦅_", "an emoji is a word to unicode61")
        #expect(try pairs(db, "") == "")
        #expect(try pairs(db, nil) == nil)
        #expect(SearchPairs.words(of: "Déjà VU", on: db.handle) == ["deja", "vu"])
        #expect(SearchPairs.phraseMatch(["deja", "vu", "again"]) == "\"deja_vu vu_again\"")
    }

    @Test("A phrase finds the same rows with the same bm25() scores in the pair index as in the word index")
    func sameRowsAndScores() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Words that fold together (case, diacritics), words the tokenizer splits or drops, scripts
        // other than Latin, and a few common words so phrases repeat within and across rows.
        let vocabulary = ["the", "the", "the", "of", "of", "and", "mill", "Mill", "MILL", "river", "rivers", "École", "ecole",
                          "ÉCOLE", "déjà", "deja", "vu", "Σίσυφος", "σίσυφος", "東京", "タワー", "straße", "STRASSE",
                          "snake_case", "l'été", "co-op", "2026", "v2.1", "🦅", "—", "!", "\"quoted\"", "naïve", "Ångström"]
        var rng = SplitMix64(seed: 0x9A125)
        var texts: [(Int64, String?, String?)] = []
        for rowid in Int64(1)...400 {
            func text(_ count: Int) -> String? {
                count == 0 && rng.next() % 3 == 0 ? nil : (0..<count).map { _ in vocabulary.randomElement(using: &rng)! }.joined(separator: " ")
            }
            let row = (rowid, text(Int(rng.next() % 8)), text(Int(rng.next() % 60)))
            texts.append(row)
            try insert(db, row.0, row.1, row.2)
        }
        // Phrases of 2 to 4 consecutive words taken from the rows, plus random pairs that may occur nowhere.
        var phrases: [[String]] = []
        for _ in 0..<300 {
            let row = texts.randomElement(using: &rng)!
            let words = SearchPairs.words(of: (rng.next() % 2 == 0 ? row.1 : row.2) ?? "", on: db.handle) ?? []
            guard words.count >= 2 else { continue }
            let length = min(words.count, 2 + Int(rng.next() % 3))
            let start = Int(rng.next() % UInt64(words.count - length + 1))
            phrases.append(Array(words[start..<start + length]))
        }
        for _ in 0..<100 {
            let a = SearchPairs.words(of: vocabulary.randomElement(using: &rng)!, on: db.handle) ?? []
            let b = SearchPairs.words(of: vocabulary.randomElement(using: &rng)!, on: db.handle) ?? []
            if a.count + b.count >= 2 { phrases.append(a + b) }
        }
        #expect(phrases.count > 300)
        var found = 0
        for words in phrases {
            let wordMatch = "\"" + words.joined(separator: " ") + "\""
            let expected = try ranked(db, "w", wordMatch)
            #expect(try ranked(db, "p", SearchPairs.phraseMatch(words)) == expected, "\(wordMatch)")
            if !expected.isEmpty { found += 1 }
        }
        #expect(found > 250, "most phrases occur somewhere (\(found))")
        // A phrase as a person types it (capitals, diacritics) goes through the same tokenizer.
        let typed = try #require(SearchPairs.words(of: "DÉJÀ Vu", on: db.handle))
        #expect(try ranked(db, "p", SearchPairs.phraseMatch(typed)) == (try ranked(db, "w", "\"DÉJÀ Vu\"")))
    }
}
