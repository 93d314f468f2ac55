import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// Phrase indexes (`PhraseIndex`): word pairs beside the indexes over documents, kept up to
/// date below their watermark, filled above it, and read by searches for phrases once complete.
@Suite struct PhraseIndexTests {
    static let words = ParallelSearchBuildTests.words

    /// `count` words drawn from the test vocabulary (some plural, one in five capitalised).
    static func text(_ count: Int, _ rng: inout SplitMix64) -> String {
        (0..<count).map { _ in
            let word = words[rng.below(words.count)] + (rng.below(4) == 0 ? "s" : "")
            return rng.below(5) == 0 ? word.capitalized : word
        }.joined(separator: " ")
    }

    /// What each phrase index holds, token by token (`fts5vocab`'s instance table), beside what a
    /// phrase index built afresh from its content view holds. Equal when it is up to date.
    func contents(_ store: DeviceStore) throws -> [(held: [String], fresh: [String])] {
        try store.writer.withLock { writer in
            let db = writer
            return try store.phraseIndexes.map { phrase in
                let columns = ProjectionSchema.searchColumns(phrase.index)
                let through = try phrase.watermark(in: db)
                let view = ProjectionSchema.quoted(ProjectionSchema.contentViewName(of: phrase.index))
                try db.execute("DROP TABLE IF EXISTS temp.fresh")
                try db.execute("DROP TABLE IF EXISTS temp.held_vocab")
                try db.execute("DROP TABLE IF EXISTS temp.fresh_vocab")
                try db.execute("CREATE VIRTUAL TABLE temp.fresh USING fts5(\(columns), content='', tokenize=\"\(SearchPairs.pairTokenize)\")")
                let values = phrase.index.fields.map { "chronicle_pairs(\(ProjectionSchema.quoted($0)))" }.joined(separator: ", ")
                try db.execute("INSERT INTO temp.fresh(rowid, \(columns)) SELECT rid, \(values) FROM \(view) WHERE rid <= ?1 ORDER BY rid",
                               [.integer(through)])
                try db.execute("CREATE VIRTUAL TABLE temp.held_vocab USING fts5vocab(main, \(ProjectionSchema.quoted(phrase.table)), instance)")
                try db.execute("CREATE VIRTUAL TABLE temp.fresh_vocab USING fts5vocab(temp, fresh, instance)")
                func read(_ table: String) throws -> [String] {
                    try db.query("SELECT term, doc, col, offset FROM temp.\(table) ORDER BY 1, 2, 3, 4") { "\($0.text(0)) \($0.int(1)) \($0.text(2)) \($0.int(3))" }
                }
                let result = (try read("held_vocab"), try read("fresh_vocab"))
                try db.execute("DROP TABLE temp.held_vocab")
                try db.execute("DROP TABLE temp.fresh_vocab")
                try db.execute("DROP TABLE temp.fresh")
                return result
            }
        }
    }

    func watermarks(_ store: DeviceStore) throws -> [Int64] {
        try store.read { db in try store.phraseIndexes.map { try $0.watermark(in: db) } }
    }

    /// Every phrase index's watermark is `value`.
    func all(_ store: DeviceStore, _ value: Int64) throws -> [Int64] {
        Array(repeating: value, count: store.phraseIndexes.count)
    }

    /// The position of the full text's phrase index among the store's.
    func textIndex(_ store: DeviceStore) throws -> Int {
        try #require(store.phraseIndexes.firstIndex { $0.table == "article_text_fts_pairs" })
    }

