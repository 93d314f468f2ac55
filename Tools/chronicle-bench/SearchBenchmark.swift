import CSQLite
import ChronicleCore
import ChronicleTesting
import ChronicleStore
import Foundation

/// Measurement 4: `DeviceStore.search` over a library of N articles (a fifth
/// with ~2,000 words of parsed full text on a premium plan), beside raw SQLite
/// running the same FTS5 statements through prepared statements on the same
/// file. A third, exact-ranking query (every match ranked by bm25, snippets for
/// the page only) is run as a reference for how much the engine's ranking
/// window changes the results.
struct SearchBenchmark {
    static let kinds = ["one-word", "two-word", "phrase", "prefix"]
    static let limit = 20

    struct Kind {
        var name: String
        var queries: [String]
        var chronicle: Samples
        var baseline: Samples
        /// Raw SQLite running `exactSQL` (every match ranked).
        var exact: Samples
        /// Sum over queries of |engine hits ∩ exact hits| / |exact hits|.
        var overlapSum: Double
        /// FTS rows matched per query (over every index, before grouping by owner).
        var matches: Samples
        /// Queries whose hits (kind, id, order, snippet) differ between the engine and the baseline.
        var mismatches: Int
        /// Phrases: the engine reading them from the word indexes (`search(phraseIndexes: false)`),
        /// as it does until the phrase indexes are complete, in a pass of its own.
        var fromWordIndexes = Samples()
        /// Queries whose hits differ between the two ways.
        var wordIndexMismatches = 0

        var meanOverlap: Double { queries.isEmpty ? .nan : overlapSum / Double(queries.count) }
    }

    struct Result {
        var articles: Int
        var fullTextArticles: Int
        var loadOps: Int
        var loadSeconds: Double
        var storeBytes: Int64
        var kinds: [Kind]
        /// One-word queries each right after a local write: the read connections have to read
        /// every ranked row's length again (`SearchRank` keeps them only until a write).
        var afterWrite = Samples()
        /// The phrase indexes after the load: completed on this thread (they are kept up to date
        /// as the load writes, so this is little or nothing), and how many rows they hold.
        var phraseIndexSeconds = 0.0
        var phraseIndexRows: Int64 = 0
    }

    let directory: String
    let articles: Int
    let queriesPerKind: Int
    let seed: UInt64
    let vocabulary: Vocabulary

    /// Diagnostic: `CHRONICLE_BENCH_RANK_WINDOW=N` runs engine and baseline with that ranking window.
    static var rankWindow: Int {
        ProcessInfo.processInfo.environment["CHRONICLE_BENCH_RANK_WINDOW"].flatMap(Int.init) ?? DeviceStore.searchRankWindow
    }

    /// Diagnostic: `CHRONICLE_BENCH_BASELINE_FTS5_IDF=1` has the baseline rank one-phrase queries
    /// as bm25() does (the IDF counted inside the function, before the window is read), to time
    /// the engine's IDF from the window's length against it in the same run.
    static let baselineCountsIDFFirst = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BASELINE_FTS5_IDF"] == "1"

    /// Diagnostic: `CHRONICLE_BENCH_BASELINE_READING_ON=0` has the baseline count a prefix's matches
    /// in a second query (bm25()'s way, as the engine did until 12-02 night) where the engine reads
    /// on past its window (`SearchRank.readsOn`).
    static let baselineReadsOn = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BASELINE_READING_ON"] != "0"

    /// Diagnostic: `CHRONICLE_BENCH_SEARCH_PARALLEL=0` times the engine on one read connection.
    static let parallel = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SEARCH_PARALLEL"] != "0"

