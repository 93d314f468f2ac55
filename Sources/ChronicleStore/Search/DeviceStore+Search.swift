import ChronicleCore
import Foundation

/// One search result: a row (an article, an episode, a job…) and why it matched.
public struct SearchHit: Sendable, Equatable {
    /// The entity type of the row the hit belongs to.
    public var kind: String
    public var id: String
    public var title: String?
    /// The best-matching passage, matched words between the markers.
    public var snippet: String
    /// bm25 score of the best match (with the schema's column weights); lower is better.
    public var score: Double
    /// Which index the best match came from, e.g. `article_fts`, `highlight_fts`.
    public var matchedIn: String
}

extension DeviceStore {
    /// How many of an index's newest matches are ranked by bm25. Ranking every
    /// match of a common word in 20,000 long articles takes ~50 ms; within this
    /// window a query's cost stays bounded however common its words are, and
    /// when a query matches fewer rows than this, all of them are ranked.
    public static let searchRankWindow = 1_000

    /// Full-text search over every FTS5 index of the schema, ranked by bm25.
    ///
    /// Any string is a valid query (see `SearchQuery`): quotes, operators,
    /// unbalanced parentheses and emoji never raise an error. Hits in a
    /// highlight or note count for the article they belong to; deleted rows
    /// are left out. Each index contributes its best matches among its newest
    /// `rankWindow` matches, read in one pass (newest first, each with its
    /// bm25 score) and ranked here; an index's candidates are mapped to their rows
    /// only until it has given `limit` distinct rows, since no later candidate of
    /// that index can reach the page. Snippets are made for the final hits only.
    ///
    /// Scores are FTS5's bm25 with the schema's column weights, computed by `chronicle_bm25`
    /// (`SearchRank`). For a query of one word, phrase or prefix (one FTS5 phrase) the window
    /// is read with `chronicle_bm25_term` and the phrase's IDF applied here: bm25() counts the
    /// phrase's matches over the whole index in a pass of its own, which here the window saves
    /// (a window holding every match has the count as its length; past a full window of a
    /// phrase of several words only the older matches are counted). Both remember each row's
    /// length per read connection until the next write; passages come from `chronicle_snippet`
    /// (`SearchSnippet`).
    ///
    /// `rankWindow` trades ranking depth for speed: a smaller window ranks fewer of a
    /// common word's matches (its newest), a larger one more (up to all of them).
    ///
    /// `parallel`: the indexes are ranked on two read connections at once, about half the
    /// indexes' size on each, when both can be given the same snapshot (no write is committing at that
    /// instant); otherwise, and with `parallel` false, on one. The results are the same.
    ///
    /// A query of one phrase of several words is read from the phrase indexes (`PhraseIndex`), and
    /// its passages too, once they hold every row; `phraseIndexes` false reads it from the
    /// word indexes, as before they are complete. The results are the same.
    public func search(_ text: String, limit: Int = 20, markers: (String, String) = ("[", "]"),
                       rankWindow: Int = searchRankWindow, parallel: Bool = true, phraseIndexes: Bool = true) throws -> [SearchHit] {
        let query = SearchQuery(text)
        guard !query.isEmpty, limit > 0 else { return [] }
        let window = max(rankWindow, limit)
        let match = Value.text(query.match)
        return try read { db in
            let plans = searchPlans
            let pairsOfPlan = phraseIndexes ? try phraseIndexMatches(query, plans: plans, in: db) : Array(repeating: nil, count: plans.count)
            let best = try candidates(on: db, query: query, match: match, window: window, limit: limit, parallel: parallel,
                                      pairsOfPlan: pairsOfPlan)
            // Equal scores: the newer row first (ids are time-ordered), as within each index.
            let top = best.values.sorted { ($0.score, $1.id, $0.kind) < ($1.score, $0.id, $1.kind) }.prefix(limit)
            // Snippets: one pass per index over the rowid range of its hits (seeking each hit's
            // rowid separately costs more than reading the range on common words); a phrase of
            // several words in a pass per run of nearby hits (`SearchSnippet.passes`), from the
            // phrase index where the phrase was read from it.
            var snippets: [String: String] = [:]
            let phraseOfWords = SearchSnippet.isPhraseOfWords(query, on: db.handle)
            for (index, hits) in Dictionary(grouping: top, by: \.plan.index) {
                let plan = hits[0].plan
                let rowids = hits.map(\.rowid)
                let list = "[" + rowids.map(String.init).joined(separator: ",") + "]"
                let (sql, snippetMatch) = plans.firstIndex { $0.index == index }
                    .flatMap { i in pairsOfPlan[i].flatMap { pairs in plan.phrase.map { ($0.snippet, pairs) } } } ?? (plan.snippet, match)
                for range in SearchSnippet.passes(over: rowids, phraseOfWords: phraseOfWords) {
                    try db.statement(sql).forEach([.text(markers.0), .text(markers.1), snippetMatch, .integer(range.lowerBound),
                                                   .integer(range.upperBound), .text(list)]) { row in
                        snippets[index + "/" + String(row.int(0))] = row.text(1)
                    }
                }
            }
            return try top.map { candidate in
                let snippet = snippets[candidate.plan.index + "/" + String(candidate.rowid)] ?? ""
                let title = try candidate.plan.title.flatMap { try db.scalarText($0, [.text(candidate.id)]) }
                return SearchHit(kind: candidate.kind, id: candidate.id, title: title, snippet: snippet,
                                 score: candidate.score, matchedIn: candidate.plan.index)
            }
        }
    }