    @Test("Indexes over documents and each entity's own have phrase indexes; a new store's are complete")
    func newStoresHaveCompletePhraseIndexes() throws {
        let f = try Fixture()
        // Not the tags (a set) nor highlights and notes (their hits count for an article).
        #expect(f.store.phraseIndexes.map(\.table) == ["article_fts_pairs", "article_text_fts_pairs", "episode_fts_pairs", "feed_fts_pairs"],
                "the indexes over documents and the entities' own")
        #expect(try watermarks(f.store) == all(f.store, PhraseIndex.complete))
        #expect(try f.store.phraseIndexesComplete())
        let triggers = try f.store.read { db in
            try db.query("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE '%pairs_plan%' ORDER BY name") { $0.text(0) }
        }
        #expect(triggers == ["article_text_fts_pairs_plan_gone", "article_text_fts_pairs_plan_new",
                             "article_text_fts_pairs_plan_off", "article_text_fts_pairs_plan_on"])
        let fieldService = try Fixture(schema: .fieldService)
        #expect(fieldService.store.phraseIndexes.map(\.table) == ["job_fts_pairs"], "the jobs' own index")
        #expect(try fieldService.store.verify().passed)
    }

    @Test("Writes keep the pairs of rows below the watermark, the filler indexes the rest; always what a fresh build holds")
    func pairsFollowEveryWrite() throws {
        let f = try Fixture(seed: 11)
        let server = ServerLog(library: f.store.libraryID)
        var rng = SplitMix64(seed: 42)
        var articles: [UUID] = [], episodes: [UUID] = []
        var premium = false
        for round in 0..<6 {
            var batch: [Op] = []
            for step in 0..<40 {
                switch rng.below(9) {
                case 0, 1:
                    let id = UUID()
                    articles.append(id)
                    batch.append(server.op("article.save", entity: id, from: UUID(), payload: ["url": .text("https://e.com/\(round)/\(step)")]))
                case 2...3 where !articles.isEmpty:
                    let id = articles[rng.below(articles.count)]
                    let text = rng.below(6) == 0 ? Value.null : .text(Self.text(20 + rng.below(60), &rng))
                    batch.append(server.op("article.parsed", entity: id, from: Op.serverDeviceID, payload: ["text": text]))
                case 4 where !articles.isEmpty:
                    let id = articles[rng.below(articles.count)]
                    batch.append(server.op(rng.below(2) == 0 ? "article.delete" : "article.restore", entity: id, from: UUID()))
                case 5:
                    // Local writes go through the flush path (episodes are not gated by the plan).
                    let id = try f.store.write("episode.save", payload: ["title": .text(Self.text(3, &rng)), "audio_ref": .text("a.mp3"),
                                                                         "transcript": .text(Self.text(30 + rng.below(50), &rng))]).entityID
                    episodes.append(id)
                case 6 where !episodes.isEmpty:
                    let id = episodes[rng.below(episodes.count)]
                    // An update, a delete or a restore, whichever the episode's state allows.
                    let deleted = try f.store.row(id)?["deleted_at"].map { $0 != .null } ?? false
                    if !deleted && rng.below(3) == 0 {
                        try f.store.write("episode.update", entity: id, payload: ["transcript": .text(Self.text(25, &rng))])
                    } else {
                        try f.store.write(deleted ? "episode.restore" : "episode.delete", entity: id)
                    }
                case 7 where rng.below(4) == 0:
                    premium.toggle()
                    batch.append(server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID,
                                           payload: ["plan": .text(premium ? "premium" : "free")]))
                default:
                    // Part of the way: a few rows of the first lagging index.
                    _ = try f.store.fillPhraseIndexChunk(rows: 1 + Int64(rng.below(4)))
                }
            }
            try f.store.applyConfirmed(batch)
            for (n, index) in try contents(f.store).enumerated() {
                #expect(index.held == index.fresh, "round \(round), index \(n): \(index.held.count) against \(index.fresh.count) instances")
            }
            #expect(try f.store.verify().passed, "round \(round)")
        }
        #expect(f.store.waitForPhraseIndexing(timeoutSeconds: 60))
        try f.store.completePhraseIndexes()
        #expect(try watermarks(f.store) == all(f.store, PhraseIndex.complete))
        var instances = 0
        for index in try contents(f.store) {
            #expect(index.held == index.fresh)
            instances += index.held.count
        }
        #expect(instances > 1_000, "the library has text: \(instances)")
        // Plan off: the gate empties the word index, the trigger the pairs; both then hold nothing.
        if premium { try f.store.applyConfirmed([server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("free")])]) }
        let text = try textIndex(f.store)
        #expect(try watermarks(f.store)[text] != PhraseIndex.complete || contents(f.store)[text].held.isEmpty)
        try f.store.completePhraseIndexes()
        #expect(try contents(f.store)[text].held.isEmpty)
        #expect(try f.store.verify().passed)
    }

    @Test("Phrases read from the pairs give the word indexes' hits, scores and snippets")
    func phrasesFromPairsMatchTheWordIndexes() throws {
        let f = try ParallelSearchTests().premiumLibrary(articles: 300)
        try f.store.completePhraseIndexes()
        #expect(try f.store.phraseIndexesComplete())
        // Phrases of two and three words, from the texts (found) and not (none), and the odd ones people type.
        var rng = SplitMix64(seed: 5)
        var phrases = ["\"tunnel plane\"", "\"Tunnel  PLANE basement\"", "\"don't stop\"", "\"body 12 passage\"", "\"zzz yyy\""]
        for _ in 0..<60 { phrases.append("\"" + Self.text(2 + rng.below(2), &rng) + "\"") }
        var fromPairs = 0
        for query in phrases {
            let plans = f.store.searchPlans
            let pairs = try f.store.read { db in try f.store.phraseIndexMatches(SearchQuery(query), plans: plans, in: db) }
            #expect(pairs.compactMap { $0 }.count == plans.filter { $0.phrase != nil }.count, "\(query)")
            for (limit, window) in [(20, DeviceStore.searchRankWindow), (5, 7), (50, 1_000)] {
                for parallel in [false, true] {
                    let words = try f.store.search(query, limit: limit, rankWindow: window, parallel: parallel, phraseIndexes: false)
                    let read = try f.store.search(query, limit: limit, rankWindow: window, parallel: parallel)
                    #expect(read == words, "\(query), limit \(limit), window \(window)")
                    fromPairs += read.filter { $0.matchedIn == "article_text_fts" }.count
                }
            }
        }
        #expect(fromPairs > 200, "the full text gave hits: \(fromPairs)")
        // Not read from the pairs: one word, a prefix, several terms.
        for query in ["tunnel", "\"tunnel plane\"*", "tunnel plane", "\"tunnel\""] {
            let pairs = try f.store.read { db in try f.store.phraseIndexMatches(SearchQuery(query), plans: f.store.searchPlans, in: db) }
            #expect(pairs.allSatisfy { $0 == nil }, "\(query)")
        }
    }

    @Test("A large library's phrase indexes are filled in the background after a rebuild; searches read the word indexes meanwhile")
    func largeLibrariesFillInTheBackground() throws {
        let f = try Fixture(seed: 4)
        let server = ServerLog(library: f.store.libraryID)
        var rng = SplitMix64(seed: 9)
        var batch = [server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("premium")])]
        for i in 0..<160 {
            let id = UUID()
            batch.append(server.op("article.save", entity: id, from: UUID(), payload: ["url": .text("https://e.com/\(i)")]))
            batch.append(server.op("article.parsed", entity: id, from: Op.serverDeviceID, payload: ["text": .text(Self.text(700, &rng))]))
        }
        try f.store.applyConfirmed(batch)
        #expect(f.store.waitForPhraseIndexing(timeoutSeconds: 60))
        let before = try f.store.search("\"glacier tunnel\"", limit: 30, phraseIndexes: false)
        #expect(!before.isEmpty)

        try f.store.rebuild()
        // 112,000 words: past `phraseIndexInlineBytesMax`, so the rebuild leaves the pairs to the filler.
        let inline = try f.store.read { db in try f.store.phraseIndexes.map { try f.store.phraseIndexFillsInline($0, in: db) } }
        let text = try textIndex(f.store)
        #expect(inline[text] == false && inline.filter { !$0 }.count == 1, "\(inline)")
        // Whether or not the filler has finished, a search gives the same hits.
        #expect(try f.store.search("\"glacier tunnel\"", limit: 30) == before)
        #expect(f.store.waitForPhraseIndexing(timeoutSeconds: 120))
        let status = try f.store.phraseIndexStatus()
        #expect(status.allSatisfy { $0.isComplete })
        let textStatus = status[text]
        #expect(textStatus.rows == 160 && textStatus.rowsIndexed == 160)
        #expect(try f.store.search("\"glacier tunnel\"", limit: 30) == before)
        for index in try contents(f.store) { #expect(index.held == index.fresh) }
        #expect(try f.store.verify().passed)
    }

    @Test("A bulk apply empties the phrase indexes and fills them again at its close; writes meanwhile leave them alone")
    func bulkApplyStartsThePairsOver() throws {
        let f = try Fixture(seed: 8)
        let server = ServerLog(library: f.store.libraryID)
        var rng = SplitMix64(seed: 13)
        let episodes = try (0..<5).map { _ in
            try f.store.write("episode.save", payload: ["title": .text(Self.text(3, &rng)), "audio_ref": .text("a.mp3"),
                                                        "transcript": .text(Self.text(40, &rng))]).entityID
        }
        try f.store.beginBulk()
        #expect(try watermarks(f.store) == all(f.store, 0))
        var batch = [server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("premium")])]
        for (n, id) in episodes.enumerated() {
            batch.append(server.op("episode.update", entity: id, from: UUID(), payload: ["transcript": .text(Self.text(30 + n, &rng))]))
        }
        for i in 0..<20 {
            let id = UUID()
            batch.append(server.op("article.save", entity: id, from: UUID(), payload: ["url": .text("https://e.com/\(i)")]))
            batch.append(server.op("article.parsed", entity: id, from: Op.serverDeviceID, payload: ["text": .text(Self.text(50, &rng))]))
        }
        try f.store.applyBulkBatch(batch)
        // A local write while the bulk apply runs: its rows are above the watermark, left alone.
        try f.store.write("episode.update", entity: episodes[0], payload: ["transcript": .text("tunnel plane " + Self.text(10, &rng))])
        // Nor does the filler run while the indexes are stale.
        #expect(try f.store.fillPhraseIndexChunk() == false)
        try f.store.finishBulk()
        #expect(f.store.waitForPhraseIndexing(timeoutSeconds: 60))
        #expect(try watermarks(f.store) == all(f.store, PhraseIndex.complete))
        let indexes = try contents(f.store)
        for index in indexes { #expect(index.held == index.fresh) }
        // Articles' titles and texts, episodes; no feed was written.
        #expect(indexes.map { !$0.held.isEmpty } == [true, true, true, false])
        #expect(try f.store.verify().passed)
        // And after: every write keeps them.
        try f.store.write("episode.update", entity: episodes[1], payload: ["transcript": .text("plane tunnel")])
        for index in try contents(f.store) { #expect(index.held == index.fresh) }
        #expect(try f.store.search("\"tunnel plane\"", limit: 10) == f.store.search("\"tunnel plane\"", limit: 10, phraseIndexes: false))
    }

    @Test("A store without phrase indexes (format v5) gets them at its upkeep, filled")
    func openingMakesMissingPhraseIndexes() throws {
        let f = try ParallelSearchTests().premiumLibrary(articles: 120)
        let path = f.store.path
        let expected = try f.store.search("\"tunnel plane\"", limit: 50, phraseIndexes: false)
        try f.store.writer.withLock { db in
            try db.transaction { db in
                for phrase in f.store.phraseIndexes {
                    for trigger in phrase.triggerNames(f.store.projection) { try db.execute("DROP TRIGGER \(ProjectionSchema.quoted(trigger))") }
                    try db.execute("DROP TABLE \(ProjectionSchema.quoted(phrase.table))")
                    try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(phrase.watermarkKey)])
                }
            }
        }
        // Until then: nothing written to the missing tables, phrases from the word index.
        _ = try f.store.write("episode.save", payload: ["title": .text("tunnel plane"), "audio_ref": .text("x.mp3"), "transcript": .text("tunnel plane ride")])
        #expect(try f.store.search("\"tunnel plane\"", limit: 50).count == expected.count + 1)
        let reopened = try DeviceStore.open(at: path)
        #expect(try reopened.read { db in try reopened.phraseIndexesMissing(in: db) }, "opening changes nothing")
        #expect(try reopened.upkeepDue().phraseIndexesToFill)
        try reopened.performUpkeep()
        #expect(reopened.waitForPhraseIndexing(timeoutSeconds: 60))
        #expect(try reopened.phraseIndexesComplete())
        #expect(try reopened.read { db in try reopened.phraseIndexesMissing(in: db) } == false)
        let indexes = try contents(reopened)
        for index in indexes { #expect(index.held == index.fresh) }
        // The articles' titles and texts and the one episode have rows.
        #expect(indexes.map { !$0.held.isEmpty } == [true, true, true, false])
        #expect(try reopened.search("\"tunnel plane\"", limit: 50) == reopened.search("\"tunnel plane\"", limit: 50, phraseIndexes: false))
        #expect(try reopened.verify().passed)
    }

    @Test("verify finds a phrase index that disagrees with its word index")
    func verifyFindsADivergentPhraseIndex() throws {
        let f = try ParallelSearchTests().premiumLibrary(articles: 60)
        #expect(try f.store.verify().passed)
        let rowid = try #require(try f.store.read { db in try db.scalarInt("SELECT max(rid) FROM article_text_fts_content") })
        try f.store.writer.withLock { db in
            try db.execute("INSERT INTO article_text_fts_pairs(rowid, text) VALUES (?1, chronicle_pairs('one two three'))", [.integer(rowid + 1_000)])
        }
        let report = try f.store.verify()
        let check = try #require(report.checks.first { $0.name == "phrase index article_text_fts_pairs" })
        #expect(!check.passed, "\(check.detail)")
        #expect(check.detail.contains("1 rows differ"))
    }
}
