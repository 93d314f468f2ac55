import ChronicleCore
import Foundation

/// Ops as the log's rows and segments hold them.
extension LogTables {
    /// The confirmed log's columns, in the order `logArguments` binds them: the server's log
    /// (SQLite and PostgreSQL), and a device's before store format v9.
    public static let logColumns = "server_seq, op_id, device_id, device_seq, type, version, entity_id, payload, device_time, base_seq, server_time"

    package static func logArguments(_ op: Op) -> [Value] {
        [.integer(op.serverSeq!), .text(op.opID.lowercased), .text(op.deviceID.lowercased), .integer(op.deviceSeq),
         .text(op.type), .integer(Int64(op.version)), .text(op.entityID.lowercased), .text(CanonicalJSON.encode(op.payload)),
         .integer(op.deviceTime), .integer(op.baseSeq), .integer(op.serverTime!)]
    }

    package static func logOp(_ row: Row, libraryID: UUID) throws -> Op {
        Op(opID: try LogTables.uuid(row, 1), libraryID: libraryID, deviceID: try LogTables.uuid(row, 2), deviceSeq: row.int(3),
           type: row.text(4), version: Int(row.int(5)), entityID: try LogTables.uuid(row, 6),
           payload: try row.withBytes(7) { try CanonicalJSON.decodePayload(utf8: $0) }, deviceTime: row.int(8), baseSeq: row.int(9),
           serverSeq: row.int(0), serverTime: row.int(10))
    }

    /// The chained digest of a segment body: SHA-256 (hex) of the previous segment's digest ("" before the first) and the body.
    public static func chainDigest(previous: String, body: [UInt8]) -> String {
        let hasher = SHA256Hasher()
        hasher.update(previous)
        hasher.update(body)
        return hasher.hexDigest()
    }

    /// Encodes confirmed ops (contiguous seqs) as segments of at most `opsMax` ops each,
    /// split further where a body would pass `segmentBodyBytesMax`.
    /// `framed`: false leaves `frame` empty (a log block).
    package static func encodeSegments(_ ops: ArraySlice<Op>, libraryID: UUID, opsMax: Int, framed: Bool = true) throws -> [EncodedSegment] {
        var out: [EncodedSegment] = []
        var start = ops.startIndex
        while start < ops.endIndex {
            var end = min(ops.endIndex, start + max(1, opsMax))
            while true {
                let run = ops[start..<end]
                let body = SegmentCodec.encodeBody(try Segment(libraryID: libraryID, ops: Array(run)))
                if body.count > LogTables.segmentBodyBytesMax && run.count > 1 {
                    end = start + run.count / 2
                    continue
                }
                out.append(EncodedSegment(firstSeq: run.first!.serverSeq!, lastSeq: run.last!.serverSeq!, body: body,
                                          frame: framed ? LZ4Frame.compress(body) : [],
                                          filter: SegmentFilter(ids: Set(run.map(\.entityID))).bytes,
                                          newestTime: run.lazy.compactMap(\.serverTime).max() ?? 0))
                break
            }
            start = end
        }
        return out
    }

    /// Confirmed ops with `after < serverSeq ≤ upTo`, in server order, optionally of one
    /// entity: from sealed segments first, then the log (a device's blocks, the server's rows). Streams segment by segment.
    package static func forEachConfirmedOp(in db: Database, libraryID: UUID, after: Int64 = 0, upTo: Int64? = nil, entity: String? = nil,
                                   _ body: (Op) throws -> Void) throws {
        let limit = upTo ?? Int64.max
        let entityID = try entity.map { try LogTables.uuid($0) }
        // One entity's history (audit): only segments whose entity filter may hold it are opened
        // (segments sealed before filters existed have none and are opened).
        let firsts = try db.uncached("""
            SELECT s.first_seq, f.filter FROM chronicle_segments s LEFT JOIN chronicle_segment_filters f ON f.first_seq = s.first_seq
            WHERE s.last_seq > ?1 AND s.first_seq <= ?2 ORDER BY s.first_seq
            """).map([.integer(after), .integer(limit)]) { row -> Int64? in
            guard let entityID, !row.isNull(1), let filter = row.withBytes(1, { SegmentFilter(bytes: $0) }) else { return row.int(0) }
            return filter.mayContain(entityID) ? row.int(0) : nil
        }.compactMap { $0 }
        let segments = try db.uncached("SELECT body FROM chronicle_segments WHERE first_seq = ?1")
        for first in firsts {
            guard let inflated = try segments.map([.integer(first)], { row in
                try row.withBytes(0) { try LZ4Frame.decompress($0, maxBytes: SegmentCodec.Limits().maxDecodedBytes) }
            }).first else { continue }
            // A segment whose body does not hold the entity's 16 id bytes has none of its ops (op
            // records carry the id in binary), so it is not decoded.
            if let entityID, !LogTables.contains(inflated, entityID) { continue }
            // One entity's history: only its ops' payloads are built.
            let (segmentLibrary, ops) = try entityID.map { try SegmentCodec.decodeOps(ofEntity: $0, body: inflated) }
                ?? { let segment = try SegmentCodec.decodeBody(inflated); return (segment.libraryID, segment.ops) }()
            guard segmentLibrary == libraryID else {
                throw ChronicleError(.invariantViolated, "A sealed segment belongs to library \(segmentLibrary.lowercased), not this store's.")
            }
            for op in ops where op.serverSeq! > after && op.serverSeq! <= limit { try body(op) }
        }
        if try LogTables.keepsLogBlocks(db) {
            try LogTables.forEachHotOp(in: db, libraryID: libraryID, after: after, upTo: limit, entity: entityID, body)
            return
        }
        // The server's log, a row per op.
        var conditions = ["server_seq > ?1", "server_seq <= ?2"]
        var arguments: [Value] = [.integer(after), .integer(limit)]
        if let entity { conditions.append("entity_id = ?3"); arguments.append(.text(entity)) }
        let log = try db.uncached("SELECT \(logColumns) FROM chronicle_log WHERE \(conditions.joined(separator: " AND ")) ORDER BY server_seq")
        try log.forEach(arguments) { row in try body(try logOp(row, libraryID: libraryID)) }
    }

