import ChronicleCore
import Foundation

/// A `mergeOrAsk` conflict: a concurrent edit won by server order, and the value
/// it replaced is kept here until someone chooses (`Schemas/schema-format.md`, the `mergeOrAsk` rule).
public struct ConflictRecord: Sendable, Equatable {
    /// The winning op; with `field`, the conflict's identity.
    public var opID: UUID
    public var field: String
    public var entity: String
    public var entityID: UUID
    /// The value that won (what the row shows).
    public var kept: Value
    /// The value it replaced.
    public var replaced: Value
    public var replacedSeq: Int64?
    public var replacedDevice: String?
    public var winningSeq: Int64
    public var winningDevice: String
    /// The seq of the sequential edit that settled it, if any.
    public var resolvedSeq: Int64?
}

extension DeviceStore {
    /// Conflict records, newest first; unresolved only unless `includeResolved`.
    public func conflicts(includeResolved: Bool = false) throws -> [ConflictRecord] {
        guard projection.hasConflicts else { return [] }
        return try read { db in
            let filter = includeResolved ? "" : " WHERE resolved_seq IS NULL"
            return try db.query("""
                SELECT op_id, field, entity, entity_id, kept, replaced, replaced_seq, replaced_device, winning_seq, winning_device, resolved_seq
                FROM \(ProjectionSchema.quoted(ProjectionSchema.conflictsTable))\(filter) ORDER BY winning_seq DESC, field
                """) { row in
                ConflictRecord(opID: try LogTables.uuid(row.text(0)), field: row.text(1), entity: row.text(2), entityID: try LogTables.uuid(row.text(3)),
                               kept: row.value(4), replaced: row.value(5), replacedSeq: row.optionalInt(6), replacedDevice: row.optionalText(7),
                               winningSeq: row.int(8), winningDevice: row.text(9), resolvedSeq: row.optionalInt(10))
            }
        }
    }

    /// Settles a conflict by writing `value` to the field as an ordinary, sequential
    /// edit (its baseSeq is past the conflict); once the server orders it, the record
    /// is marked resolved on every device.
    @discardableResult
    public func resolve(_ conflict: ConflictRecord, with value: Value) throws -> Op {
        guard let spec = schema.ops.first(where: { $0.entity == conflict.entity && $0.action == .set && $0.fields.contains(conflict.field) }) else {
            throw ChronicleError(.unknownOpType, "Schema \(schema.name) has no op that sets \(conflict.entity).\(conflict.field).")
        }
        guard try cursor() >= conflict.winningSeq else {
            throw ChronicleError(.invariantViolated, "This store has not applied seq \(conflict.winningSeq) yet; sync before resolving.")
        }
        return try write(spec.type, entity: conflict.entityID, payload: [conflict.field: value])
    }
}
