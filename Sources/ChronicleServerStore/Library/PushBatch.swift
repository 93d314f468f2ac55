import ChronicleCore
import ChronicleStore
import Foundation

/// One device's batch being answered inside the push's transaction (`ServerLibrary.push`):
/// what the server already knows of the batch's op ids, the device's sequence, the log's head,
/// and the answers so far. Each op is a repeat (answered as before), or the device's next op,
/// which is checked and then accepted into the log or refused.
struct PushBatch {
    private let library: ServerLibrary
    private let db: Database
    private let deviceKey: String
    private let collecting: Bool
    /// The batch's op ids, lowercased, in its order.
    let keys: [String]
    /// The device's last answered deviceSeq before this batch, and as the batch moves it.
    private let lastAnswered: Int64
    private var last: Int64
    /// The log's head and its time as the batch moves them.
    private(set) var seq: Int64
    private(set) var time: Int64
    /// Op ids the log holds, with their seq and device; kept up to date as ops are accepted.
    private var known: [String: (seq: Int64, device: String)] = [:]
    /// Op ids refused before, with the answer and the device; kept up to date as ops are refused.
    private var refused: [String: (code: String, message: String, device: String)] = [:]
    private let insert: Statement
    /// Applies accepted ops to the library's projection (the server keeps no search indexes).
    private let applier: ProjectionApplier
    private var targets = TargetChecks()
    private(set) var results: [PushResult] = []
    private(set) var writes = ServerLibrary.PushWrites()

    init(_ library: ServerLibrary, _ ops: [Op], device: UUID, collecting: Bool, in db: Database) throws {
        self.library = library
        self.db = db
        self.collecting = collecting
        deviceKey = device.lowercased
        keys = ops.map { $0.opID.lowercased }
        last = try db.scalarInt("SELECT last_device_seq FROM chronicle_devices WHERE device_id = ?1", [.text(deviceKey)]) ?? 0
        lastAnswered = last
        (seq, time) = try library.logEnd(in: db)
        insert = try db.statement("INSERT INTO chronicle_log(\(LogTables.logColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")
        applier = ProjectionApplier(library.materializer, in: db)
        results.reserveCapacity(ops.count)
        try loadAnswers()
    }

    /// What the server already knows of the batch's op ids, in one query each instead of two per op.
    private mutating func loadAnswers() throws {
        let idList = Value.text("[" + keys.map { "\"\($0)\"" }.joined(separator: ",") + "]")
        var known: [String: (seq: Int64, device: String)] = [:]
        _ = try db.query("""
            SELECT op_id, server_seq, device_id FROM chronicle_log WHERE op_id IN (SELECT value FROM json_each(?1))
            UNION ALL SELECT op_id, server_seq, device_id FROM chronicle_sealed_ops WHERE op_id IN (SELECT value FROM json_each(?1))
            """, [idList]) { row in if known[row.text(0)] == nil { known[row.text(0)] = (row.int(1), row.text(2)) } }
        var refused: [String: (code: String, message: String, device: String)] = [:]
        _ = try db.query("SELECT op_id, code, message, device_id FROM chronicle_rejected_ops WHERE op_id IN (SELECT value FROM json_each(?1))",
                         [idList]) { row in refused[row.text(0)] = (row.text(1), row.text(2), row.text(3)) }
        self.known = known
        self.refused = refused
    }

    /// Answers an op whose id the server has seen (ordered or refused) as it was answered before;
    /// false for an id it has not seen.
    mutating func answerRepeat(_ op: Op, _ key: String) throws -> Bool {
        if let logged = known[key] {
            if logged.device == deviceKey {
                results.append(PushResult(opID: op.opID, deviceSeq: op.deviceSeq, outcome: .duplicate(serverSeq: logged.seq)))
                if op.deviceSeq == last + 1 { last = op.deviceSeq }   // a repeat under a new number: see below
            } else {
                // Answered (refused) like any new op: the device's sequence moves past it, so the
                // ops behind it can follow.
                try refuseClashingID(op, key)
            }
            return true
        }
        guard let answer = refused[key] else { return false }
        if answer.device == deviceKey {
            results.append(PushResult(opID: op.opID, deviceSeq: op.deviceSeq, outcome: .rejected(code: answer.code, message: answer.message),
                                      verdict: try library.verdict(op.entityID, in: db)))
            // A repeat under the next number: the server took this op under an earlier one (it
            // holds nothing of this device's after `last`), so the device's store is a copy from
            // before its queue was numbered again (restored from a backup), which numbered its
            // ops after this one. The repeat takes the number, as a refusal of a clashing id
            // does, so that they can follow.
            if op.deviceSeq == last + 1 { last = op.deviceSeq }
        } else {
            // Another device's refused op had this id: refuse this one too, and move past it.
            try refuseClashingID(op, key)
        }
        return true
    }