    /// Checks the sealed prefix: every frame decodes (content checksum), holds exactly its
    /// seqs of this library, and the digest chain is unbroken; the log continues it.
    /// `rowLog`: the store keeps its hot log a row per op (`chronicle_log`, the server's), which must start right after.
    package static func verifySegments(in db: Database, libraryID: UUID, rowLog: Bool = true) throws -> [String] {
        var problems: [String] = []
        var previous: String?   // nil before the first segment (whose predecessor may have been dropped)
        var expected = try historyBase(in: db) + 1
        let statement = try db.uncached("SELECT first_seq, last_seq, body, digest, previous_digest FROM chronicle_segments ORDER BY first_seq")
        let filters = try db.uncached("SELECT filter FROM chronicle_segment_filters WHERE first_seq = ?1")
        try statement.forEach { row in
            let first = row.int(0), last = row.int(1)
            if first != expected { problems.append("segment \(first)…\(last) does not follow seq \(expected - 1)") }
            if let previous, row.text(4) != previous {
                problems.append("segment \(first)…\(last) is not chained to the one before it")
            }
            do {
                let frame = row.withBytes(2) { Array($0) }
                let body = try LZ4Frame.decompress(frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
                let segment = try SegmentCodec.decodeBody(body)
                if segment.libraryID != libraryID { problems.append("segment \(first)…\(last) belongs to another library") }
                if segment.firstSeq != first || segment.lastSeq != last { problems.append("segment \(first)…\(last) holds seqs \(segment.firstSeq ?? 0)…\(segment.lastSeq ?? 0)") }
                let digest = chainDigest(previous: row.text(4), body: body)
                if digest != row.text(3) { problems.append("segment \(first)…\(last) digest does not match its bytes") }
                // Its entity filter (if it has one) must say "maybe" for every entity it holds, or audits would miss history.
                for filter in try filters.map([.integer(first)], { row in row.withBytes(0) { SegmentFilter(bytes: $0) } }) {
                    if let filter, segment.ops.contains(where: { !filter.mayContain($0.entityID) }) {
                        problems.append("segment \(first)…\(last) has an entity filter that leaves out one of its entities")
                    } else if filter == nil {
                        problems.append("segment \(first)…\(last) has an unreadable entity filter")
                    }
                }
            } catch {
                problems.append("segment \(first)…\(last) cannot be read: \(error)")
            }
            previous = row.text(3)
            expected = last + 1
        }
        // (A device's log blocks are checked against the sealed prefix by `verifyBlocks`.)
        if rowLog, let minLog = try db.scalarInt("SELECT min(server_seq) FROM chronicle_log"), minLog != expected {
            problems.append("the log starts at seq \(minLog) but the sealed prefix ends at \(expected - 1)")
        }
        return problems
    }

    /// How many confirmed ops `forEachConfirmedOp` visits (exact without an entity filter).
    static func confirmedCount(in db: Database, after: Int64 = 0, upTo: Int64? = nil) throws -> Int64 {
        let limit = upTo ?? Int64.max
        let inLog = try keepsLogBlocks(db) ? LogTables.hotCount(in: db, after: after, upTo: limit)
            : db.scalarInt("SELECT count(*) FROM chronicle_log WHERE server_seq > ?1 AND server_seq <= ?2", [.integer(after), .integer(limit)]) ?? 0
        let inSegments = try db.scalarInt("""
            SELECT coalesce(sum(min(last_seq, ?2) - max(first_seq, ?1 + 1) + 1), 0) FROM chronicle_segments
            WHERE last_seq > ?1 AND first_seq <= ?2
            """, [.integer(after), .integer(limit)]) ?? 0
        return inLog + inSegments
    }

    /// True if `bytes` holds the id's 16 bytes anywhere.
    static func contains(_ bytes: [UInt8], _ id: UUID) -> Bool {
        withUnsafeBytes(of: id.uuid) { needle in
            bytes.withUnsafeBytes { haystack in
                guard haystack.count >= 16 else { return false }
                let head = needle.loadUnaligned(as: UInt64.self), tail = needle.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
                for offset in 0...(haystack.count - 16)
                where haystack.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == head
                    && haystack.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self) == tail {
                    return true
                }
                return false
            }
        }
    }

