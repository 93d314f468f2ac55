import ChronicleCore
import ChronicleStore
import Foundation

extension ServerLibrary {
    /// The count of pushes committed so far. A device may send its next batch before the one
    /// ahead of it is answered (two pushes in flight), so a batch can arrive first and be
    /// refused for the gap it would leave: its caller can wait for this count to move
    /// (`waitForPush`), while the batch ahead commits, and try it again.
    public var pushGeneration: UInt64 { pushes.generation }

    /// Blocks until a push commits after `generation` or the time is up.
    public func waitForPush(after generation: UInt64, nanoseconds: UInt64) {
        pushes.wait(after: generation, nanoseconds: nanoseconds)
    }

    /// Orders a device's batch: each op is answered accepted (with its new serverSeq),
    /// duplicate (the original answer for an op id already seen) or rejected (code and
    /// message, kept so a repeat gets the same answer; the op never enters the log).
    ///
    /// One transaction. The batch must be in `deviceSeq` order and continue the
    /// device's sequence: ops the server has already answered may be repeated, and the
    /// first new op must carry the next `deviceSeq`. Anything else is a request-level
    /// refusal (`ProtocolError`) and nothing is written.
    ///
    /// A library that follows an upstream (`follow`) is ordered there: the batch is answered here,
    /// inside the upstream's lock, and committed there first.
    public func push(_ ops: [Op], from device: UUID) throws(ProtocolError) -> PushResponse {
        guard let upstream else { return try pushHere(ops, from: device, collecting: false) { _ in nil } }
        do {
            return try upstream.order(self) { commit in _ = try pushHere(ops, from: device, collecting: true, beforeCommit: commit) }.response
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not write the batch", library: libraryID, error)
        }
    }

    /// The push in this file. `beforeCommit` (an upstream's `order`): called with what the batch
    /// wrote (gathered only when `collecting`: a lone server's pushes skip it), inside its
    /// transaction and before it commits; it returns the upstream generation to record with the
    /// batch (nil records none), and if it throws, nothing here is written either.
    private func pushHere(_ ops: [Op], from device: UUID, collecting: Bool,
                          beforeCommit: (PushWrites) throws -> Int64?) throws(ProtocolError) -> PushResponse {
        do {
            let (response, tailAfter) = try writer.withLock { db in
                try db.transaction { db in
                    var (response, tailAfter, writes) = try push(ops, from: device, collecting: collecting, in: db)
                    writes.response = response
                    if let generation = try beforeCommit(writes) {
                        try LogTables.setMeta(Self.replicaGenerationKey, .integer(generation), in: db)
                    }
                    return (response, tailAfter)
                }
            }
            tail.withLock { if tailAfter.seq > $0.seq { $0 = tailAfter } }
            pushes.advance()
            return response
        } catch let error as ProtocolError {
            throw error
        } catch let error as SQLiteError where error.isDiskFull {
            throw ProtocolError(507, .serverDiskFull, "The server's disk is full; nothing was written. Try again later.", retryAfterSeconds: 30)
        } catch {
            throw ProtocolError.serverStore("The server could not write the batch", library: libraryID, error)
        }
    }

    /// Answers and writes a device's batch inside `db`'s transaction (`PushBatch`).
    private func push(_ ops: [Op], from device: UUID, collecting: Bool, in db: Database) throws -> (PushResponse, (seq: Int64, time: Int64), PushWrites) {
        try checkEnvelopes(ops, from: device)
        var batch = try PushBatch(self, ops, device: device, collecting: collecting, in: db)
        for (op, key) in zip(ops, batch.keys) {
            if try batch.answerRepeat(op, key) { continue }
            try batch.checkNext(op)
            try batch.order(op, key)
        }
        try batch.recordDevice()
        return (PushResponse(results: batch.results, head: batch.seq), (batch.seq, batch.time), batch.writes)
    }

    /// What a batch must be before anything is answered: this library's ops, written by the
    /// token's device, not ordered yet, in deviceSeq order.
    private func checkEnvelopes(_ ops: [Op], from device: UUID) throws {
        var previous: Int64 = 0
        for op in ops {
            guard op.libraryID == libraryID else {
                throw ProtocolError(403, .wrongLibrary, "Op \(op.opID.lowercased) belongs to library \(op.libraryID.lowercased), not \(libraryID.lowercased).")
            }
            guard op.deviceID == device else {
                throw ProtocolError(403, .wrongDevice, "Op \(op.opID.lowercased) was written by device \(op.deviceID.lowercased); this token belongs to \(device.lowercased).")
            }
            guard op.serverSeq == nil, op.serverTime == nil else {
                throw ProtocolError(400, .alreadyConfirmed, "Op \(op.opID.lowercased) carries a server sequence; only the server assigns one.")
            }
            guard op.deviceSeq > previous else {
                throw ProtocolError(400, .outOfOrder, "Ops must be pushed in deviceSeq order; \(op.deviceSeq) follows \(previous).")
            }
            previous = op.deviceSeq
        }
    }

