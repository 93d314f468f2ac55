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
    /// bm25 score of the best match; lower is better.
    public var score: Double
    /// Which index the best match came from, e.g. `article_fts`, `highlight_fts`.
    public var matchedIn: String
}

extension DeviceStore {
    /// Full-text search over every FTS5 index of the schema, ranked by bm25.
    ///
    /// Any string is a valid query (see `SearchQuery`): quotes, operators,
    /// unbalanced parentheses and emoji never raise an error. Hits in a
    /// highlight or note count for the article they belong to. Deleted rows
    /// are left out.
    public func search(_ text: String, limit: Int = 20, markers: (String, String) = ("[", "]")) throws -> [SearchHit] {
        let query = SearchQuery(text)
        guard !query.isEmpty, limit > 0 else { return [] }
        let sql = searchSQL(markers: markers)
        return try read { db in
            try db.query(sql, [.text(query.match), .integer(Int64(min(limit, 1000)))]) { row in
                SearchHit(kind: row.text(0), id: row.text(1), title: row.optionalText(5), snippet: row.text(4),
                          score: row.double(2), matchedIn: row.text(3))
            }
        }
    }

    /// The field shown as a row's title: `title`, else `name`, else the first text field.
    func titleField(of entity: EntitySpec) -> String? {
        entity.field("title")?.name ?? entity.field("name")?.name
            ?? entity.scalarFields.first(where: { $0.type == .text })?.name
    }

    private func searchSQL(markers: (String, String)) -> String {
        func literal(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "''") + "'" }
        let q = ProjectionSchema.quoted
        var parts: [String] = []
        for (entity, index) in projection.searchIndexes {
            let fts = q(index.index)
            let weights = index.weights.map { CanonicalJSON.format($0) }.joined(separator: ", ")
            let snippet = "snippet(\(fts), -1, \(literal(markers.0)), \(literal(markers.1)), '…', 12)"
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
                \(literal(index.index)) AS source, \(snippet) AS snip, \(title) AS title FROM \(from) WHERE \(conditions.joined(separator: " AND "))
                """)
        }
        // SQLite returns the other columns from the row that holds min(score).
        return """
            SELECT kind, owner, min(score) AS best, source, snip, title FROM (
            \(parts.joined(separator: "\nUNION ALL\n"))
            ) GROUP BY kind, owner ORDER BY best, owner LIMIT ?2
            """
    }
}