    /// Whether the store keeps its hot log in blocks (a device's, format v9 on) rather than a row
    /// per op (the server's).
    static func keepsLogBlocks(_ db: Database) throws -> Bool {
        try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'chronicle_log_blocks'") == 1
    }

    /// A sealed segment's body stays at most half the decoders' cap (`SegmentCodec.Limits`),
    /// so every segment can be read back however large its ops are.
    static let segmentBodyBytesMax = SegmentCodec.Limits().maxDecodedBytes / 2

    /// Confirmed ops of the hot log with `after < serverSeq ≤ upTo` and after the sealed end, in
    /// order, optionally of one entity (whose history opens only the blocks whose filter may
    /// hold it, and builds only its ops' payloads).
    static func forEachHotOp(in db: Database, libraryID: UUID, after: Int64, upTo: Int64, entity: UUID?,
                             _ body: (Op) throws -> Void) throws {
        let from = max(after, try LogTables.sealedUpTo(in: db))
        guard from < upTo else { return }
        let firsts = try db.uncached("""
            SELECT first_seq, filter FROM chronicle_log_blocks WHERE last_seq > ?1 AND first_seq <= ?2 ORDER BY first_seq
            """).map([.integer(from), .integer(upTo)]) { row -> Int64? in
            guard let entity else { return row.int(0) }
            let filter = row.withBytes(1) { SegmentFilter(bytes: $0) }
            return filter?.mayContain(entity) ?? true ? row.int(0) : nil
        }.compactMap { $0 }
        for first in firsts {
            guard let bytes = try LogTables.blockBody(firstSeq: first, in: db) else { continue }
            let ops: [Op]
            if let entity {
                guard contains(bytes, entity) else { continue }
                let (library, found) = try SegmentCodec.decodeOps(ofEntity: entity, body: bytes)
                guard library == libraryID else {
                    throw ChronicleError(.invariantViolated, "The log block at seq \(first) belongs to library \(library.lowercased), not this store's.")
                }
                ops = found
            } else {
                ops = try LogTables.decodeBlock(bytes, firstSeq: first, libraryID: libraryID)
            }
            for op in ops where op.serverSeq! > from && op.serverSeq! <= upTo { try body(op) }
        }
    }

    /// A column holding an id, parsed in place.
    static func uuid(_ row: Row, _ index: Int32) throws -> UUID {
        guard let uuid = row.uuid(index) else { return try uuid(row.text(index)) }
        return uuid
    }

    static func uuid(_ text: String) throws -> UUID {
        guard let uuid = UUID(text: text) else {
            throw ChronicleError(.invariantViolated, "The store holds a malformed id '\(text)'.")
        }
        return uuid
    }

    /// The seq of the newest op in the hot log's blocks (nil when it has none).
    static func blocksEnd(in db: Database) throws -> Int64? {
        try db.scalarInt("SELECT last_seq FROM chronicle_log_blocks ORDER BY first_seq DESC LIMIT 1")
    }

    /// One block's body, copied out of its row.
    static func blockBody(firstSeq: Int64, in db: Database) throws -> [UInt8]? {
        try db.query("SELECT body FROM chronicle_log_blocks WHERE first_seq = ?1", [.integer(firstSeq)]) { row in
            row.withBytes(0) { Array($0) }
        }.first
    }

    /// Decodes a block's body: a segment of this library's confirmed ops starting at `firstSeq`.
    static func decodeBlock(_ body: [UInt8], firstSeq: Int64, libraryID: UUID) throws -> [Op] {
        let segment = try SegmentCodec.decodeBody(body)
        guard segment.libraryID == libraryID, segment.firstSeq == firstSeq else {
            throw ChronicleError(.invariantViolated, "The log block at seq \(firstSeq) does not hold this library's ops from that seq.")
        }
        return segment.ops
    }

    /// How many confirmed ops the hot log holds after `after` up to `upTo` (and after the sealed end).
    static func hotCount(in db: Database, after: Int64, upTo: Int64) throws -> Int64 {
        let from = max(after, try LogTables.sealedUpTo(in: db))
        guard from < upTo else { return 0 }
        return try db.scalarInt("""
            SELECT coalesce(sum(min(last_seq, ?2) - max(first_seq, ?1 + 1) + 1), 0) FROM chronicle_log_blocks
            WHERE last_seq > ?1 AND first_seq <= ?2
            """, [.integer(from), .integer(upTo)]) ?? 0
    }
}