    func run() throws -> Result {
        let schema = Schema.readItLater
        let path = directory + "/search.chronicle"
        let window = Self.rankWindow
        let libraryID = benchLibraryID(seed: seed ^ 0x5EA2C4)
        let clock = ManualClock()
        let store = try DeviceStore.create(at: path, schema: schema, libraryID: libraryID, clock: clock,
                                           ids: SeededV7IDGenerator(seed: seed ^ 0x5EA2C4, clock: clock))
        let (loadOps, fullText, loadSeconds) = try load(store, libraryID: libraryID)
        let (phraseIndexSeconds, phraseIndexRows) = try completePhraseIndexes(store, label: "search")
        // The load's log is copied into the database now, not by the background checkpoint
        // while the first queries are timed, and the kernel writes the load's pages to the disk
        // now, not on its own threads during them.
        store.checkpoint()
        sync()

        let raw = try RawDatabase(path: path, readOnly: true)
        let baseline = try RawSearch(raw, schema: schema)
        let exact = try raw.prepare(Self.exactSQL(schema: schema, markers: ("[", "]")))
        let counters = try ProjectionSchema(schema: schema).searchIndexes.map { _, index in
            let fts = ProjectionSchema.quoted(index.index)
            return try raw.prepare("SELECT count(*) FROM \(fts) WHERE \(fts) MATCH ?1")
        }

        var rng = SplitMix64(seed: seed ^ 0x0E7135)
        var kinds: [Kind] = []
        for name in Self.kinds {
            let queries = (0..<queriesPerKind).map { _ in query(name, &rng) }
            var kind = Kind(name: name, queries: queries, chronicle: Samples(capacity: queries.count),
                            baseline: Samples(capacity: queries.count), exact: Samples(capacity: queries.count),
                            overlapSum: 0, matches: Samples(), mismatches: 0)
            progress("search: \(name) queries (\(queries.count), e.g. \(queries.prefix(3).map { "'\($0)'" }.joined(separator: ", ")))…")
            // A few untimed queries warm the page caches and the statement caches of every side.
            for text in queries.prefix(10) {
                _ = try store.search(text, limit: Self.limit, rankWindow: window, parallel: Self.parallel)
                _ = try baseline.search(SearchQuery(text).match, phrases: SearchQuery(text).terms.count,
                                        readingOn: SearchQuery(text), pairs: RawSearch.pairs(of: text, on: raw),
                                        limit: Self.limit, rankWindow: window)
            }
            for text in queries {
                var matched: Int64 = 0
                for counter in counters {
                    matched += try rawCount(raw, counter, SearchQuery(text).match)
                }
                kind.matches.add(UInt64(matched))
            }
            // Engine and baseline take turns going first: whichever runs second finds the pages of the
            // same words just read into the OS cache by the other. The exact ranking, which reads
            // every match, runs in its own pass afterwards, so it evicts nothing the timed queries use.
            var found: [(hits: [SearchHit], raw: (hits: [String], snippets: [String]))] = []
            found.reserveCapacity(queries.count)
            var times: [(engine: UInt64, baseline: UInt64)] = []
            for (n, text) in queries.enumerated() {
                let match = SearchQuery(text).match, phrases = Self.baselineCountsIDFFirst ? 0 : SearchQuery(text).terms.count
                let readingOn: SearchQuery? = Self.baselineReadsOn ? SearchQuery(text) : nil
                var hits: [SearchHit] = [], rawHits: (hits: [String], snippets: [String]) = ([], [])
                var engineTime: UInt64 = 0, baselineTime: UInt64 = 0
                for engineTurn in n % 2 == 0 ? [true, false] : [false, true] {
                    let t0 = nowNanoseconds()
                    if engineTurn {
                        hits = try store.search(text, limit: Self.limit, rankWindow: window, parallel: Self.parallel)
                        engineTime = nowNanoseconds() - t0
                    } else {
                        rawHits = try baseline.search(match, phrases: phrases, readingOn: readingOn, pairs: RawSearch.pairs(of: text, on: raw),
                                                      limit: Self.limit, rankWindow: window)
                        baselineTime = nowNanoseconds() - t0
                    }
                }
                kind.chronicle.add(engineTime)
                kind.baseline.add(baselineTime)
                times.append((engineTime, baselineTime))
                found.append((hits, rawHits))
            }
            if let slowest = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SEARCH_SLOWEST"].flatMap(Int.init), slowest > 0 {
                for n in queries.indices.sorted(by: { times[$0].engine > times[$1].engine }).prefix(slowest) {
                    // Run again at once: how much of the first time was pages read for the first time.
                    var again: [String] = []
                    for _ in 0..<3 {
                        let t0 = nowNanoseconds()
                        _ = try store.search(queries[n], limit: Self.limit, rankWindow: window, parallel: Self.parallel)
                        again.append(formatFixed(Double(nowNanoseconds() - t0) / 1e6, 3))
                    }
                    progress("search \(name) slowest: '\(queries[n])' chronicle \(formatFixed(Double(times[n].engine) / 1e6, 3)) ms, raw sqlite \(formatFixed(Double(times[n].baseline) / 1e6, 3)) ms (\(n % 2 == 0 ? "chronicle" : "raw sqlite") first); again: \(again.joined(separator: ", ")) ms")
                }
            }
            for (text, (hits, rawHits)) in zip(queries, found) {
                let t0 = nowNanoseconds()
                let exactHits = try Self.rawExact(raw, exact, SearchQuery(text).match, limit: Int64(Self.limit))
                kind.exact.add(nowNanoseconds() - t0)
                if hits.map({ $0.kind + "/" + $0.id }) != rawHits.hits || hits.map(\.snippet) != rawHits.snippets { kind.mismatches += 1 }
                let found = Set(hits.map { $0.kind + "/" + $0.id })
                kind.overlapSum += exactHits.isEmpty ? 1 : Double(exactHits.filter(found.contains).count) / Double(exactHits.count)
            }
            if name == "phrase" {
                // The same phrases from the word indexes, as before the phrase indexes are complete.
                for text in queries.prefix(10) {
                    _ = try store.search(text, limit: Self.limit, rankWindow: window, parallel: Self.parallel, phraseIndexes: false)
                }
                for (text, (hits, _)) in zip(queries, found) {
                    let t0 = nowNanoseconds()
                    let fromWords = try store.search(text, limit: Self.limit, rankWindow: window, parallel: Self.parallel, phraseIndexes: false)
                    kind.fromWordIndexes.add(nowNanoseconds() - t0)
                    if fromWords != hits { kind.wordIndexMismatches += 1 }
                }
                progress("search: phrase from the word indexes: p50 \(formatFixed(kind.fromWordIndexes.percentileMilliseconds(0.5), 3)) ms p99 \(formatFixed(kind.fromWordIndexes.percentileMilliseconds(0.99), 3)) ms; hits differ from the phrase indexes' in \(kind.wordIndexMismatches)")
            }
            progress("search: \(name): chronicle p50 \(formatFixed(kind.chronicle.percentileMilliseconds(0.5), 3)) ms p99 \(formatFixed(kind.chronicle.percentileMilliseconds(0.99), 3)) ms; raw sqlite p50 \(formatFixed(kind.baseline.percentileMilliseconds(0.5), 3)) ms p99 \(formatFixed(kind.baseline.percentileMilliseconds(0.99), 3)) ms; exact ranking p50 \(formatFixed(kind.exact.percentileMilliseconds(0.5), 3)) ms, top-\(Self.limit) overlap \(formatFixed(100 * kind.meanOverlap, 1))%")
            kinds.append(kind)
        }
        // Diagnostic: each query on one read connection and on two (`search(parallel:)`), in
        // turn (one, two, two, one), after 20 queries of each kind to warm both.
        if ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SEARCH_AB"] == "1" {
            for kind in kinds {
                var one = Samples(capacity: 2 * kind.queries.count), two = Samples(capacity: 2 * kind.queries.count)
                for text in kind.queries.prefix(20) {
                    for parallel in [false, true] {
                        _ = try store.search(text, limit: Self.limit, rankWindow: window, parallel: parallel)
                    }
                }
                for text in kind.queries {
                    for parallel in [false, true, true, false] {
                        let t0 = nowNanoseconds()
                        _ = try store.search(text, limit: Self.limit, rankWindow: window, parallel: parallel)
                        if parallel { two.add(nowNanoseconds() - t0) } else { one.add(nowNanoseconds() - t0) }
                    }
                }
                progress("search A/B \(kind.name): one connection p50 \(formatFixed(one.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(one.percentileMilliseconds(0.99), 3)) ms; two p50 \(formatFixed(two.percentileMilliseconds(0.5), 3)) p99 \(formatFixed(two.percentileMilliseconds(0.99), 3)) ms")
            }
        }
        // The same one-word queries, each right after a local write (untimed): no remembered row lengths.
        var afterWrite = Samples(capacity: queriesPerKind)
        for (n, text) in (kinds.first?.queries ?? []).enumerated() {
            try store.write("article.save", payload: ["url": .text("https://example.com/after-write/\(n)"), "title": .text("after a write \(n)")])
            let t0 = nowNanoseconds()
            _ = try store.search(text, limit: Self.limit, rankWindow: window)
            afterWrite.add(nowNanoseconds() - t0)
        }
        return Result(articles: articles, fullTextArticles: fullText, loadOps: loadOps, loadSeconds: loadSeconds,
                      storeBytes: databaseBytes(path), kinds: kinds, afterWrite: afterWrite,
                      phraseIndexSeconds: phraseIndexSeconds, phraseIndexRows: phraseIndexRows)
    }

    /// Fills the store through confirmed ops: the premium plan, then per article a
    /// save (title, url, sometimes a byline), for every fifth article the parsed
    /// full text, some tags and, for one in ten, a highlight.
    private func load(_ store: DeviceStore, libraryID: UUID) throws -> (ops: Int, fullText: Int, seconds: Double) {
        var rng = SplitMix64(seed: seed ^ 0x10AD)
        var seq: Int64 = 0
        var time: Int64 = 1_780_000_000_000
        let device = rng.uuid()
        var deviceSeq: Int64 = 0, serverDeviceSeq: Int64 = 0
        var batch: [Op] = []
        var batchBytes = 0
        var total = 0, fullText = 0
        var seconds = 0.0
        var throttle = Throttle()
        let tags = (0..<300).map { vocabulary.words[40 + $0 * 7] }
        let colors = ["yellow", "green", "blue", "pink", "purple"]

        func append(_ type: String, _ entity: UUID, _ payload: Payload, server: Bool) {
            seq += 1
            time += 1_000
            let author = server ? Op.serverDeviceID : device
            if server { serverDeviceSeq += 1 } else { deviceSeq += 1 }
            batch.append(Op(opID: rng.uuid7(milliseconds: time), libraryID: libraryID, deviceID: author, deviceSeq: server ? serverDeviceSeq : deviceSeq,
                            type: type, version: 1, entityID: entity, payload: payload, deviceTime: time, baseSeq: seq - 1,
                            serverSeq: seq, serverTime: time))
        }
        func flush() throws {
            guard !batch.isEmpty else { return }
            let t0 = nowNanoseconds()
            try store.applyConfirmed(batch)
            seconds += Double(nowNanoseconds() - t0) / 1e9
            total += batch.count
            batch.removeAll(keepingCapacity: true)
            batchBytes = 0
        }

        append("library.plan", libraryID, ["plan": .text("premium")], server: true)
        for index in 0..<articles {
            let article = rng.uuid7(milliseconds: time)
            var payload: Payload = [
                "url": .text("https://\(vocabulary.words[rng.below(vocabulary.count)]).example/\(vocabulary.sample(&rng))-\(index)"),
                "title": .text(vocabulary.title(words: rng.int(4...10), &rng)),
            ]
            if rng.chance(0.3) { payload["author"] = .text(vocabulary.title(words: 2, &rng)) }
            append("article.save", article, payload, server: false)
            if index % 5 == 0 {
                let words = rng.int(1_800...2_200)
                let text = vocabulary.text(words: words, &rng)
                batchBytes += text.utf8.count
                append("article.parsed", article, ["text": .text(text), "word_count": .integer(Int64(words))], server: true)
                fullText += 1
            }
            for _ in 0..<rng.below(3) { append("article.tag", article, ["tag": .text(rng.pick(tags))], server: false) }
            if rng.below(10) == 0 {
                append("highlight.create", rng.uuid7(milliseconds: time), ["article_id": .text(article.lowercased),
                                                        "quote": .text(vocabulary.text(words: rng.int(8...25), &rng)),
                                                        "position": .integer(Int64(rng.below(10_000))),
                                                        "color": .text(rng.pick(colors))], server: false)
            }
            if batch.count >= 5_000 || batchBytes >= 8_000_000 { try flush() }
            if throttle.ready() {
                progress("search: loading articles \(formatCount(Double(index + 1)))/\(formatCount(Double(articles))) (\(formatCount(Double(total + batch.count))) ops)")
            }
        }
        try flush()
        progress("search: loaded \(formatCount(Double(articles))) articles, \(formatCount(Double(fullText))) with full text, in \(formatFixed(seconds, 1)) s of applyConfirmed")
        return (total, fullText, seconds)
    }

    /// A query of the given kind. Words are drawn log-uniformly by rank, so there
    /// are as many queries for everyday words as for rare ones.
    private func query(_ kind: String, _ rng: inout SplitMix64) -> String {
        let all = 10..<vocabulary.count
        switch kind {
        case "one-word":
            return vocabulary.words[vocabulary.logUniformRank(all, &rng)]
        case "two-word":
            return vocabulary.words[vocabulary.logUniformRank(all, &rng)] + " " + vocabulary.words[vocabulary.logUniformRank(all, &rng)]
        case "phrase":
            // Two fairly common words, so the phrase occurs somewhere.
            let a = vocabulary.words[vocabulary.logUniformRank(1..<300, &rng)]
            let b = vocabulary.words[vocabulary.logUniformRank(1..<300, &rng)]
            return "\"\(a) \(b)\""
        default:
            let word = vocabulary.words[vocabulary.logUniformRank(all, &rng)]
            return String(word.prefix(min(word.count, 3 + rng.below(3)))) + "*"
        }
    }

    private func rawCount(_ raw: RawDatabase, _ statement: OpaquePointer, _ match: String) throws -> Int64 {
        try raw.bind(statement, [.text(match)])
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW else { throw BenchError("count query failed: \(raw.errorMessage)") }
        return sqlite3_column_int64(statement, 0)
    }

    /// The baseline query: bind, step every row, read every column.
    /// Exact ranking's hits as `kind/owner`, best first.
    static func rawExact(_ raw: RawDatabase, _ statement: OpaquePointer, _ match: String, limit: Int64) throws -> [String] {
        try raw.bind(statement, [.text(match), .integer(limit)])
        defer { sqlite3_reset(statement) }
        var hits: [String] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw BenchError("search query failed (\(rc)): \(raw.errorMessage)") }
            for column: Int32 in [3, 4, 5] { _ = sqlite3_column_text(statement, column) }
            hits.append(String(cString: sqlite3_column_text(statement, 0)) + "/" + String(cString: sqlite3_column_text(statement, 1)))
        }
        return hits
    }

    /// Exact ranking as one statement: every match of every index ranked by bm25
    /// (schema weights), best per owning row, equal scores newest (highest id) first as the
    /// engine breaks them, snippets for the page only.
    static func exactSQL(schema: Schema, markers: (String, String)) -> String {
        func literal(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }
        func titleField(of entity: EntitySpec) -> String? {
            entity.field("title")?.name ?? entity.field("name")?.name ?? entity.scalarFields.first(where: { $0.type == .text })?.name
        }
        let q = ProjectionSchema.quoted
        var parts: [String] = []
        var snippets: [String] = []
        for (entity, index) in ProjectionSchema(schema: schema).searchIndexes {
            let fts = q(index.index)
            let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
            var from = "\(fts) JOIN "
            var conditions = ["\(fts) MATCH ?1"]
            let owner: EntitySpec
            let ownerID: String
            if let setField = index.setField {
                from += "\(q(entity.setTable(entity.field(setField)!))) s ON s.rowid = \(fts).rowid JOIN \(q(entity.table)) t ON t.id = s.id"
            } else {
                from += "\(q(entity.table)) t ON t.rowid = \(fts).rowid"
            }
            if entity.hasSoftDelete { conditions.append("t.deleted_at IS NULL") }
            if let ownerField = index.owner, let target = entity.field(ownerField)?.references, let ownerEntity = schema.entity(target) {
                owner = ownerEntity
                from += " JOIN \(q(ownerEntity.table)) o ON o.id = t.\(q(ownerField))"
                if ownerEntity.hasSoftDelete { conditions.append("o.deleted_at IS NULL") }
                ownerID = "o.id"
            } else {
                owner = entity
                ownerID = "t.id"
            }
            let title = titleField(of: owner).map { (index.owner != nil ? "o." : "t.") + q($0) } ?? "NULL"
            parts.append("""
                SELECT \(literal(owner.name)) AS kind, \(ownerID) AS owner, bm25(\(fts), \(weights)) AS score, \
                \(literal(index.index)) AS source, \(fts).rowid AS rid, \(title) AS title FROM \(from) WHERE \(conditions.joined(separator: " AND "))
                """)
            snippets.append("""
                WHEN \(literal(index.index)) THEN (SELECT \(SearchSnippet.functionName)(\(fts), \(literal(markers.0)), \(literal(markers.1)), '…', 12) \
                FROM \(fts) WHERE \(fts) MATCH ?1 AND \(fts).rowid = page.rid)
                """)
        }
        return """
            WITH page AS (
            SELECT kind, owner, min(score) AS best, source, rid, title FROM (
            \(parts.joined(separator: "\nUNION ALL\n"))
            ) GROUP BY kind, owner ORDER BY best, owner DESC LIMIT ?2
            )
            SELECT kind, owner, best, source, CASE source \(snippets.joined(separator: " ")) END AS snip, title
            FROM page ORDER BY best, owner DESC
            """
    }
}
