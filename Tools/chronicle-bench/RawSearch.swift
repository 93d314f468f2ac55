import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The search baseline: the statements `DeviceStore.search` runs
/// (Sources/ChronicleStore/Search/DeviceStore+Search.swift, `searchPlans`,
/// internal), rebuilt from the public schema types and run as raw prepared
/// statements in one read transaction: per index its newest matches with their
/// bm25 scores from the FTS5 table alone (no join: the index holds only
/// findable rows, see `ProjectionSchema.contentView`), ranked in memory, then
/// the owner of each candidate from the index's content view until the index
/// has given `limit` distinct rows; the best per owning row across indexes;
/// then the snippets of each index's hits in one range pass (a phrase of several words in one per
/// run of nearby hits, `SearchSnippet.passes`), and a title per hit. A phrase of
/// several words is read from an index's phrase index where it has one, its passages too, as the
/// engine reads it once that index is complete (`SearchPairs.phraseMatch`).
///
/// Keep in step with `searchPlans` when the engine changes its queries.
final class RawSearch {
    struct Plan {
        let ownerKind: String
        let window: OpaquePointer
        let termWindow: OpaquePointer
        let termWindowReadingOn: OpaquePointer
        /// Whether the index's rows are long (`SearchRank.hasLongRows`), where a long prefix reads on.
        let longRows: Bool
        /// The prefix lengths the index keeps prefix indexes for; a prefix of another length reads on.
        let prefixLengths: [Int]
        let restCount: OpaquePointer
        /// The phrase index's window and count statements (`SearchPairs.phraseIndexTable`), if the index has one.
        let phrase: (termWindow: OpaquePointer, restCount: OpaquePointer)?
        let owner: OpaquePointer
        let snippet: OpaquePointer
        /// The snippets of a phrase read from the phrase index (`SearchSnippet.phraseIndexSQL`).
        let phraseSnippet: OpaquePointer?
        let title: OpaquePointer?
    }

    private let raw: RawDatabase
    private let plans: [Plan]
    private let begin: OpaquePointer
    private let rollback: OpaquePointer

    init(_ raw: RawDatabase, schema: Schema) throws {
        self.raw = raw
        let projection = ProjectionSchema(schema: schema)
        let q = ProjectionSchema.quoted
        func titleField(of entity: EntitySpec) -> String? {
            entity.field("title")?.name ?? entity.field("name")?.name ?? entity.scalarFields.first(where: { $0.type == .text })?.name
        }
        plans = try projection.searchIndexes.map { entity, index in
            let owner = projection.ownerEntity(of: index, in: entity) ?? entity
            return Plan(
                ownerKind: owner.name,
                window: try raw.prepare(SearchRank.windowSQL(index)),
                termWindow: try raw.prepare(SearchRank.termWindowSQL(index)),
                termWindowReadingOn: try raw.prepare(SearchRank.termWindowReadingOnSQL(index)),
                longRows: try Self.hasLongRows(raw, index: index.index),
                prefixLengths: ProjectionSchema.prefixIndexLengths(of: index),
                restCount: try raw.prepare(SearchRank.restCountSQL(index)),
                phrase: try SearchPairs.phraseIndexTable(of: index).map { table in
                    (try raw.prepare(SearchRank.termWindowSQL(index, table: table)), try raw.prepare(SearchRank.restCountSQL(index, table: table)))
                },
                owner: try raw.prepare("SELECT owner_id FROM \(q(projection.contentView(of: index, in: entity).name)) WHERE rid = ?1"),
                snippet: try raw.prepare(SearchSnippet.sql(over: index)),
                phraseSnippet: try SearchSnippet.phraseIndexSQL(over: index).map { try raw.prepare($0) },
                title: try titleField(of: owner).map { try raw.prepare("SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1") })
        }
        begin = try raw.prepare("BEGIN DEFERRED")
        rollback = try raw.prepare("ROLLBACK")
    }

