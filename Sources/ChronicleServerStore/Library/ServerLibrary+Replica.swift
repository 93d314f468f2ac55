import ChronicleCore
import ChronicleStore
import Foundation

/// Where a library's order is decided when it is not its own file: a database that several
/// servers share (`ChroniclePostgres`). The file then follows it as a replica
/// (`ServerLibrary.follow`).
public protocol LibraryUpstream: AnyObject, Sendable {
    /// Orders one write to `library`. `write` runs the write in the file's transaction and calls
    /// `commit` with what it wrote before it commits there; `commit` writes the same upstream and
    /// commits it, and returns the generation for the file to record. Returns what was written,
    /// once it is committed upstream, even where the file then failed to commit (it catches up).
    func order(_ library: ServerLibrary, _ write: (_ commit: (ServerLibrary.PushWrites) throws -> Int64?) throws -> Void) throws
        -> ServerLibrary.PushWrites

    /// Brings `library` up to what the upstream holds now (`ServerLibrary.replicate`).
    func catchUp(_ library: ServerLibrary) throws

    /// Runs `body` while no write to `library` can be ordered, by this process or any other
    /// sharing the upstream, with `library` caught up first: what `body` reads of it is then the
    /// whole confirmed log until it returns (the files collection's last look before it deletes,
    /// `ServerLibrary.whilePushesWait`). What `body` writes to the upstream commits with it.
    func whileOrderWaits<T>(_ library: ServerLibrary, _ body: () throws -> T) throws -> T

    /// Called after `library` compacted: the upstream may seal its own history as far as `library`
    /// is sealed (`ServerLibrary.sealedSegments`), and drop it as far as `library`'s was dropped
    /// past the retention horizon (`historyBase`, `snapshot(at:)`). Cheap when there is nothing new.
    func sealed(_ library: ServerLibrary) throws
}

extension LibraryUpstream {
    public func sealed(_ library: ServerLibrary) throws {}
}

/// A library file kept as a replica of a library whose order lives in another database
/// (`ChroniclePostgres`): the other database is written first, and this file follows it. Every
/// push commits there before it commits here (`push(_:from:beforeCommit:)`), and what other
/// servers wrote there comes here through `replicate`, in order. The file records how far it
/// follows as the other database's generation (`replicaGeneration`).
extension ServerLibrary {
    /// The meta key holding the generation of the other database this file has caught up with.
    public static let replicaGenerationKey = "replica_generation"

    /// What one push wrote, in the order it wrote it.
    public struct PushWrites: Sendable {
        /// The ops accepted, with their serverSeq and serverTime, as logged.
        public var accepted: [Op] = []
        /// The ops refused, with the answer a repeat gets.
        public var rejected: [RejectedOp] = []
        /// The device's last answered deviceSeq, where the push moved it.
        public var device: (id: String, lastDeviceSeq: Int64)?
        /// The answer the push gives.
        public var response = PushResponse(results: [], head: 0)

        public init() {}
    }

    /// A refused op as the server keeps it (`chronicle_rejected_ops`): a repeat gets the same answer.
    public struct RejectedOp: Sendable, Equatable {
        public var opID: String
        public var deviceID: String
        public var deviceSeq: Int64
        /// `type@version`.
        public var type: String
        public var entityID: String
        public var code: String
        public var message: String
        public var rejectedAt: Int64

        public init(opID: String, deviceID: String, deviceSeq: Int64, type: String, entityID: String, code: String,
                    message: String, rejectedAt: Int64) {
            self.opID = opID
            self.deviceID = deviceID
            self.deviceSeq = deviceSeq
            self.type = type
            self.entityID = entityID
            self.code = code
            self.message = message
            self.rejectedAt = rejectedAt
        }
    }

