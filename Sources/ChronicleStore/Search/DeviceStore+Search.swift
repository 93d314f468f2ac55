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
    public func search(_ text: String, limit: Int = 20, markers: (String, String) = ("[", "]"),
                       rankWindow: Int = searchRankWindow) throws -> [SearchHit] {
        let query = SearchQuery(text)
        guard !query.isEmpty, limit > 0 else { return [] }
        let window = max(rankWindow, limit)
        let match = Value.text(query.match)
        // Every typed term is one FTS5 phrase (`SearchQuery.match`).
        let onePhrase = query.terms.count == 1
        return try read { db in
            struct Candidate { var kind: String; var id: String; var score: Double; var plan: SearchPlan; var rowid: Int64 }
            var best: [String: Candidate] = [:]
            var ranked: [(rowid: Int64, score: Double)] = []
            ranked.reserveCapacity(min(window, 10_000))
            for plan in searchPlans {
                ranked.removeAll(keepingCapacity: true)
                if onePhrase, let counts = db.searchWindowCounts {
                    // bm25 before the phrase's IDF, which comes from the count of its matches
                    // (`SearchRank.termWindowSQL`).
                    try db.statement(plan.termWindow).forEach([match, .integer(Int64(window))]) { row in
                        ranked.append((row.int(0), row.double(1)))
                    }
                    guard let oldest = ranked.last?.rowid else { continue }
                    let idf = try counts.idf(returned: ranked.count, window: window) {
                        try db.scalarInt(plan.restCount, [match, .integer(oldest)]) ?? 0
                    }
                    for i in ranked.indices { ranked[i].score = SearchRank.score(idf: idf, term: ranked[i].score) }
                } else {
                    try db.statement(plan.window).forEach([match, .integer(Int64(window))]) { row in
                        ranked.append((row.int(0), row.double(1)))
                    }
                }
                guard !ranked.isEmpty else { continue }
                Self.rankInPlace(&ranked)
                let owners = try db.statement(plan.owner)
                var distinct = Set<String>()
                for (rowid, score) in ranked {
                    // The index holds only live rows (see `ProjectionSchema.contentView`), so no hit needs filtering.
                    guard let id = try owners.map([.integer(rowid)], { $0.text(0) }).first else { continue }
                    distinct.insert(id)
                    let key = plan.ownerKind + "/" + id
                    if best[key].map({ $0.score > score }) ?? true {
                        best[key] = Candidate(kind: plan.ownerKind, id: id, score: score, plan: plan, rowid: rowid)
                    }
                    if distinct.count >= limit { break }
                }
            }
            // Equal scores: the newer row first (ids are time-ordered), as within each index.
            let top = best.values.sorted { ($0.score, $1.id, $0.kind) < ($1.score, $0.id, $1.kind) }.prefix(limit)
            // Snippets: one pass per index over the rowid range of its hits (seeking each hit's
            // rowid separately costs more than reading the range on common words).
            var snippets: [String: String] = [:]
            for (index, hits) in Dictionary(grouping: top, by: \.plan.index) {
                let rowids = hits.map(\.rowid)
                let list = "[" + rowids.map(String.init).joined(separator: ",") + "]"
                try db.statement(hits[0].plan.snippet).forEach([.text(markers.0), .text(markers.1), match, .integer(rowids.min()!),
                                                                .integer(rowids.max()!), .text(list)]) { row in
                    snippets[index + "/" + String(row.int(0))] = row.text(1)
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

    /// The field shown as a row's title: `title`, else `name`, else the first text field.
    static func titleField(of entity: EntitySpec) -> String? {
        entity.field("title")?.name ?? entity.field("name")?.name
            ?? entity.scalarFields.first(where: { $0.type == .text })?.name
    }

    /// The SQL one index's part of a search runs, derived from the schema.
    struct SearchPlan: Sendable {
        let index: String
        let ownerKind: String
        /// `?1` match, `?2` window → (rowid, bm25 score) of the newest matches (`SearchRank.windowSQL`).
        let window: String
        /// The same for a one-phrase query → (rowid, score before the IDF) (`SearchRank.termWindowSQL`).
        let termWindow: String
        /// `?1` match, `?2` rowid → how many older rows match (`SearchRank.restCountSQL`).
        let restCount: String
        /// `?1` rowid → the id of the row the hit counts for.
        let owner: String
        /// `?1`/`?2` markers, `?3` match, `?4`…`?5` rowid range, `?6` JSON array of rowids → (rowid, snippet).
        let snippet: String
        /// `?1` owner id → title.
        let title: String?
    }

    static func searchPlans(_ projection: ProjectionSchema) -> [SearchPlan] {
        let q = ProjectionSchema.quoted
        return projection.searchIndexes.map { entity, index in
            let fts = q(index.index)
            let owner = projection.ownerEntity(of: index, in: entity) ?? entity
            return SearchPlan(
                index: index.index, ownerKind: owner.name,
                window: SearchRank.windowSQL(index), termWindow: SearchRank.termWindowSQL(index),
                restCount: SearchRank.restCountSQL(index),
                owner: "SELECT owner_id FROM \(q(projection.contentView(of: index, in: entity).name)) WHERE rid = ?1",
                // `+rowid`: the list filters the range scan instead of becoming one seek per rowid.
                snippet: "SELECT rowid, \(SearchSnippet.functionName)(\(fts), ?1, ?2, '…', 12) FROM \(fts) WHERE \(fts) MATCH ?3 AND rowid BETWEEN ?4 AND ?5 AND +rowid IN (SELECT value FROM json_each(?6))",
                title: titleField(of: owner).map { "SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1" })
        }
    }
}