    /// As the engine decides it, from the index's averages record (read once: the library does not change).
    private static func hasLongRows(_ raw: RawDatabase, index: String) throws -> Bool {
        let statement = try raw.prepare("SELECT block FROM \(ProjectionSchema.quoted(index + "_data")) WHERE id = 1")
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let blob = sqlite3_column_blob(statement, 0) else { return false }
        let totals = SearchRank.indexTotals(averagesRecord: UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(statement, 0))))
        return SearchRank.hasLongRows(rows: totals.rows, tokens: totals.tokens)
    }

    private struct Candidate {
        var kind: String
        var id: String
        var score: Double
        var plan: Int
        var rowid: Int64
    }

    /// Hits as `kind/owner` with their snippets, best first.
    /// `phrases`: how many FTS5 phrases `match` holds (`SearchQuery.terms`); with one, the IDF is
    /// applied here from the count of its matches, as the engine does; `readingOn`: the query, where
    /// `SearchRank.readsOn` it in an index of long rows, counted by reading on past the window, as
    /// the engine does (nil: never). `pairs`: for a query of one phrase of several words, that phrase
    /// of word pairs (`SearchPairs.phraseMatch`), read from the phrase indexes.
    func search(_ match: String, phrases: Int, readingOn: SearchQuery? = nil, pairs: String? = nil, limit: Int,
                markers: (String, String) = ("[", "]"),
                rankWindow: Int = DeviceStore.searchRankWindow) throws -> (hits: [String], snippets: [String]) {
        try raw.run(begin, [])
        defer { sqlite3_step(rollback); sqlite3_reset(rollback) }
        var best: [String: Candidate] = [:]
        var ranked: [(rowid: Int64, score: Double)] = []
        for (number, plan) in plans.enumerated() {
            ranked.removeAll(keepingCapacity: true)
            let window = max(rankWindow, limit)
            let readsOn = plan.longRows && readingOn.map { SearchRank.readsOn($0, prefixLengths: plan.prefixLengths) } == true
            // A phrase of words from the phrase index, where the index has one: the same rows and counts.
            let phrase = phrases == 1 ? pairs.flatMap { pairs in plan.phrase.map { (pairs, $0) } } : nil
            let statement = phrase?.1.termWindow ?? (phrases != 1 ? plan.window : readsOn ? plan.termWindowReadingOn : plan.termWindow)
            let windowMatch = phrase?.0 ?? match
            let restCount = phrase?.1.restCount ?? plan.restCount
            try raw.bind(statement, [.text(windowMatch), .integer(Int64(window))])
            while true {
                let rc = sqlite3_step(statement)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { sqlite3_reset(statement); throw BenchError("window query failed (\(rc)): \(raw.errorMessage)") }
                if sqlite3_column_type(statement, 1) != SQLITE_NULL {
                    ranked.append((sqlite3_column_int64(statement, 0), sqlite3_column_double(statement, 1)))
                }
            }
            sqlite3_reset(statement)
            if phrases == 1, let oldest = ranked.last?.rowid {
                guard let counts = raw.searchWindowCounts else { throw BenchError("chronicle_bm25_term is not registered") }
                let idf = try counts.idf(returned: ranked.count, window: window) {
                    try raw.bind(restCount, [.text(windowMatch), .integer(oldest)])
                    defer { sqlite3_reset(restCount) }
                    guard sqlite3_step(restCount) == SQLITE_ROW else { throw BenchError("count query failed: \(raw.errorMessage)") }
                    return sqlite3_column_int64(restCount, 0)
                }
                for i in ranked.indices { ranked[i].score = SearchRank.score(idf: idf, term: ranked[i].score) }
            }
            ranked.sort { $0.score != $1.score ? $0.score < $1.score : $0.rowid > $1.rowid }
            var distinct = Set<String>()
            for (rowid, score) in ranked {
                try raw.bind(plan.owner, [.integer(rowid)])
                let rc = sqlite3_step(plan.owner)
                guard rc == SQLITE_ROW else {
                    sqlite3_reset(plan.owner)
                    guard rc == SQLITE_DONE else { throw BenchError("owner query failed (\(rc)): \(raw.errorMessage)") }
                    continue
                }
                let id = String(cString: sqlite3_column_text(plan.owner, 0))
                sqlite3_reset(plan.owner)
                distinct.insert(id)
                let key = plan.ownerKind + "/" + id
                if best[key].map({ $0.score > score }) ?? true {
                    best[key] = Candidate(kind: plan.ownerKind, id: id, score: score, plan: number, rowid: rowid)
                }
                if distinct.count >= limit { break }
            }
        }
        let top = best.values.sorted { ($0.score, $1.id, $0.kind) < ($1.score, $0.id, $1.kind) }.prefix(limit)
        // Snippets: one range pass per index over its hits' rowids.
        var byRowid: [Int: [Int64: String]] = [:]
        let phraseOfWords = SearchSnippet.isPhraseOfWords(SearchQuery(match), on: raw.handle)
        for (number, group) in Dictionary(grouping: top, by: \.plan) {
            let plan = plans[number]
            let rowids = group.map(\.rowid)
            let list = "[" + rowids.map(String.init).joined(separator: ",") + "]"
            var found: [Int64: String] = [:]
            // A phrase read from the phrase index: its passages from there too.
            let (snippet, snippetMatch) = phrases == 1 ? pairs.flatMap { pairs in plan.phraseSnippet.map { ($0, pairs) } } ?? (plan.snippet, match)
                : (plan.snippet, match)
            for range in SearchSnippet.passes(over: rowids, phraseOfWords: phraseOfWords) {
                try raw.bind(snippet, [.text(markers.0), .text(markers.1), .text(snippetMatch), .integer(range.lowerBound),
                                       .integer(range.upperBound), .text(list)])
                while sqlite3_step(snippet) == SQLITE_ROW {
                    found[sqlite3_column_int64(snippet, 0)] = sqlite3_column_text(snippet, 1).map { String(cString: $0) } ?? ""
                }
                sqlite3_reset(snippet)
            }
            byRowid[number] = found
        }
        var hits: [String] = [], snippets: [String] = []
        for candidate in top {
            let plan = plans[candidate.plan]
            snippets.append(byRowid[candidate.plan]?[candidate.rowid] ?? "")
            if let title = plan.title {
                try raw.bind(title, [.text(candidate.id)])
                if sqlite3_step(title) == SQLITE_ROW { _ = sqlite3_column_text(title, 0) }
                sqlite3_reset(title)
            }
            hits.append(candidate.kind + "/" + candidate.id)
        }
        return (hits, snippets)
    }
}

extension RawSearch {
    /// For a query of one phrase of several words (no prefix), the phrase of word pairs the
    /// phrase indexes answer it with, as the engine makes it (`DeviceStore.phraseIndexMatches`).
    static func pairs(of text: String, on raw: RawDatabase) -> String? {
        let query = SearchQuery(text)
        guard query.terms.count == 1, let term = query.terms.first, !term.isPrefix,
              let words = SearchPairs.words(of: term.text, on: raw.handle), words.count >= 2 else { return nil }
        return SearchPairs.phraseMatch(words)
    }
}