    /// Best bm25 first (lower is better); among equal scores the newer row first.
    static func rankInPlace(_ ranked: inout [(rowid: Int64, score: Double)]) {
        ranked.sort { $0.score != $1.score ? $0.score < $1.score : $0.rowid > $1.rowid }
    }

    /// A row a search may return: its best-scoring match so far.
    struct SearchCandidate: Sendable {
        var kind: String
        var id: String
        var score: Double
        var plan: SearchPlan
        var rowid: Int64
    }

    /// How a query of one FTS5 phrase reads its windows: `chronicle_bm25_term` with a LIMIT
    /// (`SearchRank.termWindowSQL`), or reading on past the window (`termWindowReadingOnSQL`, for a
    /// prefix FTS5 answers by merging, `SearchRank.readsOn`, in an index of long rows). Nil for a
    /// query of several phrases.
    enum OnePhrase: Sendable { case windowed, readingOn }

    /// How searches read each plan, worked out from the indexes' sizes (`searchLayout`).
    struct SearchLayout: Sendable {
        /// Which of two workers ranks each plan (`shares`).
        var workerOfPlan: [Int]
        /// Whether a plan's index holds rows of `SearchRank.readingOnRowTokensMin` tokens or more
        /// on average, where a long prefix is read on past its window.
        var longRows: [Bool]
    }

    /// Every index's best candidates, keyed by kind and id, read in `db`'s read transaction.
    /// On a second read connection at once when it can be given the same snapshot (`sameSnapshot`).
    /// `pairsOfPlan`: for each plan, the phrase as a phrase of word pairs where it is read from the
    /// plan's phrase index (`phraseIndexMatches`), else nil.
    func candidates(on db: Database, query: SearchQuery, match: Value, window: Int, limit: Int,
                    parallel: Bool, pairsOfPlan: [Value?]) throws -> [String: SearchCandidate] {
        let plans = searchPlans
        var perPlan = [[String: SearchCandidate]](repeating: [:], count: plans.count)
        var done = false
        let layout = try searchLayout(db)
        // Every typed term is one FTS5 phrase (`SearchQuery.match`). A long prefix is read on only
        // where rows are long: in an index of short rows (titles, tags) merging a prefix's words
        // costs little, and stepping through every match more. And only where the index has no
        // prefix index of its length (documents have one of 4).
        let phraseOfPlan: [OnePhrase?] = plans.indices.map { i in
            guard query.terms.count == 1 else { return nil }
            return layout.longRows[i] && SearchRank.readsOn(query, prefixLengths: plans[i].prefixLengths) ? .readingOn : .windowed
        }
        // The second connection is an extra: if it cannot be had (no file descriptor left, say)
        // or anything fails on it, the first ranks every index alone, where a real error shows again.
        if parallel, plans.count > 1 {
            try? read { second in
                guard try sameSnapshot(db, second) else { return }
                let shared = PlanResults(count: plans.count)
                let connections = UnsafeSendable([db, second])
                let workerOfPlan = layout.workerOfPlan
                let help = SearchCountHelp(workers: 2)
                DispatchQueue.concurrentPerform(iterations: 2) { worker in
                    let connection = connections.value[worker]
                    // A worker done with its own indexes counts for the other until it is done too.
                    defer { help.serve(on: connection) }
                    for i in plans.indices where workerOfPlan[i] == worker {
                        do {
                            shared.set(i, try Self.rank(plans[i], in: connection, match: match, onePhrase: phraseOfPlan[i],
                                                        pairs: pairsOfPlan[i], window: window, limit: limit, helper: help))
                        } catch {
                            shared.fail(error)
                            return
                        }
                    }
                }
                perPlan = try shared.results()
                done = true
            }
        }
        if !done {
            for (i, plan) in plans.enumerated() {
                perPlan[i] = try Self.rank(plan, in: db, match: match, onePhrase: phraseOfPlan[i], pairs: pairsOfPlan[i],
                                           window: window, limit: limit)
            }
        }
        // In plan order, a later index replaces a row's candidate only with a better score, as one pass would.
        var best: [String: SearchCandidate] = [:]
        for found in perPlan {
            for (key, candidate) in found where best[key].map({ $0.score > candidate.score }) ?? true {
                best[key] = candidate
            }
        }
        return best
    }