    /// Moves a device's last answered deviceSeq up to `seq` (never back).
    static func recordDeviceSeq(_ device: String, _ seq: Int64, in db: Database) throws {
        try db.execute("""
            INSERT INTO chronicle_devices(device_id, last_device_seq) VALUES (?1, ?2)
            ON CONFLICT(device_id) DO UPDATE SET last_device_seq = max(last_device_seq, excluded.last_device_seq)
            """, [.text(device), .integer(seq)])
    }

    /// A sealed segment as this file keeps it (`chronicle_segments`).
    public struct SealedSegment: Sendable, Equatable {
        public var firstSeq: Int64
        public var lastSeq: Int64
        /// The segment body in an LZ4 frame (content checksum on), as sealed.
        public var frame: [UInt8]
        /// The chained digest (`SegmentInfo.digest`) and the one it chains to.
        public var digest: String
        public var previousDigest: String
    }

    /// The highest seq sealed into segments in this file, or before which history was dropped (0: none).
    public func sealedThrough() throws -> Int64 {
        try read { db in try LogTables.sealedUpTo(in: db) }
    }

    /// Up to `limit` sealed segments that end after `seq`, oldest first, with their frames.
    public func sealedSegments(after seq: Int64, limit: Int) throws -> [SealedSegment] {
        try read { db in
            try db.query("""
                SELECT first_seq, last_seq, body, digest, previous_digest FROM chronicle_segments
                WHERE last_seq > ?1 ORDER BY first_seq LIMIT ?2
                """, [.integer(seq), .integer(Int64(limit))]) {
                SealedSegment(firstSeq: $0.int(0), lastSeq: $0.int(1), frame: $0.withBytes(2) { Array($0) }, digest: $0.text(3),
                              previousDigest: $0.text(4))
            }
        }
    }

    /// Encodes confirmed `ops` (gap-free, in order) as one sealed segment as a compaction would: the
    /// body and its LZ4 frame, of the first `opCount` ops (all of them, unless so large a body would
    /// pass the decoders' cap).
    public static func encodeSegment(_ ops: [Op]) throws -> (opCount: Int, body: [UInt8], frame: [UInt8]) {
        guard let libraryID = ops.first?.libraryID else {
            throw ChronicleError(.invariantViolated, "A segment holds at least one op.")
        }
        let segment = try LogTables.encodeSegments(ops[...], libraryID: libraryID, opsMax: ops.count)[0]
        return (Int(segment.lastSeq - segment.firstSeq + 1), segment.body, segment.frame)
    }

    /// The seq this file's history begins after (0: all of it is here; past a retention horizon,
    /// the snapshot at that seq holds the state there).
    public func historyBase() throws -> Int64 {
        try read { db in try LogTables.historyBase(in: db) }
    }

    /// The snapshot kept at exactly `seq`: its LZ4 frame and the digest of the state it holds.
    public func snapshot(at seq: Int64) throws -> (frame: [UInt8], stateDigest: String)? {
        try read { db in
            try db.query("SELECT body, state_digest FROM chronicle_snapshots WHERE seq = ?1", [.integer(seq)]) {
                ($0.withBytes(0) { Array($0) }, $0.text(1))
            }.first
        }
    }

    /// An op id kept for history that is no longer here (`chronicle_sealed_ops`).
    public struct DroppedOp: Sendable, Equatable {
        public var opID: String
        public var serverSeq: Int64
        public var deviceID: String

        public init(opID: String, serverSeq: Int64, deviceID: String) {
            self.opID = opID
            self.serverSeq = serverSeq
            self.deviceID = deviceID
        }
    }

