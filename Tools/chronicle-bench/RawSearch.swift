import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The search baseline: the statements `DeviceStore.search` runs
/// (Sources/ChronicleStore/Search/DeviceStore+Search.swift, `searchPlans`,
/// internal), rebuilt from the public schema types and run as raw prepared
/// statements in one read transaction: per index the start of its ranking
/// window and its best candidates, the best per owning row across indexes,
/// then a snippet and a title for each hit on the page.
///
/// Keep in step with `searchPlans` when the engine changes its queries.
final class RawSearch {
    struct Plan {
        let ownerKind: String
        let gated: Bool
        let window: OpaquePointer
        let candidates: OpaquePointer
        let snippet: OpaquePointer
        let title: OpaquePointer?
    }

    private let raw: RawDatabase
    private let plans: [Plan]
    private let premium: OpaquePointer
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
            var from = "\(fts) f JOIN "
            var conditions = ["f.\(fts) MATCH ?1", "f.rowid >= ?2"]
            if let setField = index.setField {
                from += "\(q(entity.setTable(entity.field(setField)!))) s ON s.rowid = f.rowid JOIN \(q(entity.table)) t ON t.id = s.id"
            } else {
                from += "\(q(entity.table)) t ON t.rowid = f.rowid"
            }
            if entity.hasSoftDelete { conditions.append("t.deleted_at IS NULL") }
            var owner = entity
            var ownerID = "t.id"
            if let ownerField = index.owner, let target = entity.field(ownerField)?.references, let ownerEntity = schema.entity(target) {
                owner = ownerEntity
                from += " JOIN \(q(ownerEntity.table)) o ON o.id = t.\(q(ownerField))"
                if ownerEntity.hasSoftDelete { conditions.append("o.deleted_at IS NULL") }
                ownerID = "o.id"
            }
            return Plan(
                ownerKind: owner.name, gated: index.requiresPremium,
                window: try raw.prepare("SELECT rowid FROM \(fts) WHERE \(fts) MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2"),
                candidates: try raw.prepare("SELECT f.rowid, f.rank, \(ownerID) FROM \(from) WHERE \(conditions.joined(separator: " AND ")) ORDER BY f.rank LIMIT ?3"),
                snippet: try raw.prepare("SELECT snippet(\(fts), -1, ?1, ?2, '…', 12) FROM \(fts) WHERE \(fts) MATCH ?3 AND rowid = ?4"),
                title: try titleField(of: owner).map { try raw.prepare("SELECT \(q($0)) FROM \(q(owner.table)) WHERE id = ?1") })
        }
        premium = try raw.prepare("SELECT \(projection.premiumCondition)")
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
        let isPremium = try raw.scalarInt(premium) == 1
        var best: [String: Candidate] = [:]
        for (number, plan) in plans.enumerated() where !plan.gated || isPremium {
            let floor = try raw.scalarInt(plan.window, [.text(match), .integer(Int64(DeviceStore.searchRankWindow - 1))]) ?? Int64.min
            try raw.bind(plan.candidates, [.text(match), .integer(floor), .integer(perIndex)])
            defer { sqlite3_reset(plan.candidates) }
            while true {
                let rc = sqlite3_step(plan.candidates)
                if rc == SQLITE_DONE { break }
                guard rc == SQLITE_ROW else { throw BenchError("candidates query failed (\(rc)): \(raw.errorMessage)") }
                let id = String(cString: sqlite3_column_text(plan.candidates, 2))
                let candidate = Candidate(kind: plan.ownerKind, id: id, score: sqlite3_column_double(plan.candidates, 1),
                                          plan: number, rowid: sqlite3_column_int64(plan.candidates, 0))
                let key = candidate.kind + "/" + id
                if let known = best[key], known.score <= candidate.score { continue }
                best[key] = candidate
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
