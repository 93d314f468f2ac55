import ChronicleCore
import ChronicleStore
import Foundation

/// What a library file holds that decides, read out to be copied into another database that
/// orders libraries (`ChroniclePostgres`'s move of a lone server's libraries): where its history
/// begins and its sealed segments end, the log after them, the ids of the ops before where history
/// begins, the refusals given, and each device's last answered deviceSeq. Nothing here writes.
/// Read with no server running on the file, so that the reads agree with each other.
extension ServerLibrary {
    /// Where the file's history stands.
    public struct ExportHeader: Sendable, Equatable {
        public var head: Int64
        /// The serverTime of the op at the head (0 where history was dropped through the head).
        public var headTime: Int64
        /// The last seq in a sealed segment, or `historyBase` where that is later (0: none).
        public var sealedThrough: Int64
        /// The chained digest the first segment after `historyBase` continues ("" before the first).
        public var sealedDigestAtBase: String
        public var historyBase: Int64
        public var historyDroppedAt: Int64?
    }

    public func exportHeader() throws -> ExportHeader {
        try read { db in
            let head = try Self.head(in: db)
            let sealed = try LogTables.sealedUpTo(in: db)
            let base = try LogTables.historyBase(in: db)
            var headTime = try db.scalarInt("SELECT server_time FROM chronicle_log WHERE server_seq = ?1", [.integer(head)])
            if headTime == nil, head > 0,
               let frame = try db.query("SELECT body FROM chronicle_segments WHERE last_seq = ?1", [.integer(head)], { $0.withBytes(0) { Array($0) } }).first {
                headTime = try Self.decodeSealed(frame, libraryID: libraryID).ops.last?.serverTime
            }
            let digestAtBase = try db.scalarText("SELECT previous_digest FROM chronicle_segments ORDER BY first_seq LIMIT 1") ?? ""
            return ExportHeader(head: head, headTime: headTime ?? 0, sealedThrough: sealed, sealedDigestAtBase: digestAtBase,
                                historyBase: base, historyDroppedAt: try LogTables.meta("history_dropped_at", in: db).integerValue)
        }
    }

    /// Up to `limit` ops of the log (not sealed) after `seq`, in order.
    public func loggedOps(after seq: Int64, limit: Int) throws -> [Op] {
        try read { db in
            try db.statement("SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq LIMIT ?2")
                .map([.integer(seq), .integer(Int64(limit))]) { try LogTables.logOp($0, libraryID: libraryID) }
        }
    }

    /// Up to `limit` ids of ops after `seq` and up to `through` that the file keeps for history no
    /// longer here (before `historyBase`), by seq.
    public func droppedOps(after seq: Int64, through: Int64, limit: Int) throws -> [DroppedOp] {
        try read { db in
            try db.query("""
                SELECT op_id, server_seq, device_id FROM chronicle_sealed_ops WHERE server_seq > ?1 AND server_seq <= ?2
                ORDER BY server_seq LIMIT ?3
                """, [.integer(seq), .integer(through), .integer(Int64(limit))]) {
                DroppedOp(opID: $0.text(0), serverSeq: $0.int(1), deviceID: $0.text(2))
            }
        }
    }

    /// Every op this file refused, with the answer a repeat gets.
    public func rejectedOps() throws -> [RejectedOp] {
        try read { db in
            try db.query("""
                SELECT op_id, device_id, device_seq, type, entity_id, code, message, rejected_at FROM chronicle_rejected_ops ORDER BY op_id
                """) {
                RejectedOp(opID: $0.text(0), deviceID: $0.text(1), deviceSeq: $0.int(2), type: $0.text(3), entityID: $0.text(4),
                           code: $0.text(5), message: $0.text(6), rejectedAt: $0.int(7))
            }
        }
    }

    /// Each device's last answered deviceSeq.
    public func deviceSeqs() throws -> [(id: String, lastDeviceSeq: Int64)] {
        try read { db in
            try db.query("SELECT device_id, last_device_seq FROM chronicle_devices ORDER BY device_id") { (id: $0.text(0), lastDeviceSeq: $0.int(1)) }
        }
    }
}