    /// Starts this file, empty, where another database's history begins (past its retention
    /// horizon): the snapshot `frame` of the state at `seq` is kept and loaded into the projection,
    /// its state digest checked, and the ids of the ops before it kept, so that each still applies
    /// at most once and a repeat is answered with its seq. In one transaction; the ops after `seq`
    /// follow through `replicate`.
    /// `droppedOps` hands the ids over in batches, inside the transaction (a large library's
    /// are never all in memory at once).
    public func start(fromSnapshot frame: [UInt8], at seq: Int64, stateDigest: String, droppedAt: Int64?,
                      droppedOps: (_ remember: ([DroppedOp]) throws -> Void) throws -> Void) throws {
        try writer.withLock { db in
            try db.transaction { db in
                guard try Self.head(in: db) == 0 else {
                    throw ChronicleError(.invariantViolated, "Library \(libraryID.lowercased): only an empty replica starts from a snapshot.")
                }
                try LogTables.insertSnapshot(at: seq, frame: frame, stateDigest: stateDigest, createdAt: clock.nowMilliseconds(), in: db)
                try LogTables.setMeta("history_base_seq", .integer(seq), in: db)
                if let droppedAt { try LogTables.setMeta("history_dropped_at", .integer(droppedAt), in: db) }
                // A snapshot of an earlier schema version has its state carried over: its digest is of the old shape.
                let migratedFrom = try ProjectionTables.load(storedAt: seq, from: db, into: db, projection, libraryID: libraryID)
                let loaded = try ProjectionTables.digest(projection, in: db)
                guard migratedFrom != nil || loaded == stateDigest else {
                    throw ChronicleError(.invariantViolated, "Library \(libraryID.lowercased): the snapshot at seq \(seq) holds a state whose digest is not the one it was kept with.")
                }
                let remember = try db.statement("INSERT INTO chronicle_sealed_ops(op_id, server_seq, device_id) VALUES (?1, ?2, ?3)")
                try droppedOps { batch in
                    for op in batch { try remember.execute([.text(op.opID), .integer(op.serverSeq), .text(op.deviceID)]) }
                }
            }
        }
        tail.withLock { if seq > $0.seq { $0.seq = seq } }
        pushes.advance()
    }

    /// Appends the ops of a segment another database sealed (`frame`, the segment body in an LZ4
    /// frame) that lie after this file's head, folded into the projection as `replicate` folds them.
    /// Where the file holds nothing past its sealed prefix and the segment starts at the head, it
    /// is kept sealed as it came, so nothing is left to seal again; otherwise its ops go into the
    /// log. Records `generation`.
    public func replicate(sealed frame: [UInt8], generation: Int64) throws {
        let (ops, body) = try Self.decodeSealed(frame, libraryID: libraryID)
        let first = ops.first!.serverSeq!, last = ops.last!.serverSeq!
        let kept: Bool = try writer.withLock { db in
            try db.transaction { db in
                let head = try Self.head(in: db)
                guard first == head + 1, try LogTables.sealedUpTo(in: db) == head else { return false }
                let encoded = EncodedSegment(firstSeq: first, lastSeq: last, body: body, frame: frame,
                                             filter: SegmentFilter(ids: Set(ops.map(\.entityID))).bytes)
                try storeSegment(encoded, ops: ops[...], now: clock.nowMilliseconds(), in: db)
                let applier = ProjectionApplier(materializer, in: db)
                for op in ops { try applier.apply(op) }
                try LogTables.setMeta(Self.replicaGenerationKey, .integer(generation), in: db)
                return true
            }
        }
        if kept {
            tail.withLock { if last > $0.seq { $0 = (last, ops.last!.serverTime ?? 0) } }
            pushes.advance()
            return
        }
        let head = localHead
        try replicate(ops: ops.filter { $0.serverSeq! > head }, rejected: [], devices: [], generation: generation)
    }