    /// The seq the next op follows (the hot log's last, or the sealed end past it) and the server
    /// time it may not be earlier than (the last op's, or the tail's: server times never go back).
    func logEnd(in db: Database) throws -> (seq: Int64, time: Int64) {
        let last = try db.query("SELECT server_seq, server_time FROM chronicle_log ORDER BY server_seq DESC LIMIT 1") { ($0.int(0), $0.int(1)) }.first ?? (0, 0)
        return (max(last.0, try LogTables.sealedUpTo(in: db)), max(last.1, tail.withLock { $0.time }))
    }

    static func insertRejected(_ row: RejectedOp, in db: Database) throws {
        try db.execute("""
            INSERT INTO chronicle_rejected_ops(op_id, device_id, device_seq, type, entity_id, code, message, rejected_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """, [.text(row.opID), .text(row.deviceID), .integer(row.deviceSeq), .text(row.type), .text(row.entityID),
                  .text(row.code), .text(row.message), .integer(row.rejectedAt)])
    }

    func gap(_ device: String, expected: Int64, actual: Int64) -> ProtocolError {
        var error = ProtocolError(409, ProtocolError.Code.deviceSeqGap, "Device \(device) must push deviceSeq \(expected) next, but sent \(actual) (expected \(expected), actual \(actual)); ops in between are missing.")
        // A device that holds its op at `expected` as confirmed learns that this server lost it.
        error.lastDeviceSeq = expected - 1
        return error
    }

    /// What only the server's projection can say about an op: does its row exist
    /// (a create must be new, anything else must name an existing row), and do the
    /// ids in its payload name rows that exist. Edits to a deleted row are kept:
    /// nothing a person did is thrown away because another device deleted the row.
    func checkTarget(_ spec: OpTypeSpec, _ id: UUID, _ payload: Payload, _ checks: inout TargetChecks, in db: Database) throws {
        guard let entity = schema.entity(spec.entity) else { return }
        let exists = try checks.exists(id.lowercased, in: entity.table, db)
        switch spec.action {
        case .create:
            if exists { throw ChronicleError(.entityExists, "A \(entity.name) with id \(id.lowercased) already exists.") }
        case .upsert:
            break
        default:
            if !exists { throw ChronicleError(.unknownEntity, "No \(entity.name) with id \(id.lowercased) on the server.") }
        }
        let references = schema.references(of: spec, payload: payload)
        for (field, target) in references {
            guard let other = schema.entity(field.references!) else { continue }
            if try !checks.exists(target, in: other.table, db) {
                throw ChronicleError(.unknownEntity, "'\(entity.name).\(field.name)' names \(other.name) \(target), which does not exist on the server.")
            }
        }
    }
}

extension ServerLibrary {
    /// Appends an op the server itself authors (the plan tier, parsed article text):
    /// device id all zeros, validated as server-authored, so it may set server-only fields.
    /// Devices receive it with their next pull like any other op.
    @discardableResult
    public func appendServerOp(_ type: String, entity: UUID, payload: Payload) throws -> Op {
        guard let current = schema.currentOpType(type) else {
            throw ChronicleError(.unknownOpType, "Unknown op type '\(type)' in schema \(schema.name).")
        }
        let (_, normalized) = try schema.validate(type: type, version: current.version, payload: payload, serverAuthored: true)
        guard let upstream else {
            return try appendServerOpHere(type, version: current.version, entity: entity, payload: normalized) { _ in nil }
        }
        let writes = try upstream.order(self) { commit in
            _ = try appendServerOpHere(type, version: current.version, entity: entity, payload: normalized, beforeCommit: commit)
        }
        guard let op = writes.accepted.first else {
            throw ChronicleError(.invariantViolated, "The server's op on library \(libraryID.lowercased) was not written.")
        }
        return op
    }

