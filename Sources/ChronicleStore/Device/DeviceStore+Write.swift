import ChronicleCore
import Foundation

extension DeviceStore {
    /// Writes one local op: validate, append to the outbox, apply to the
    /// projection (FTS5 kept by triggers), commit — one durable transaction,
    /// visible before any network exists.
    ///
    /// - Parameters:
    ///   - type: an op type of the store's schema, e.g. `"article.tag"`.
    ///   - entity: the row to act on; omit it for a create to get a fresh id.
    ///   - payload: the op's fields.
    /// - Returns: the queued op, with its entity id and device sequence.
    @discardableResult
    public func write(_ type: String, entity: UUID? = nil, payload: Payload = [:]) throws -> Op {
        guard let current = schema.currentOpType(type) else {
            throw ChronicleError(.unknownOpType, "Unknown op type '\(type)' in schema \(schema.name).")
        }
        let (spec, normalized) = try schema.validate(type: type, version: current.version, payload: payload, serverAuthored: false)
        let entitySpec = schema.entity(spec.entity)!
        let isCreate = spec.action == .create
        if !isCreate && entity == nil {
            throw ChronicleError(.unknownEntity, "'\(type)' needs the id of the \(entitySpec.name) to change.")
        }
        let entityID = entity ?? ids.makeUUID()
        let opID = ids.makeUUID()
        let now = clock.nowMilliseconds()
        return try writeTransaction { db in
            try checkTarget(spec, entitySpec, entityID, normalized, in: db)
            let deviceSeq = (try LogTables.meta("last_device_seq", in: db).integerValue ?? 0) + 1
            let cursor = try LogTables.meta("cursor", in: db).integerValue ?? 0
            let op = Op(opID: opID, libraryID: libraryID, deviceID: deviceID, deviceSeq: deviceSeq, type: type,
                        version: spec.version, entityID: entityID, payload: normalized, deviceTime: now, baseSeq: cursor)
            try db.execute("""
                INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """, [.integer(deviceSeq), .text(opID.lowercased), .text(type), .integer(Int64(spec.version)),
                      .text(entityID.lowercased), .text(CanonicalJSON.encode(normalized)), .integer(now), .integer(cursor)])
            try shadowIfNeeded(entitySpec, entityID.lowercased, in: db)
            let applier = applier(in: db, indexing: try prepareSearchIndexing(in: db))
            try applier.apply(op)
            try applier.finish()
            return op
        }
    }

    /// What only the store can check: does the row exist, is it deleted, do
    /// the ids the payload names point at live rows.
    private func checkTarget(_ spec: OpTypeSpec, _ entity: EntitySpec, _ id: UUID, _ payload: Payload, in db: Database) throws {
        let table = ProjectionSchema.quoted(entity.table)
        let deletedColumn = entity.hasSoftDelete ? "deleted_at" : "NULL"
        let row = try db.query("SELECT \(deletedColumn) FROM \(table) WHERE id = ?1", [.text(id.lowercased)]) { $0.optionalInt(0) }
        let exists = !row.isEmpty
        let deleted = row.first.flatMap { $0 } != nil
        switch spec.action {
        case .create:
            if exists { throw ChronicleError(.entityExists, "A \(entity.name) with id \(id.lowercased) already exists.") }
        case .upsert:
            break
        case .restore:
            if !exists { throw ChronicleError(.unknownEntity, "No \(entity.name) with id \(id.lowercased).") }
            if !deleted { throw ChronicleError(.invalidValue, "The \(entity.name) \(id.lowercased) is not deleted, so there is nothing to restore.") }
        default:
            if !exists { throw ChronicleError(.unknownEntity, "No \(entity.name) with id \(id.lowercased).") }
            if deleted {
                throw ChronicleError(.entityDeleted, "The \(entity.name) \(id.lowercased) is deleted; restore it first.")
            }
        }
        // Ids in the payload must name live rows of the referenced type.
        let references = schema.references(of: spec, payload: payload)
        for (field, target) in references {
            let other = schema.entity(field.references!)!
            let otherDeleted = other.hasSoftDelete ? "deleted_at" : "NULL"
            let found = try db.query("SELECT \(otherDeleted) FROM \(ProjectionSchema.quoted(other.table)) WHERE id = ?1", [.text(target)]) { $0.optionalInt(0) }
            if found.isEmpty { throw ChronicleError(.unknownEntity, "'\(entity.name).\(field.name)' names \(other.name) \(target), which does not exist.") }
            if found[0] != nil && spec.action != .remove {
                throw ChronicleError(.entityDeleted, "'\(entity.name).\(field.name)' names \(other.name) \(target), which is deleted.")
            }
        }
    }
}
