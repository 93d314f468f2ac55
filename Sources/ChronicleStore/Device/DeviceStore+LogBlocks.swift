import ChronicleCore
import Foundation

/// The device's hot log: confirmed ops kept in blocks (`chronicle_log_blocks`, store format v9),
/// each a run of contiguous seqs encoded as a segment body, uncompressed. A block is written
/// once, when its batch is confirmed, and leaves whole once sealing passes its end; sealing a
/// block that fits a segment is compressing its body (`DeviceStore.prepareSeal`).
///
/// Ops at or before the sealed end are read from the segments: a block that a segment ended
/// inside (a seal point that fell within it) still holds them, and its readers skip them.
extension DeviceStore {
    /// Ops in one block at most: a segment's at most, so that a block can be sealed whole.
    static var logBlockOpsMax: Int { CompactionPolicy().segmentOpsMax }

    /// A block of at least this many ops is sealed whole, as one segment; runs of shorter blocks
    /// (a device that syncs an op or two at a time) are read and encoded again together, up to
    /// `CompactionPolicy.segmentOpsMax`, so that sealed segments do not come out tiny.
    static let sealWholeBlockOpsMin: Int64 = 256

    /// Confirmed ops (contiguous seqs) as log blocks of at most `logBlockOpsMax` ops, split
    /// further where a body would pass `segmentBodyBytesMax`.
    static func encodeBlocks(_ ops: ArraySlice<Op>, libraryID: UUID) throws -> [EncodedSegment] {
        try LogTables.encodeSegments(ops, libraryID: libraryID, opsMax: logBlockOpsMax, framed: false)
    }

    /// Appends blocks to the hot log, inside the caller's transaction (the table's trigger refuses
    /// one that does not follow the last confirmed op).
    static func insertBlocks(_ blocks: [EncodedSegment], in db: Database) throws {
        let insert = try db.statement("INSERT INTO chronicle_log_blocks(first_seq, last_seq, newest_time, filter, body) VALUES (?1, ?2, ?3, ?4, ?5)")
        for block in blocks {
            try insert.execute([.integer(block.firstSeq), .integer(block.lastSeq), .integer(block.newestTime)],
                               blobs: [(4, block.filter), (5, block.body)])
        }
    }

    /// Keeps the ids of newly confirmed ops (`chronicle_op_ids`: an op id applies at most once;
    /// a repeated one is refused as `duplicate_op`) and this device's ops among them
    /// (`chronicle_own_confirmed`). Inside the caller's transaction.
    ///
    /// One exception: an own op the store took as ordered inside the snapshot it started from,
    /// on the word of a push answer (`confirmInSnapshot`), that the log then brings after that
    /// snapshot. The log is the order; the answer was wrong (a damaged or hostile one), and the op,
    /// left out of the projection on its word, is applied where the log puts it.
    static func recordConfirmed(_ ops: some Collection<Op>, deviceID: UUID, in db: Database) throws {
        let insertID = try db.statement("INSERT INTO chronicle_op_ids(op_id, server_seq) VALUES (?1, ?2)")
        let insertOwn = try db.statement("INSERT INTO chronicle_own_confirmed(server_seq, device_seq, op_id) VALUES (?1, ?2, ?3)")
        var historyBase: Int64?
        for op in ops {
            guard let seq = op.serverSeq else {
                throw ChronicleError(.invariantViolated, "Confirmed op \(op.opID.lowercased) has no server sequence.")
            }
            do {
                try insertID.execute([.null, .integer(seq)], uuid: op.opID, at: 1)
            } catch {
                guard error.isConstraint else { throw error }
                let base = try historyBase ?? LogTables.historyBase(in: db)
                historyBase = base
                guard op.deviceID == deviceID, seq > base, let held = try confirmedSeq(of: op.opID, in: db), held <= base,
                      try !ownConfirmed(op.opID, in: db) else {
                    throw ChronicleError(.duplicateOp, "Op \(op.opID.lowercased) is already in the confirmed log; an op id is applied at most once.")
                }
                try db.execute("UPDATE chronicle_op_ids SET server_seq = ?1 WHERE op_id = \(UUIDBlobFunction.name)(?2)",
                               [.integer(seq), .text(op.opID.lowercased)])
            }
            if op.deviceID == deviceID {
                try insertOwn.execute([.integer(seq), .integer(op.deviceSeq), .text(op.opID.lowercased)])
            }
        }
    }

    /// Whether the store holds `opID`'s content as one of this device's confirmed ops (a scan:
    /// asked only where an id turned up twice).
    private static func ownConfirmed(_ opID: UUID, in db: Database) throws -> Bool {
        try db.scalarInt("SELECT 1 FROM chronicle_own_confirmed WHERE op_id = ?1", [.text(opID.lowercased)]) != nil
    }