    private func appendServerOpHere(_ type: String, version: Int, entity: UUID, payload normalized: Payload,
                                    beforeCommit: (PushWrites) throws -> Int64?) throws -> Op {
        let op = try writer.withLock { db in
            try db.transaction { db -> Op in
                let last = try logEnd(in: db)
                let deviceSeq = (try db.scalarInt("SELECT last_device_seq FROM chronicle_devices WHERE device_id = ?1",
                                                  [.text(Op.serverDeviceID.lowercased)]) ?? 0) + 1
                let now = max(clock.nowMilliseconds(), last.1)
                let op = Op(opID: ids.makeUUID(), libraryID: libraryID, deviceID: Op.serverDeviceID, deviceSeq: deviceSeq, type: type,
                            version: version, entityID: entity, payload: normalized, deviceTime: now, baseSeq: last.0,
                            serverSeq: last.0 + 1, serverTime: now)
                try db.execute("INSERT INTO chronicle_log(\(LogTables.logColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                               LogTables.logArguments(op))
                try ProjectionApplier(materializer, in: db).apply(op)
                try db.execute("""
                    INSERT INTO chronicle_devices(device_id, last_device_seq) VALUES (?1, ?2)
                    ON CONFLICT(device_id) DO UPDATE SET last_device_seq = excluded.last_device_seq
                    """, [.text(Op.serverDeviceID.lowercased), .integer(deviceSeq)])
                var writes = PushWrites()
                writes.accepted = [op]
                writes.device = (Op.serverDeviceID.lowercased, deviceSeq)
                writes.response = PushResponse(results: [PushResult(opID: op.opID, deviceSeq: deviceSeq, outcome: .accepted(serverSeq: op.serverSeq!))],
                                               head: op.serverSeq!)
                if let generation = try beforeCommit(writes) {
                    try LogTables.setMeta(Self.replicaGenerationKey, .integer(generation), in: db)
                }
                return op
            }
        }
        tail.withLock { if op.serverSeq! > $0.seq { $0 = (op.serverSeq!, op.serverTime!) } }
        pushes.advance()
        return op
    }

    /// Sets the library's plan tier (`free` or `premium`) with a server-authored op.
    @discardableResult
    public func setPlan(_ plan: String) throws -> Op {
        guard let spec = schema.plan,
              let type = schema.ops.first(where: { $0.entity == spec.entity && $0.fields.contains(spec.field) && ($0.action == .upsert || $0.action == .set) }) else {
            throw ChronicleError(.invalidValue, "Schema \(schema.name) has no plan tier.")
        }
        return try appendServerOp(type.type, entity: libraryID, payload: [spec.field: .text(plan)])
    }
}

extension ServerLibrary {
    /// Appends already-ordered ops exactly as given (their seqs must continue the log):
    /// for moving a library's history between servers, and for tests that start a server
    /// from a device fixture's confirmed log. Each device's sequence is recorded too.
    public func importConfirmed(_ ops: [Op]) throws {
        try writeTransaction { db in
            let insert = try db.statement("INSERT INTO chronicle_log(\(LogTables.logColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")
            let applier = ProjectionApplier(materializer, in: db)
            for op in ops {
                guard op.libraryID == libraryID, op.serverSeq != nil, op.serverTime != nil else {
                    throw ChronicleError(.invariantViolated, "Op \(op.opID.lowercased) is not a confirmed op of library \(libraryID.lowercased).")
                }
                try insert.execute(LogTables.logArguments(op))
                try applier.apply(op)
                try Self.recordDeviceSeq(op.deviceID.lowercased, op.deviceSeq, in: db)
            }
        }
        if let last = ops.last { tail.withLock { $0 = (last.serverSeq!, max($0.time, last.serverTime!)) } }
    }
}

/// One push's statements that ask whether a projection row exists, by table.
struct TargetChecks {
    private var statements: [String: Statement] = [:]

    mutating func exists(_ id: String, in table: String, _ db: Database) throws -> Bool {
        let statement: Statement
        if let known = statements[table] {
            statement = known
        } else {
            statement = try db.statement("SELECT 1 FROM \(ProjectionSchema.quoted(table)) WHERE id = ?1")
            statements[table] = statement
        }
        return try !statement.map([.text(id)], { _ in true }).isEmpty
    }
}

/// A counter of committed pushes that threads can wait on.
final class PushSignal: @unchecked Sendable {
    private let condition = NSCondition()
    private var count: UInt64 = 0

    var generation: UInt64 {
        condition.lock(); defer { condition.unlock() }
        return count
    }

    func advance() {
        condition.lock()
        count &+= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once the count has moved past `generation`, or after `nanoseconds`.
    func wait(after generation: UInt64, nanoseconds: UInt64) {
        let deadline = Date(timeIntervalSinceNow: Double(nanoseconds) / 1e9)
        condition.lock()
        while count == generation, condition.wait(until: deadline) {}
        condition.unlock()
    }
}