    /// For each search plan, which of two workers ranks it: the indexes split into two
    /// shares of about equal size (`indexedTokens`, the largest first into the smaller share).
    /// Each plan stays on the same worker, so each read connection keeps its own indexes'
    /// pages and row lengths in its caches.
    func searchWorkers(_ db: Database) throws -> [Int] { try searchLayout(db).workerOfPlan }

    /// The plans' workers and which indexes have long rows, from each index's averages record;
    /// read again every `searchWorkersRefresh` searches, as a library grows (a first sync fills
    /// an empty store).
    func searchLayout(_ db: Database) throws -> SearchLayout {
        let known = searchLayoutState.withLock { state -> SearchLayout? in
            guard let current = state.layout, state.searches < Self.searchWorkersRefresh else { return nil }
            state.searches += 1
            return current
        }
        if let known { return known }
        let totals = try searchPlans.map { try Self.indexTotals($0.index, in: db) }
        let layout = SearchLayout(workerOfPlan: Self.shares(totals.map(\.tokens)),
                                  longRows: totals.map { SearchRank.hasLongRows(rows: $0.rows, tokens: $0.tokens) })
        searchLayoutState.withLock { $0 = (layout, 0) }
        return layout
    }

    /// Searches between two readings of the indexes' sizes (`searchWorkers`).
    static let searchWorkersRefresh = 256

    /// Two shares of about equal total size: for each size, 0 or 1, the largest first into the smaller share.
    static func shares(_ sizes: [Int64]) -> [Int] {
        var shares = Array(repeating: 0, count: sizes.count), load: [Int64] = [0, 0]
        for i in sizes.indices.sorted(by: { sizes[$0] > sizes[$1] }) {
            let share = load[0] <= load[1] ? 0 : 1
            shares[i] = share
            load[share] += max(1, sizes[i])
        }
        return shares
    }

    /// Tokens in an FTS5 index, over all its rows and columns: a measure of its size read
    /// from one small row (`indexTotals`). 0 if the record is missing or not as described.
    static func indexedTokens(_ index: String, in db: Database) throws -> Int64 {
        try indexTotals(index, in: db).tokens
    }

    /// An FTS5 index's rows and tokens, read from its averages record (`_data` row 1), which
    /// bm25 reads for the same totals (`SearchRank.indexTotals(averagesRecord:)`).
    static func indexTotals(_ index: String, in db: Database) throws -> (rows: Int64, tokens: Int64) {
        let data = ProjectionSchema.quoted(index + "_data")
        return try db.query("SELECT block FROM \(data) WHERE id = 1") { row in
            row.withBytes(0) { SearchRank.indexTotals(averagesRecord: $0) }
        }.first ?? (0, 0)
    }