    /// The first hot op after `sealed` whose server time is `time` or later: the first block
    /// whose newest op is that recent is decoded (older blocks hold none).
    static func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, libraryID: UUID, in db: Database) throws -> Int64? {
        let blocks = try db.query("""
            SELECT first_seq FROM chronicle_log_blocks WHERE last_seq > ?1 AND newest_time >= ?2 ORDER BY first_seq
            """, [.integer(sealed), .integer(time)]) { $0.int(0) }
        for first in blocks {
            guard let bytes = try LogTables.blockBody(firstSeq: first, in: db) else { continue }
            if let op = try LogTables.decodeBlock(bytes, firstSeq: first, libraryID: libraryID).first(where: { $0.serverSeq! > sealed && $0.serverTime! >= time }) {
                return op.serverSeq
            }
        }
        return nil
    }

    /// The last hot op in `(sealed, through]` whose server time is before `time`: blocks whose
    /// newest op is older are taken whole, the others decoded.
    static func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, libraryID: UUID, in db: Database) throws -> Int64? {
        let blocks = try db.query("""
            SELECT first_seq, last_seq, newest_time FROM chronicle_log_blocks WHERE last_seq > ?1 AND first_seq <= ?2 ORDER BY first_seq
            """, [.integer(sealed), .integer(through)]) { ($0.int(0), $0.int(1), $0.int(2)) }
        var newest: Int64?
        for (first, last, newestTime) in blocks {
            if newestTime < time {
                newest = min(last, through)
                continue
            }
            guard let bytes = try LogTables.blockBody(firstSeq: first, in: db) else { continue }
            for op in try LogTables.decodeBlock(bytes, firstSeq: first, libraryID: libraryID)
            where op.serverSeq! > sealed && op.serverSeq! <= through && op.serverTime! < time {
                newest = op.serverSeq
            }
        }
        return newest
    }

    /// The hot log loses every op after `point` (a rewind, with the blocks' delete guard set aside
    /// by the caller, after the segments past the point went): the blocks after it go, and one
    /// that spans it is encoded again up to it.
    static func truncateBlocks(after point: Int64, libraryID: UUID, in db: Database) throws {
        let spanning = try db.query("SELECT first_seq, body FROM chronicle_log_blocks WHERE first_seq <= ?1 AND last_seq > ?1",
                                    [.integer(point)]) { row in (row.int(0), row.withBytes(1) { Array($0) }) }
        try db.execute("DELETE FROM chronicle_log_blocks WHERE last_seq > ?1", [.integer(point)])
        guard let (first, body) = spanning.first else { return }
        let sealed = try LogTables.sealedUpTo(in: db)
        let kept = try LogTables.decodeBlock(body, firstSeq: first, libraryID: libraryID).filter { $0.serverSeq! > sealed && $0.serverSeq! <= point }
        if !kept.isEmpty { try insertBlocks(try encodeBlocks(kept[...], libraryID: libraryID), in: db) }
    }

    /// Checks the hot log's blocks: each decodes, holds exactly its seqs of this library with its
    /// filter and newest time right, and they follow one another and the sealed prefix without a
    /// gap up to the cursor. Returns the problems found, the number of hot ops and of this device's among them.
    static func verifyBlocks(in db: Database, libraryID: UUID, deviceID: UUID, cursor: Int64) throws
        -> (problems: [String], hotOps: Int64, ownOps: Int64) {
        var problems: [String] = []
        var own: Int64 = 0
        let sealed = try LogTables.sealedUpTo(in: db)
        var expected = sealed + 1
        var hot: Int64 = 0
        let blocks = try db.query("SELECT first_seq, last_seq, newest_time, filter FROM chronicle_log_blocks ORDER BY first_seq") {
            ($0.int(0), $0.int(1), $0.int(2), $0.withBytes(3) { SegmentFilter(bytes: $0) })
        }
        for (first, last, newestTime, filter) in blocks {
            if last <= sealed {
                problems.append("log block \(first)…\(last) is sealed but still in the log")
                continue
            }
            if first > expected || (first < expected && expected != sealed + 1) {
                problems.append("log block \(first)…\(last) does not follow seq \(expected - 1)")
            }
            do {
                guard let body = try LogTables.blockBody(firstSeq: first, in: db) else { continue }
                let ops = try LogTables.decodeBlock(body, firstSeq: first, libraryID: libraryID)
                own += Int64(ops.count(where: { $0.deviceID == deviceID && $0.serverSeq! > sealed }))
                if ops.last?.serverSeq != last { problems.append("log block \(first)…\(last) holds seqs \(first)…\(ops.last?.serverSeq ?? 0)") }
                if ops.compactMap(\.serverTime).max() != newestTime { problems.append("log block \(first)…\(last) records another newest server time than its ops'") }
                if let filter {
                    if ops.contains(where: { !filter.mayContain($0.entityID) }) {
                        problems.append("log block \(first)…\(last) has an entity filter that leaves out one of its entities")
                    }
                } else {
                    problems.append("log block \(first)…\(last) has an unreadable entity filter")
                }
            } catch {
                problems.append("log block \(first)…\(last) cannot be read: \(error)")
            }
            hot += last - max(first, sealed + 1) + 1
            expected = last + 1
        }
        if expected - 1 != cursor {
            problems.append("cursor \(cursor) is not the last server seq \(expected - 1)")
        }
        return (problems, hot, own)
    }

    /// Store format v8 → v9 (`StoreFormat.conversions`): the log's rows become blocks of up to
    /// `logBlockOpsMax` ops, every confirmed id is kept in `chronicle_op_ids` and this device's
    /// confirmed ops in `chronicle_own_confirmed` (those of sealed segments decoded once).
    ///
    /// Decoding the rows and encoding them as blocks is most of it (for 1,000,000 ops, done in
    /// turn with the rest: 1.5 s decoding, 0.8 encoding, of 3.3): two threads do it, each on a
    /// read connection of its own (the rows do not change until the step's last statement drops
    /// them), at most four blocks ahead, while this connection, the step's writer, fills the id
    /// tables and then stores the blocks in order (1.9–2.1 s in all).
    static func convertLogToBlocks(in db: Database) throws {
        guard try db.scalarInt("SELECT EXISTS (SELECT 1 FROM chronicle_log)") == 1
                || db.scalarInt("SELECT EXISTS (SELECT 1 FROM chronicle_segments)") == 1 else { return }
        let library = try LogTables.uuid(try LogTables.meta("library_id", in: db).textValue ?? "")
        let device = try LogTables.uuid(try LogTables.meta("device_id", in: db).textValue ?? "")
        let sealed = try LogTables.sealedUpTo(in: db)
        // Rows at or before the sealed end were left by a compaction killed between its steps of
        // an older build; they are in the segments.
        let end = try db.scalarInt("SELECT max(server_seq) FROM chronicle_log") ?? 0
        let chunks = end > sealed ? Array(stride(from: sealed, to: end, by: logBlockOpsMax)) : []
        let encoded = Locked<[Int: Result<[EncodedSegment], any Error>]>([:])
        let ready = DispatchSemaphore(value: 0)
        let window = DispatchSemaphore(value: 4)
        let taken = Locked(0)
        let stop = Locked(false)
        let workers = DispatchGroup()
        let path = db.path
        for _ in 0..<min(2, chunks.count) {
            workers.enter()
            DispatchQueue.global().async {
                defer { workers.leave() }
                let reader = Result { try Database(path: path, options: { var o = Database.Options(); o.readOnly = true; return o }()) }
                while true {
                    window.wait()
                    let index = taken.withLock { taken -> Int in
                        defer { taken += 1 }
                        return taken
                    }
                    guard index < chunks.count, !stop.withLock({ $0 }) else { window.signal(); return }
                    let result = Result { () throws -> [EncodedSegment] in
                        let after = chunks[index]
                        let ops = try reader.get().query("""
                            SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 AND server_seq <= ?2 ORDER BY server_seq
                            """, [.integer(after), .integer(after + Int64(logBlockOpsMax))]) { try LogTables.logOp($0, libraryID: library) }
                        guard ops.first?.serverSeq == after + 1, ops.last?.serverSeq == after + Int64(ops.count) else {
                            throw ChronicleError(.invariantViolated, "The confirmed log has a gap after seq \(after); the store needs `chronicle salvage`.")
                        }
                        return try encodeBlocks(ops[...], libraryID: library)
                    }
                    encoded.withLock { $0[index] = result }
                    ready.signal()
                }
            }
        }
        defer {
            stop.withLock { $0 = true }
            window.signal()
            window.signal()
            workers.wait()
        }
        // Meanwhile, on this connection: the log's ids, and this device's ops of the log.
        try db.execute("""
            INSERT OR IGNORE INTO chronicle_op_ids(op_id, server_seq)
            SELECT \(UUIDBlobFunction.name)(op_id), server_seq FROM chronicle_log ORDER BY 1
            """)
        try db.execute("""
            INSERT INTO chronicle_own_confirmed(server_seq, device_seq, op_id)
            SELECT server_seq, device_seq, op_id FROM chronicle_log WHERE device_id = ?1 ORDER BY server_seq
            """, [.text(device.lowercased)])
        for index in chunks.indices {
            var result: Result<[EncodedSegment], any Error>?
            while true {
                result = encoded.withLock { $0.removeValue(forKey: index) }
                if result != nil { break }
                ready.wait()
            }
            window.signal()
            try insertBlocks(try result!.get(), in: db)
        }
        let base = try LogTables.historyBase(in: db)
        let own = try db.statement("INSERT OR IGNORE INTO chronicle_own_confirmed(server_seq, device_seq, op_id) VALUES (?1, ?2, ?3)")
        if sealed > base {
            try LogTables.forEachConfirmedOp(in: db, libraryID: library, after: base, upTo: sealed) { op in
                if op.deviceID == device { try own.execute([.integer(op.serverSeq!), .integer(op.deviceSeq), .text(op.opID.lowercased)]) }
            }
        }
    }
}
