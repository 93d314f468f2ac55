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
    /// `searchRankWindow` matches; snippets are made for the final hits only.
    public func search(_ text: String, limit: Int = 20, markers: (String, String) = ("[", "]")) throws -> [SearchHit] {
        let query = SearchQuery(text)
        guard !query.isEmpty, limit > 0 else { return [] }
        let match = Value.text(query.match)
        let perIndex = Int64(min(max(limit * 3, 30), 3_000))
        return try read { db in
            struct Candidate { var kind: String; var id: String; var score: Double; var plan: SearchPlan; var rowid: Int64 }
            var best: [String: Candidate] = [:]
            for plan in searchPlans {
                let floor = try db.scalarInt(plan.window, [match, .integer(Int64(Self.searchRankWindow - 1))]) ?? Int64.min
                let ranked = try db.query(plan.candidates, [match, .integer(floor), .integer(perIndex)]) { ($0.int(0), $0.double(1)) }
                let owners = try db.statement(plan.owner)
                for (rowid, score) in ranked {
                    // The index holds only live rows (see `ProjectionSchema.contentView`), so no hit needs filtering.
                    guard let id = try owners.map([.integer(rowid)], { $0.text(0) }).first else { continue }
                    let key = plan.ownerKind + "/" + id
                    if let known = best[key], known.score <= score { continue }
                    best[key] = Candidate(kind: plan.ownerKind, id: id, score: score, plan: plan, rowid: rowid)
                }
            }
            let top = best.values.sorted { ($0.score, $0.kind, $0.id) < ($1.score, $1.kind, $1.id) }.prefix(limit)
            return try top.map { candidate in
                let snippet = try db.query(candidate.plan.snippet, [.text(markers.0), .text(markers.1), match, .integer(candidate.rowid)]) { $0.text(0) }.first ?? ""
                let title = try candidate.plan.title.flatMap { try db.scalarText($0, [.text(candidate.id)]) }
                return SearchHit(kind: candidate.kind, id: candidate.id, title: title, snippet: snippet,
                                 score: candidate.score, matchedIn: candidate.plan.index)
            }
        }
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
        /// `?1` match, `?2` offset → the rowid where the ranking window starts.
        let window: String
        /// `?1` match, `?2` lowest rowid, `?3` limit → (rowid, rank), best first.
        let candidates: String
        /// `?1` rowid → the id of the row the hit counts for.
        let owner: String
        /// `?1`/`?2` markers, `?3` match, `?4` rowid → snippet.
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
                window: "SELECT rowid FROM \(fts) WHERE \(fts) MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
                candidates: "SELECT rowid, rank FROM \(fts) WHERE \(fts) MATCH ?1 AND rowid >= ?2 ORDER BY rank LIMIT ?3",
                owner: "SELECT owner_id FROM \(q(projection.contentView(of: index, in: entity).name)) WHERE rid = ?1",
                snippet: "SELECT snippet(\(fts), -1, ?1, ?2, '…', 12) FROM \(fts) WHERE \(fts) MATCH ?3 AND rowid = ?4",
                title: titleField(of: owner).map { "SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1" })
        }
    }
}