    /// Whether two read connections see the same snapshot. `first` is already in its read
    /// transaction; `second`'s starts here. With the writer held (only if free: a search never
    /// waits for a write), no commit of this process falls between the two; the writer's
    /// `data_version`, the same before and after, says no other connection's did either.
    func sameSnapshot(_ first: Database, _ second: Database) throws -> Bool {
        try writer.withLockIfAvailable { writer in
            guard !writer.isInTransaction else { return false }
            let before = try writer.scalarInt("PRAGMA data_version")
            // SQLite opens a read transaction's snapshot at its first read.
            _ = try first.scalarInt("SELECT 1 FROM chronicle_meta LIMIT 1")
            _ = try second.scalarInt("SELECT 1 FROM chronicle_meta LIMIT 1")
            return try writer.scalarInt("PRAGMA data_version") == before
        } ?? false
    }

    /// One index's part of a search: its newest matches ranked, mapped to the rows they count for.
    /// `helper`: the other connection of a two-connection search, which may count half of a
    /// phrase's older matches (`SearchCountHelp`).
    /// `pairs`: the phrase as a phrase of word pairs, read from the plan's phrase index (`phraseIndexMatches`).
    static func rank(_ plan: SearchPlan, in db: Database, match: Value, onePhrase: OnePhrase?, pairs: Value? = nil, window: Int,
                     limit: Int, helper: SearchCountHelp? = nil) throws -> [String: SearchCandidate] {
        var ranked: [(rowid: Int64, score: Double)] = []
        ranked.reserveCapacity(min(window, 10_000))
        if let onePhrase, let counts = db.searchWindowCounts {
            // bm25 before the phrase's IDF, which comes from the count of its matches
            // (`SearchRank.termWindowSQL`; reading on, the rows past the window have no score).
            // A phrase of words is read from the phrase index when it may be: the same rows and counts.
            let phrase = pairs.flatMap { pairs in plan.phrase.map { (pairs, $0) } }
            let match = phrase?.0 ?? match
            let (termWindow, restCount, rangeCount) = phrase.map { ($0.1.termWindow, $0.1.restCount, $0.1.rangeCount) }
                ?? (onePhrase == .readingOn ? plan.termWindowReadingOn : plan.termWindow, plan.restCount, plan.rangeCount)
            try db.statement(termWindow).forEach([match, .integer(Int64(window))]) { row in
                if !row.isNull(1) { ranked.append((row.int(0), row.double(1))) }
            }
            guard let oldest = ranked.last?.rowid else { return [:] }
            let idf = try counts.idf(returned: ranked.count, window: window) {
                guard let helper, oldest > 1 else { return try db.scalarInt(restCount, [match, .integer(oldest)]) ?? 0 }
                // The older rows in two halves by rowid: the other connection may count the lower
                // half (if it is free by then) while this one counts the upper.
                let middle = oldest / 2
                let lower = helper.offer { other in
                    try other.scalarInt(rangeCount, [match, .integer(Int64.min), .integer(middle)]) ?? 0
                }
                let upper = try db.scalarInt(rangeCount, [match, .integer(middle), .integer(oldest)]) ?? 0
                return upper + (try lower.result(orRunOn: db))
            }
            for i in ranked.indices { ranked[i].score = SearchRank.score(idf: idf, term: ranked[i].score) }
        } else {
            try db.statement(plan.window).forEach([match, .integer(Int64(window))]) { row in
                ranked.append((row.int(0), row.double(1)))
            }
        }
        guard !ranked.isEmpty else { return [:] }
        rankInPlace(&ranked)
        let owners = try db.statement(plan.owner)
        var best: [String: SearchCandidate] = [:]
        var distinct = Set<String>()
        for (rowid, score) in ranked {
            // The index holds only live rows (see `ProjectionSchema.contentView`), so no hit needs filtering.
            guard let id = try owners.map([.integer(rowid)], { $0.text(0) }).first else { continue }
            distinct.insert(id)
            let key = plan.ownerKind + "/" + id
            if best[key].map({ $0.score > score }) ?? true {
                best[key] = SearchCandidate(kind: plan.ownerKind, id: id, score: score, plan: plan, rowid: rowid)
            }
            if distinct.count >= limit { break }
        }
        return best
    }

    /// The field shown as a row's title: `title`, else `name`, else the first text field.
    static func titleField(of entity: EntitySpec) -> String? {
        entity.field("title")?.name ?? entity.field("name")?.name
            ?? entity.scalarFields.first(where: { $0.type == .text })?.name
    }

