import ChronicleCore
import ChronicleStore
import Foundation

/// Rows a server extension has still to fill in (`ChronicleServer.ServerExtension`).
extension ServerLibrary {
    /// Up to `limit` live rows of `entity` whose `field` is still NULL, with their `urlField`: the
    /// work a server extension left undone, e.g. the saved pages the article fetcher
    /// (`ChronicleArticles.ArticleFetcher`) has not read yet. Empty where the schema has no such
    /// entity or fields.
    public func rowsAwaiting(entity: String, field: String, urlField: String, limit: Int) throws -> [(id: UUID, url: String)] {
        guard let spec = schema.entities.first(where: { $0.name == entity }),
              spec.fields.contains(where: { $0.name == field }), spec.fields.contains(where: { $0.name == urlField }) else { return [] }
        try catchUp()
        let deleted = spec.hasSoftDelete ? " AND deleted_at IS NULL" : ""
        return try read { db in
            try db.query("""
                SELECT id, \(ProjectionSchema.quoted(urlField)) FROM \(ProjectionSchema.quoted(spec.table))
                WHERE \(ProjectionSchema.quoted(field)) IS NULL AND \(ProjectionSchema.quoted(urlField)) IS NOT NULL\(deleted) LIMIT ?1
                """, [.integer(Int64(limit))]) { row in (UUID(text: row.text(0)), row.text(1)) }
                .compactMap { id, url in id.map { ($0, url) } }
        }
    }
}