    /// An op whose id another device's op holds (ordered or refused): refused, and the device's
    /// sequence moves past it.
    private mutating func refuseClashingID(_ op: Op, _ key: String) throws {
        if op.deviceSeq > last + 1 {
            throw library.gap(deviceKey, expected: last + 1, actual: op.deviceSeq)
        }
        results.append(PushResult(opID: op.opID, deviceSeq: op.deviceSeq,
                                  outcome: .rejected(code: ProtocolError.Code.opIdConflict.rawValue, message: "Op id \(key) already belongs to another device's op.")))
        last = max(last, op.deviceSeq)
    }

    /// A new op must carry the device's next deviceSeq, one the server has not answered.
    func checkNext(_ op: Op) throws {
        if op.deviceSeq > last + 1 {
            throw library.gap(deviceKey, expected: last + 1, actual: op.deviceSeq)
        }
        if op.deviceSeq <= lastAnswered {
            // A new op under a deviceSeq the server already answered: the device's store is an
            // older copy of one that went on syncing. Refused whole, so that the device numbers
            // its unsent ops after the server's and sends them again: none is lost.
            throw ProtocolError.deviceSeqReused(device: deviceKey, reused: op.deviceSeq, last: lastAnswered)
        }
    }

    /// Checks a new op and accepts it into the log and the projection, or refuses it (the
    /// refusal kept, so a repeat gets the same answer).
    mutating func order(_ op: Op, _ key: String) throws {
        let now = max(library.clock.nowMilliseconds(), time)
        var accepted = op
        var rejection = try check(op, into: &accepted)
        if rejection == nil { rejection = try apply(&accepted, at: now) }
        if let rejection {
            try refuse(op, key, rejection, at: now)
        } else {
            time = now
            known[key] = (seq, deviceKey)
            if collecting { writes.accepted.append(accepted) }
            results.append(PushResult(opID: op.opID, deviceSeq: op.deviceSeq, outcome: .accepted(serverSeq: seq)))
        }
        last = max(last, op.deviceSeq)
    }

    /// Checks an op against the schema and the server's projection; nil when it may be applied.
    /// Ops of every earlier version are accepted: read in the current shape, checked, and logged
    /// exactly as written (readers upcast them again); a current one is logged normalized.
    private mutating func check(_ op: Op, into accepted: inout Op) throws -> ChronicleError? {
        do {
            let current = try library.schema.upcast(op)
            let (spec, normalized) = try library.schema.validate(type: current.type, version: current.version, payload: current.payload,
                                                                 serverAuthored: false)
            try library.checkTarget(spec, op.entityID, normalized, &targets, in: db)
            if current.type == op.type && current.version == op.version { accepted.payload = normalized }
            return nil
        } catch let error as ChronicleError {
            return error
        }
    }

    /// Logs and applies a checked op under the next seq. A free-tier cap trigger may still refuse
    /// it: then only this op is undone, and the refusal is returned.
    private mutating func apply(_ accepted: inout Op, at now: Int64) throws -> ChronicleError? {
        seq += 1
        accepted.serverSeq = seq
        accepted.serverTime = now
        let capped = library.capped
        if capped { try db.execute("SAVEPOINT chronicle_op") }
        do {
            try insert.execute(LogTables.logArguments(accepted))
            try applier.apply(accepted)
            if capped { try db.execute("RELEASE chronicle_op") }
            return nil
        } catch let error as SQLiteError where capped && error.message.hasPrefix(FreeTierCap.prefix) {
            try db.execute("ROLLBACK TO chronicle_op")
            try db.execute("RELEASE chronicle_op")
            seq -= 1
            return ChronicleError(.freeTierCap, String(error.message.dropFirst(FreeTierCap.prefix.count)))
        }
    }

    /// Records and answers a refusal.
    private mutating func refuse(_ op: Op, _ key: String, _ rejection: ChronicleError, at now: Int64) throws {
        refused[key] = (rejection.code.rawValue, rejection.message, deviceKey)
        let row = ServerLibrary.RejectedOp(opID: key, deviceID: deviceKey, deviceSeq: op.deviceSeq, type: op.typeAndVersion,
                             entityID: op.entityID.lowercased, code: rejection.code.rawValue, message: rejection.message,
                             rejectedAt: now)
        try ServerLibrary.insertRejected(row, in: db)
        if collecting { writes.rejected.append(row) }
        results.append(PushResult(opID: op.opID, deviceSeq: op.deviceSeq,
                                  outcome: .rejected(code: rejection.code.rawValue, message: rejection.message),
                                  verdict: try library.verdict(op.entityID, in: db)))
    }

    /// Records how far the device's sequence moved.
    mutating func recordDevice() throws {
        guard last != lastAnswered else { return }
        try db.execute("""
            INSERT INTO chronicle_devices(device_id, last_device_seq) VALUES (?1, ?2)
            ON CONFLICT(device_id) DO UPDATE SET last_device_seq = excluded.last_device_seq
            """, [.text(deviceKey), .integer(last)])
        if collecting { writes.device = (deviceKey, last) }
    }
}