    /// The SQL one index's part of a search runs, derived from the schema.
    struct SearchPlan: Sendable {
        let index: String
        let ownerKind: String
        /// The prefix lengths the index keeps prefix indexes for (`ProjectionSchema.prefixIndexLengths(of:)`).
        let prefixLengths: [Int]
        /// `?1` match, `?2` window → (rowid, bm25 score) of the newest matches (`SearchRank.windowSQL`).
        let window: String
        /// The same for a one-phrase query → (rowid, score before the IDF) (`SearchRank.termWindowSQL`).
        let termWindow: String
        /// The same reading on past the window, counting (`SearchRank.termWindowReadingOnSQL`).
        let termWindowReadingOn: String
        /// `?1` match, `?2` rowid → how many older rows match (`SearchRank.restCountSQL`).
        let restCount: String
        /// `?1` match, `?2`…`?3` rowid range → how many rows in it match (`SearchRank.rangeCountSQL`).
        let rangeCount: String
        /// `?1` rowid → the id of the row the hit counts for.
        let owner: String
        /// `?1`/`?2` markers, `?3` match, `?4`…`?5` rowid range, `?6` JSON array of rowids → (rowid, snippet).
        let snippet: String
        /// `?1` owner id → title.
        let title: String?
        /// The index's phrase index, if it has one (`PhraseIndex`).
        let phrase: PhrasePlan?
    }

    /// The SQL a phrase reads from a phrase index: as `SearchPlan`'s, over the pairs table, `?1`
    /// the phrase of pairs (`SearchPairs.phraseMatch`).
    struct PhrasePlan: Sendable {
        let index: PhraseIndex
        let termWindow: String
        let restCount: String
        let rangeCount: String
        /// `?3` the phrase of pairs → passages as the word index gives them (`SearchSnippet.phraseIndexSQL`).
        let snippet: String
    }

    /// For each plan, the MATCH expression of `query` in its phrase index, where a search reads
    /// it there: a query of one phrase of two words or more (no prefix), and a phrase index that
    /// holds every row in `db`'s snapshot. Otherwise nil; then, if a phrase index lags behind,
    /// the background filler is started.
    func phraseIndexMatches(_ query: SearchQuery, plans: [SearchPlan], in db: Database) throws -> [Value?] {
        let none = [Value?](repeating: nil, count: plans.count)
        guard query.terms.count == 1, let term = query.terms.first, !term.isPrefix,
              plans.contains(where: { $0.phrase != nil }),
              let words = SearchPairs.words(of: term.text, on: db.handle), words.count >= 2 else { return none }
        let match = Value.text(SearchPairs.phraseMatch(words))
        var lagging = false
        let matches = try plans.map { plan -> Value? in
            guard let phrase = plan.phrase else { return nil }
            guard try phrase.index.watermark(in: db) == PhraseIndex.complete else {
                lagging = true
                return nil
            }
            return match
        }
        if lagging { startPhraseIndexing() }
        return matches
    }

    static func searchPlans(_ projection: ProjectionSchema) -> [SearchPlan] {
        let q = ProjectionSchema.quoted
        return projection.searchIndexes.map { entity, index in
            let owner = projection.ownerEntity(of: index, in: entity) ?? entity
            return SearchPlan(
                index: index.index, ownerKind: owner.name, prefixLengths: ProjectionSchema.prefixIndexLengths(of: index),
                window: SearchRank.windowSQL(index), termWindow: SearchRank.termWindowSQL(index),
                termWindowReadingOn: SearchRank.termWindowReadingOnSQL(index),
                restCount: SearchRank.restCountSQL(index),
                rangeCount: SearchRank.rangeCountSQL(index),
                owner: "SELECT owner_id FROM \(q(projection.contentView(of: index, in: entity).name)) WHERE rid = ?1",
                snippet: SearchSnippet.sql(over: index),
                title: titleField(of: owner).map { "SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1" },
                phrase: PhraseIndex(of: index).map { phrase in
                    PhrasePlan(index: phrase, termWindow: SearchRank.termWindowSQL(index, table: phrase.table),
                               restCount: SearchRank.restCountSQL(index, table: phrase.table),
                               rangeCount: SearchRank.rangeCountSQL(index, table: phrase.table),
                               snippet: SearchSnippet.phraseIndexSQL(over: index)!)
                })
        }
    }
}
