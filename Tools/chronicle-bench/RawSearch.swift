import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The search baseline: the statements `DeviceStore.search` runs
/// (Sources/ChronicleStore/Search/DeviceStore+Search.swift, `searchPlans`,
/// internal), rebuilt from the public schema types and run as raw prepared
/// statements in one read transaction: per index the start of its ranking
/// window, its best candidates from the FTS5 table alone (no join: the index
/// holds only findable rows, see `ProjectionSchema.contentView`), then the
/// owner of each candidate from the index's content view; the best per owning
/// row across indexes; then a snippet and a title for each hit on the page.
///
/// Keep in step with `searchPlans` when the engine changes its queries.
final class RawSearch {
    struct Plan {
        let ownerKind: String
        let window: OpaquePointer
        let candidates: OpaquePointer
        let owner: OpaquePointer
        let snippet: OpaquePointer
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
            let fts = q(index.index)
            let owner = projection.ownerEntity(of: index, in: entity) ?? entity
            return Plan(
                ownerKind: owner.name,
                window: try raw.prepare("SELECT rowid FROM \(fts) WHERE \(fts) MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2"),
                candidates: try raw.prepare("SELECT rowid, rank FROM \(fts) WHERE \(fts) MATCH ?1 AND rowid >= ?2 ORDER BY rank LIMIT ?3"),
                owner: try raw.prepare("SELECT owner_id FROM \(q(projection.contentView(of: index, in: entity).name)) WHERE rid = ?1"),
                snippet: try raw.prepare("SELECT snippet(\(fts), -1, ?1, ?2, '…', 12) FROM \(fts) WHERE \(fts) MATCH ?3 AND rowid = ?4"),
                title: try titleField(of: owner).map { try raw.prepare("SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1") })
        }
        begin = try raw.prepare("BEGIN DEFERRED")
        rollback = try raw.prepare("ROLLBACK")
    }

    private struct Candidate {
        var kind: String
        var id: String
        var score: Double
        var plan: Int
        var rowid: Int64
    }

    /// Hits as `kind/owner` with their snippets, best first.
    func search(_ match: String, limit: Int, markers: (String, String) = ("[", "]")) throws -> (hits: [String], snippets: [String]) {
        let perIndex = Int64(min(max(limit * 3, 30), 3_000))
        try raw.run(begin, [])
        defer { sqlite3_step(rollback); sqlite3_reset(rollback) }
        var best: [String: Candidate] = [:]
        var ranked: [(rowid: Int64, score: Double)] = []
        for (number, plan) in plans.enumerated() {
            let floor = try raw.scalarInt(plan.window, [.text(match), .integer(Int64(DeviceStore.searchRankWindow - 1))]) ?? Int64.min
            // All candidates first, then their owners, as the engine does.
            ranked.removeAll(keepingCapacity: true)
            try raw.bind(plan.candidates, [.text(match), .integer(floor), .integer(perIndex)])
            while true {
                let rc = sqlite3_step(plan.candidates)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { sqlite3_reset(plan.candidates); throw BenchError("candidates query failed (\(rc)): \(raw.errorMessage)") }
                ranked.append((sqlite3_column_int64(plan.candidates, 0), sqlite3_column_double(plan.candidates, 1)))
            }
            sqlite3_reset(plan.candidates)
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
                let key = plan.ownerKind + "/" + id
                if let known = best[key], known.score <= score { continue }
                best[key] = Candidate(kind: plan.ownerKind, id: id, score: score, plan: number, rowid: rowid)
            }
        }
        let top = best.values.sorted { ($0.score, $0.kind, $0.id) < ($1.score, $1.kind, $1.id) }.prefix(limit)
        var hits: [String] = [], snippets: [String] = []
        for candidate in top {
            let plan = plans[candidate.plan]
            try raw.bind(plan.snippet, [.text(markers.0), .text(markers.1), .text(match), .integer(candidate.rowid)])
            snippets.append(sqlite3_step(plan.snippet) == SQLITE_ROW ? sqlite3_column_text(plan.snippet, 0).map { String(cString: $0) } ?? "" : "")
            sqlite3_reset(plan.snippet)
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