    /// A sealed segment's ops (at least one) and body, from its LZ4 frame: checked to be a gap-free
    /// run of library `libraryID`'s confirmed ops, or `invariantViolated`.
    public static func decodeSealed(_ frame: [UInt8], libraryID: UUID) throws -> (ops: [Op], body: [UInt8]) {
        let body = try LZ4Frame.decompress(frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
        let segment = try SegmentCodec.decodeBody(body)
        guard segment.libraryID == libraryID, let first = segment.firstSeq, let last = segment.lastSeq,
              segment.ops.count == Int(last - first + 1) else {
            throw ChronicleError(.invariantViolated, "A sealed segment does not hold a gap-free run of library \(libraryID.lowercased)'s confirmed ops.")
        }
        return (segment.ops, body)
    }

    /// The generation of the other database this file has caught up with (0: none yet).
    public func replicaGeneration() throws -> Int64 {
        try read { db in try LogTables.meta(Self.replicaGenerationKey, in: db).integerValue ?? 0 }
    }

    /// Appends what other servers wrote, in one transaction: confirmed ops (which must continue the
    /// log: serverSeq = head + 1, + 2, …), folded into the projection as a push folds them; refused
    /// ops; devices' last answered deviceSeq (which never moves back). Records `generation`, and
    /// wakes whatever waits for a push.
    public func replicate(ops: [Op], rejected: [RejectedOp], devices: [(id: String, lastDeviceSeq: Int64)],
                          generation: Int64) throws {
        let tailAfter: (seq: Int64, time: Int64)? = try writer.withLock { db in
            try db.transaction { db in
                var head = try Self.head(in: db)
                let insert = try db.statement("INSERT INTO chronicle_log(\(LogTables.logColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")
                let applier = ProjectionApplier(materializer, in: db)
                for op in ops {
                    guard op.libraryID == libraryID, let seq = op.serverSeq, op.serverTime != nil, seq == head + 1 else {
                        throw ChronicleError(.invariantViolated, "Library \(libraryID.lowercased): a replicated op must continue the log at seq \(head + 1); got \(op.serverSeq.map(String.init) ?? "none").")
                    }
                    try insert.execute(LogTables.logArguments(op))
                    try applier.apply(op)
                    head = seq
                }
                for row in rejected {
                    if try db.scalarInt("SELECT 1 FROM chronicle_rejected_ops WHERE op_id = ?1", [.text(row.opID)]) == nil {
                        try Self.insertRejected(row, in: db)
                    }
                }
                for device in devices { try Self.recordDeviceSeq(device.id, device.lastDeviceSeq, in: db) }
                try LogTables.setMeta(Self.replicaGenerationKey, .integer(generation), in: db)
                return ops.last.map { ($0.serverSeq!, $0.serverTime!) }
            }
        }
        if let tailAfter {
            tail.withLock { if tailAfter.seq > $0.seq { $0 = tailAfter } }
        }
        pushes.advance()
    }
}

/// Libraries whose order lives in a database several servers share (`ChroniclePostgres`): a
/// server opens its replicas here instead of files in its data directory.
public protocol SharedLibraryStore: Sendable {
    /// Where the order lives, for logs and messages (never a password).
    var label: String { get }

    /// This process's replica of library `id`, made on first use, following the shared store.
    func library(_ id: UUID, schema: Schema?, caps: [FreeTierCap]?) throws -> ServerLibrary

    /// Deletes library `id` from the shared store and this process's replica; false where it was not there.
    func deleteLibrary(_ id: UUID) throws -> Bool

    /// Calls `changed` with a library's id whenever another process writes to it, and with nil where
    /// any library may have changed unseen (after a lost connection), until `stopWatching`.
    func watch(_ changed: @escaping @Sendable (UUID?) -> Void)

    func stopWatching()

    /// Why the shared store cannot be reached now (one round trip); nil when it can.
    func unreachable() -> String?

    /// Lines for the server's `/metrics` (Prometheus text format) about the shared store.
    func renderMetrics() -> String

    /// True when this process's replica of library `id` cannot catch up any more (the shared
    /// store's history now begins past its head): the server closes it once no request holds it,
    /// and `library(_:schema:caps:)` makes it anew.
    func needsRemaking(_ id: UUID) -> Bool

    /// Where the servers sharing this store keep the libraries' blobs.
    var blobs: (any BlobStorage)? { get }
}

extension SharedLibraryStore {
    public func renderMetrics() -> String { "" }
    public func needsRemaking(_ id: UUID) -> Bool { false }
    public var blobs: (any BlobStorage)? { nil }
}
