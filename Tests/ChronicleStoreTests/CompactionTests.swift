import ChronicleCore
@testable import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// The log's lifecycle on a device: sealed segments, snapshots, compaction,
/// the retention horizon, and rebuild and audit across all of it.
@Suite struct CompactionTests {
    /// A confirmed library of `count` random ops from two other devices.
    @discardableResult
    static func library(_ f: Fixture, count: Int, seed: UInt64) throws -> [UUID] {
        let server = ServerLog(library: f.store.libraryID, seed: seed)
        let rng = SeededIDGenerator(seed: seed &* 31)
        func roll(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let devices = [rng.makeUUID(), rng.makeUUID()]
        var articles: [UUID] = []
        var ops: [Op] = []
        let words = ["tunnel", "plane", "basement", "offline", "sync", "log", "segment", "snapshot"]
        while ops.count < count {
            let device = devices[roll(2)]
            if articles.isEmpty || roll(5) == 0 {
                let id = rng.makeUUID()
                articles.append(id)
                ops.append(server.op("article.save", entity: id, from: device,
                                     payload: ["url": .text("https://example.com/\(ops.count)"), "title": .text("\(words[roll(8)]) \(ops.count)")]))
                continue
            }
            let article = articles[roll(articles.count)]
            switch roll(7) {
            case 0: ops.append(server.op("article.tag", entity: article, from: device, payload: ["tag": .text(words[roll(8)])]))
            case 1: ops.append(server.op("article.untag", entity: article, from: device, payload: ["tag": .text(words[roll(8)])]))
            case 2: ops.append(server.op("article.progress", entity: article, from: device, payload: ["progress": .real(Double(roll(101)) / 100)]))
            case 3: ops.append(server.op("article.update", entity: article, from: device, payload: ["title": .text("renamed \(words[roll(8)])")]))
            case 4: ops.append(server.op("highlight.create", entity: rng.makeUUID(), from: device,
                                         payload: ["article_id": .text(article.lowercased), "quote": .text(words[roll(8)])]))
            case 5: ops.append(server.op("article.delete", entity: article, from: device))
            default: ops.append(server.op("article.restore", entity: article, from: device))
            }
        }
        for start in stride(from: 0, to: ops.count, by: 500) { try f.store.applyConfirmed(Array(ops[start..<min(ops.count, start + 500)])) }
        return articles
    }

    /// A policy that keeps the newest `keepOps` ops hot and seals the rest in segments of `segmentOpsMax`.
    /// These tests are about snapshots: each compaction keeps its snapshot, whatever it costs
    /// (`aSnapshotThatWouldGrowTheStoreIsLeftOut` tests leaving one out).
    static func policy(keepOps: Int64, segmentOpsMax: Int) -> CompactionPolicy {
        var policy = CompactionPolicy()
        policy.keepOps = keepOps
        policy.segmentOpsMax = segmentOpsMax
        policy.keepsSnapshotThatGrowsFile = true
        return policy
    }

    @Test("A format v3 store keeps its snapshots, byte for byte, when v4 moves the frame to the row's end")
    func aVersion3StoresSnapshotsSurviveTheColumnMove() throws {
        let f = try Fixture()
        _ = try Self.library(f, count: 600, seed: 11)
        let policy = Self.policy(keepOps: 100, segmentOpsMax: 250)
        try f.store.compact(policy)
        let digest = try f.store.digest()
        let path = f.path
        try BlockLogTests.downgradeToFormat8(f.store)
        // Put the store back the way format v3 laid the table out (the frame in the middle of the row).
        let frames: [[UInt8]] = try f.store.writer.withLock { db in
            let frames = try db.query("SELECT body FROM chronicle_snapshots ORDER BY seq") { $0.withBytes(0) { [UInt8]($0) } }
            try db.transaction { db in
                try db.execute("PRAGMA legacy_alter_table = ON")
                try db.execute("CREATE TABLE old_snapshots (seq INTEGER PRIMARY KEY, body BLOB NOT NULL, state_digest TEXT NOT NULL, body_bytes INTEGER NOT NULL, created_at INTEGER NOT NULL)")
                try db.execute("INSERT INTO old_snapshots SELECT seq, body, state_digest, body_bytes, created_at FROM chronicle_snapshots")
                try db.execute("DROP TABLE chronicle_snapshots")
                try db.execute("ALTER TABLE old_snapshots RENAME TO chronicle_snapshots")
                try db.execute("PRAGMA legacy_alter_table = OFF")
                try db.execute("DROP TRIGGER chronicle_segment_filters_follow")
                try db.execute("DROP TABLE chronicle_segment_filters")
                // …and the sealed op ids as v3 (and v4) kept them: text, with a device id.
                try db.execute("CREATE TABLE chronicle_sealed_ops (op_id TEXT PRIMARY KEY NOT NULL, server_seq INTEGER NOT NULL, device_id TEXT NOT NULL) WITHOUT ROWID")
                try db.execute("""
                    INSERT INTO chronicle_sealed_ops SELECT lower(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || substr(h, 13, 4) || '-' ||
                                                           substr(h, 17, 4) || '-' || substr(h, 21)), server_seq, ''
                    FROM (SELECT hex(op_id) AS h, server_seq FROM chronicle_sealed_ids)
                    """)
                try db.execute("DROP TRIGGER chronicle_outbox_leaves_when_settled")
                try db.execute("DROP TABLE chronicle_sealed_ids")
                try db.execute(StoreFormat.version3Outbox[1])
                try db.execute("DROP TABLE chronicle_blob_chunks")   // v8's
                try db.execute("DROP TABLE chronicle_blobs")
                try db.execute("UPDATE chronicle_meta SET value = 3 WHERE key = 'format_version'")
            }
            return frames
        }
        #expect(!frames.isEmpty)
        let sealedIDs = try f.store.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_sealed_ops") }
        #expect(sealedIDs == 500)
        let reopened = try DeviceStore.open(at: path)
        #expect(try reopened.status().formatVersion == StoreFormat.currentVersion)
        // The sealed ids, as bytes, with the log's (v9: every confirmed op's id).
        #expect(try reopened.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_op_ids WHERE server_seq <= 500") } == sealedIDs)
        #expect(FileManager.default.fileExists(atPath: path + ".backup-v3"))
        let columns = try reopened.read { db in try db.query("SELECT name FROM pragma_table_info('chronicle_snapshots') ORDER BY cid") { $0.text(0) } }
        #expect(columns == ["seq", "state_digest", "body_bytes", "created_at", "body"])
        #expect(try reopened.read { db in try db.query("SELECT body FROM chronicle_snapshots ORDER BY seq") { $0.withBytes(0) { [UInt8]($0) } } } == frames)
        #expect(try reopened.verify().passed)
        #expect(try reopened.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_segment_filters") } == 0,
                "segments sealed by v3 have no entity filter (they are opened as before)")
        #expect(try reopened.rebuild().digest == digest, "rebuild starts from the moved snapshot")
        // The trigger on chronicle_segments that names the table still guards it: without a
        // snapshot behind them, sealed segments cannot be dropped.
        #expect(throws: SQLiteError.self) {
            try reopened.writer.withLock { db in
                try db.transaction { db in
                    try db.execute("DELETE FROM chronicle_snapshots")
                    try db.execute("DELETE FROM chronicle_segments")
                }
            }
        }
        #expect(try reopened.snapshotSeqs().count == frames.count, "the refused transaction changed nothing")
    }

    @Test("Each sealed segment gets an entity filter; audits read the same with or without them, and verify checks them")
    func entityFiltersBesideSegments() throws {
        let f = try Fixture()
        let articles = try Self.library(f, count: 1_500, seed: 21)
        let audits = try articles.prefix(40).map { try f.store.audit($0).entries.map(\.op.opID) }
        let policy = Self.policy(keepOps: 100, segmentOpsMax: 350)
        try f.store.compact(policy)
        let segments = try f.store.segments()
        let filters = try f.store.read { db in try db.query("SELECT first_seq FROM chronicle_segment_filters ORDER BY first_seq") { $0.int(0) } }
        #expect(segments.count == 4 && filters == segments.map(\.firstSeq))
        #expect(try articles.prefix(40).map { try f.store.audit($0).entries.map(\.op.opID) } == audits, "filtered reads find the whole history")
        #expect(try f.store.verify().passed)

        // A filter that leaves out an entity would hide its history: verify says so.
        try f.store.writer.withLock { db in
            let zeros = SegmentFilter(ids: [UUID]()).bytes
            try db.statement("UPDATE chronicle_segment_filters SET filter = ?1 WHERE first_seq = ?2").execute([.null, .integer(segments[1].firstSeq)], blob: zeros, at: 1)
        }
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.contains { !$0.passed && $0.detail.contains("entity filter that leaves out") })

        // Segments sealed before filters existed have none and are opened as before.
        try f.store.writer.withLock { try $0.execute("DELETE FROM chronicle_segment_filters") }
        #expect(try articles.prefix(40).map { try f.store.audit($0).entries.map(\.op.opID) } == audits)
        #expect(try f.store.verify().passed)
    }

    @Test("With segments in place the log's guards still hold: no gap after the sealed end, no unsealed row deleted, no segment past the prefix")
    func sealedPrefixGuardsHold() throws {
        let f = try Fixture()
        _ = try Self.library(f, count: 900, seed: 31)
        let policy = Self.policy(keepOps: 200, segmentOpsMax: 300)
        try f.store.compact(policy)
        let sealedEnd = try #require(f.store.segments().last?.lastSeq)
        #expect(sealedEnd == 700)
        func refusal(_ sql: String) -> String? {
            do {
                try f.store.writer.withLock { db in try db.transaction { db in try db.execute(sql) } }
                return nil
            } catch let error as SQLiteError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal("INSERT INTO chronicle_log_blocks(first_seq, last_seq, newest_time, filter, body) VALUES (902, 902, 0, x'00', x'00')")?
            .contains("without a gap") == true)
        #expect(refusal("INSERT INTO chronicle_log_blocks(first_seq, last_seq, newest_time, filter, body) VALUES (700, 700, 0, x'00', x'00')")?
            .contains("without a gap") == true)
        #expect(refusal("DELETE FROM chronicle_log_blocks WHERE last_seq > 700")?.contains("only blocks sealed") == true)
        #expect(refusal("""
            INSERT INTO chronicle_segments(first_seq, last_seq, op_count, body, digest, previous_digest, body_bytes, created_at)
            VALUES (705, 710, 6, x'00', '', '', 0, 0)
            """)?.contains("continue the sealed prefix") == true)
        #expect(try f.store.verify().passed, "the refused statements changed nothing")
        #expect(try f.store.status().confirmedOps == 900)
    }

    @Test("Ops too large for one segment body are split across segments, each under the cap and read back whole")
    func largeOpsSplitIntoSegmentsUnderTheBodyCap() throws {
        let server = ServerLog(library: UUID(), seed: 3)
        let title = String(repeating: "offline first ", count: 15_000)   // 210 KB, under the 256 KB op cap
        let ops = (0..<170).map { i in
            server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://example.com/\(i)"), "title": .text(title)])
        }
        let segments = try LogTables.encodeSegments(ops[...], libraryID: server.library, opsMax: 10_000)
        #expect(segments.count == 2)
        #expect(segments.allSatisfy { $0.body.count <= LogTables.segmentBodyBytesMax })
        #expect(segments.map(\.firstSeq) == [1, segments[0].lastSeq + 1] && segments.last?.lastSeq == 170)
        let decoded = try segments.flatMap { try SegmentCodec.decode($0.frame).ops }
        #expect(decoded == ops)
        // Under the cap, one segment per `opsMax` ops.
        #expect(try LogTables.encodeSegments(ops[..<20], libraryID: server.library, opsMax: 8).map(\.lastSeq) == [8, 16, 20])
    }

    @Test func compactionKeepsTheStateTheHistoryAndTheInvariants() throws {
        let f = try Fixture()
        let articles = try Self.library(f, count: 2_000, seed: 5)
        try f.store.write("article.tag", entity: articles[0], payload: ["tag": .text("pending")])
        let before = try f.store.digest()
        let auditBefore = try f.store.audit(articles[0])

        let policy = Self.policy(keepOps: 300, segmentOpsMax: 400)
        let plan = try f.store.compactionPlan(policy)
        #expect(plan.sealThrough == 1_700 && plan.segmentsToWrite == 5 && plan.snapshotAt == 1_700)
        let report = try f.store.compact(policy)
        #expect(report.segmentsWritten == 5 && report.opsSealed == 1_700)
        #expect(report.segmentFrameBytes < report.logBytesSealed, "segments are smaller than the log's blocks")
        #expect(report.fileBytesAfter < report.fileBytesBefore, "space goes back to the file system (the WAL included)")
        #expect(try f.store.digest() == before)
        #expect(try f.store.verify().passed)
        #expect(try f.store.status().confirmedOps == 2_000)
        #expect(try f.store.segments().map(\.firstSeq) == [1, 401, 801, 1_201, 1_601])

        // Audit and the log read sealed segments: the whole history is still there.
        let auditAfter = try f.store.audit(articles[0])
        #expect(auditAfter.entries.map(\.op.opID) == auditBefore.entries.map(\.op.opID))
        #expect(auditAfter.state == auditBefore.state)
        #expect(try f.store.confirmedOps(limit: 5_000).count == 2_000)

        // Rebuild from the snapshot and from the first op agree.
        #expect(try f.store.rebuild().digest == before)
        #expect(try f.store.rebuild(fromGenesis: true).digest == before)

        // The log goes on growing after the sealed prefix; sealed op ids still apply at most once.
        let server = ServerLog(library: f.store.libraryID, seed: 77)
        server.seq = 2_000
        try f.store.applyConfirmed([server.op("article.tag", entity: articles[1], from: UUID(), payload: ["tag": .text("after")])])
        let sealedOp = try f.store.confirmedOps(limit: 1)[0]
        var again = server.op("article.tag", entity: articles[1], from: UUID(), payload: ["tag": .text("again")])
        again.opID = sealedOp.opID
        #expect(throws: ChronicleError.self) { try f.store.applyConfirmed([again]) }
        #expect(try f.store.verify().passed)

        // Nothing left to seal: a second run changes nothing.
        #expect(try f.store.compactionPlan(policy).opsToSeal == 1)
    }

    @Test("A device's compaction leaves out a snapshot that would make its store larger, says so, and keeps it when asked")
    func aSnapshotThatWouldGrowTheStoreIsLeftOut() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID, seed: 11)
        let rng = SeededIDGenerator(seed: 13)
        let device = rng.makeUUID()
        // Each article saved once with a long title of random hex: the state is as large as the log,
        // so sealing saves little and a snapshot of the state costs about as much as the log.
        func saves(_ count: Int) -> [Op] {
            (0..<count).map { i in
                server.op("article.save", entity: rng.makeUUID(), from: device, payload: [
                    "url": .text("https://example.com/\(i)"),
                    "title": .text((0..<40).map { _ in rng.makeUUID().lowercased }.joined(separator: " ")),
                ])
            }
        }
        try f.store.applyConfirmed(saves(600))
        let state = try f.store.digest()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        let report = try f.store.compact(policy)
        #expect(report.opsSealed == 600 && report.plan.snapshotAt == 600)
        #expect(report.snapshotSeq == nil && (report.snapshotLeftOut ?? 0) > 100_000, "\(report)")
        #expect(report.fileBytesAfter <= report.fileBytesBefore, "\(report.fileBytesBefore) → \(report.fileBytesAfter)")
        #expect(try f.store.snapshotSeqs().isEmpty)
        // Kept, the snapshot would have made the store larger.
        #expect(Int64(try f.store.pageCount()) * 4096 + (report.snapshotLeftOut ?? 0) > report.fileBytesAfter)
        #expect(try f.store.digest() == state)
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild().digest == state, "a rebuild replays the sealed segments instead")

        // Asked to keep it, it is kept whatever it costs.
        try f.store.applyConfirmed(saves(100))
        policy.keepsSnapshotThatGrowsFile = true
        let kept = try f.store.compact(policy)
        #expect(kept.snapshotSeq == 700 && kept.snapshotLeftOut == nil)
        #expect(try f.store.snapshotSeqs() == [700])
        #expect(try f.store.verify().passed)
    }

    @Test func aSnapshotPlusTheOpsAfterItRebuildsWhatTheFullLogDoes() throws {
        for seed in 1...6 as ClosedRange<UInt64> {
            let f = try Fixture(seed: seed)
            try Self.library(f, count: 300 + Int(seed) * 50, seed: seed)
            let cursor = try f.store.cursor()
            let rng = SeededIDGenerator(seed: seed)
            let at = Int64(rng.next() % UInt64(cursor)) + 1
            let (snapshot, digestAt) = try f.store.read { db in
                try DeviceStore.stateSnapshot(at: at, source: db, f.store.materializer, f.store.projection, libraryID: f.store.libraryID, progress: nil)
            }
            #expect(try f.store.replayDigest(upTo: at) == digestAt, "seed \(seed): the snapshot is the state at \(at)")
            let decoded = try SnapshotCodec.decode(SnapshotCodec.encode(snapshot))
            #expect(decoded == snapshot)
            // What compaction writes: the body streamed from the rows as they are read, byte for byte
            // the encoding of the same snapshot, with the same digest.
            let streamed = try f.store.read { db in
                try DeviceStore.stateSnapshotBody(at: at, source: db, f.store.materializer, f.store.projection, libraryID: f.store.libraryID, progress: nil)
            }
            #expect(streamed.body == SnapshotCodec.encodeBody(snapshot) && streamed.digest == digestAt, "seed \(seed)")
            let scratch = try ProjectionTables.scratchProjection(f.store.projection)
            try ProjectionTables.load(decoded, into: scratch, f.store.projection, libraryID: f.store.libraryID)
            try f.store.read { db in
                _ = try ProjectionTables.replay(from: db, into: scratch, f.store.materializer, f.store.projection, after: at, upTo: nil,
                                           includePending: false, progress: nil)
            }
            #expect(try ProjectionTables.digest(f.store.projection, in: scratch) == f.store.digest(), "seed \(seed), S = \(at)")
        }
    }

    @Test("A snapshot many hand-over chunks long: refused at its header or its end, nothing changes; whole, the source's state")
    func aLongSnapshotIsReadOnAnotherThreadAndStillAllOrNothing() throws {
        let source = try Fixture(seed: 31)
        try Self.library(source, count: 16_000, seed: 31)
        let at = try source.store.cursor()
        let (snapshot, digestAt) = try source.store.read { db in
            try DeviceStore.stateSnapshot(at: at, source: db, source.store.materializer, source.store.projection,
                                          libraryID: source.store.libraryID, progress: nil)
        }
        // More rows than the reading thread may hand over before the writer takes any (4 chunks).
        #expect(snapshot.tables.map(\.rows.count).reduce(0, +) > 5 * LogTables.prefetchChunkOps)
        let bytes = SnapshotCodec.encode(snapshot)
        let device = try Fixture(seed: 32, library: source.store.libraryID)
        try device.save("https://example.com/queued", title: "queued")
        let before = try device.store.digest()
        var damaged = bytes
        damaged[bytes.count - 20] ^= 0x01   // found by the checksum at the end, after every row
        let other = SnapshotFrame(Snapshot(libraryID: UUID(), seq: snapshot.seq, schemaName: snapshot.schemaName,
                                           schemaVersion: snapshot.schemaVersion, schemaFingerprint: snapshot.schemaFingerprint,
                                           tables: snapshot.tables))   // refused at the header, while the reader waits for room
        for frame in [SnapshotFrame(bytes: damaged), other] {
            #expect(throws: ChronicleError.self) { try device.store.bootstrap(from: frame) }
            #expect(try device.store.digest() == before)
            #expect(try device.store.cursor() == 0)
        }
        #expect(try device.store.bootstrap(from: SnapshotFrame(bytes: bytes)) == at)
        #expect(try device.store.replayDigest(upTo: at) == digestAt)
        #expect(try device.store.verify().passed)
    }

    @Test func aDeviceStartsOverFromASnapshotFileAndADamagedOneChangesNothing() throws {
        let source = try Fixture(seed: 21)
        try Self.library(source, count: 800, seed: 21)
        let at = try source.store.cursor()
        let (snapshot, digestAt) = try source.store.read { db in
            try DeviceStore.stateSnapshot(at: at, source: db, source.store.materializer, source.store.projection,
                                          libraryID: source.store.libraryID, progress: nil)
        }
        let bytes = SnapshotCodec.encode(snapshot)

        let device = try Fixture(seed: 22, library: source.store.libraryID)
        let queued = try device.save("https://example.com/queued", title: "written on the plane")
        let before = try device.store.digest()

        // Damaged (a flipped byte, a cut), or of another library: refused, and the store is as it was.
        var damaged = bytes
        damaged[bytes.count / 2] ^= 0x01
        let other = SnapshotFrame(Snapshot(libraryID: UUID(), seq: snapshot.seq, schemaName: snapshot.schemaName,
                                           schemaVersion: snapshot.schemaVersion, schemaFingerprint: snapshot.schemaFingerprint,
                                           tables: snapshot.tables))
        for frame in [SnapshotFrame(bytes: damaged), SnapshotFrame(bytes: Array(bytes.dropLast(9))), other] {
            #expect(throws: ChronicleError.self) { try device.store.bootstrap(from: frame) }
            #expect(try device.store.digest() == before)
            #expect(try device.store.cursor() == 0)
            #expect(try device.store.verify().passed)
        }

        // From a file, read as it goes: the snapshot's state with the queued op on top.
        let path = device.directory.appendingPathComponent("download").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        #expect(try device.store.bootstrap(from: SnapshotFrame(file: path, temporary: true)) == at)
        #expect(try device.store.cursor() == at)
        #expect(try device.store.pendingOps().map(\.entityID) == [queued])
        #expect(try device.store.row(queued) != nil, "the queued op still shows")
        #expect(try device.store.verify().passed)
        #expect(try device.store.replayDigest(upTo: at) == digestAt, "history starts at the snapshot, whose state is the source's")
        // The kept snapshot is the frame as it came, byte for byte.
        let kept = try device.store.read { db in try db.query("SELECT body FROM chronicle_snapshots WHERE seq = ?1", [.integer(at)]) { $0.withBytes(0) { [UInt8]($0) } } }
        #expect(kept == [bytes])
    }

    @Test func aBootstrapThatFoldsItsTailEqualsPullingTheTailAfterwards() throws {
        let source = try Fixture(seed: 23)
        try Self.library(source, count: 900, seed: 23)
        let end = try source.store.cursor()
        let at = end - 200
        let (snapshot, _) = try source.store.read { db in
            try DeviceStore.stateSnapshot(at: at, source: db, source.store.materializer, source.store.projection,
                                          libraryID: source.store.libraryID, progress: nil)
        }
        let frame = SnapshotFrame(snapshot)
        #expect(try SnapshotCodec.header(of: frame).seq == at)
        let tail = try source.store.confirmedOps(after: at)
        #expect(tail.count == 200)

        // Refused, and nothing changed: a tail with a gap, or from another library.
        let refused = try Fixture(seed: 24, library: source.store.libraryID)
        let before = try refused.store.digest()
        let gap = #expect(throws: ChronicleError.self) { try refused.store.bootstrap(from: frame, tail: Array(tail.dropFirst())) }
        #expect(gap?.code == .logGap)
        var foreign = tail
        foreign[0].libraryID = UUID()
        let wrong = #expect(throws: ChronicleError.self) { try refused.store.bootstrap(from: frame, tail: foreign) }
        #expect(wrong?.code == .wrongLibrary)
        #expect(try refused.store.digest() == before)
        #expect(try refused.store.cursor() == 0)

        let folded = try Fixture(seed: 25, library: source.store.libraryID)
        let queued = try folded.save("https://example.com/queued", title: "tunnel written offline")
        #expect(try folded.store.bootstrap(from: frame, tail: tail) == at)
        #expect(try folded.store.cursor() == end)
        #expect(try folded.store.confirmedOps(after: at) == tail, "the tail joined the log")

        let pulled = try Fixture(seed: 25, library: source.store.libraryID)  // the same device, ids and clock
        _ = try pulled.save("https://example.com/queued", title: "tunnel written offline")
        try pulled.store.bootstrap(from: frame)
        try pulled.store.applyConfirmed(tail)

        #expect(try folded.store.digest() == pulled.store.digest())
        #expect(try folded.store.row(queued) != nil, "the queued op still shows")
        for query in ["tunnel", "renamed", "snapshot", "plane"] {
            #expect(try folded.store.search(query, limit: 100).map(\.id) == pulled.store.search(query, limit: 100).map(\.id), "\(query)")
        }
        #expect(try folded.store.verify().passed)
        // A frame cut before its header has none to give.
        let cut = SnapshotFrame(bytes: Array(SnapshotCodec.encode(snapshot).prefix(8)))
        #expect(throws: ChronicleError.self) { try SnapshotCodec.header(of: cut) }
    }

    @Test func interruptedAfterAnyStepTheStoreIsWholeAndCompactionCanFinish() throws {
        struct Stop: Error {}
        let policy = Self.policy(keepOps: 100, segmentOpsMax: 250)
        var steps = 0
        repeat {
            steps += 1
            let f = try Fixture(seed: 9)
            try Self.library(f, count: 1_000, seed: 9)
            let before = try f.store.digest()
            var stoppedAt = 0
            do {
                try f.store.compact(policy, afterStep: { step, _ in if step == steps { stoppedAt = step; throw Stop() } })
            } catch is Stop {}
            let reopened = try DeviceStore.open(at: f.path)
            #expect(try reopened.digest() == before, "stopped after step \(steps)")
            #expect(try reopened.verify().passed, "stopped after step \(steps)")
            try reopened.compact(policy)
            #expect(try reopened.digest() == before)
            #expect(try reopened.segments().count == 4)
            if stoppedAt == 0 { break }   // the run finished before reaching this step: every step was covered
        } while steps < 20
        #expect(steps == 7, "4 segments, the snapshot and the VACUUM: 6 steps, then a run that completes")
    }

    @Test func aHorizonDropsOldHistoryAndAuditSaysWhereHistoryBegins() throws {
        let f = try Fixture(seed: 3)
        let articles = try Self.library(f, count: 600, seed: 3)
        let before = try f.store.digest()
        var policy = Self.policy(keepOps: 100, segmentOpsMax: 200)
        // The horizon is measured from the newest server time the store holds, never by the
        // device's clock (moved 400 days on here, to no effect): ServerLog stamps ops a second
        // apart, so a 50-second horizon makes everything up to seq 500 old (the newest is at 600 s).
        policy.horizonMilliseconds = 50_000
        f.clock.advance(milliseconds: 400 * 86_400_000)
        let report = try f.store.compact(policy)
        #expect(report.historyDroppedThrough == 500)
        #expect(try f.store.segments().isEmpty)
        #expect(try f.store.historyStart().seq == 501)
        #expect(try f.store.digest() == before)
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild().digest == before)
        #expect(throws: ChronicleError.self) { try f.store.rebuild(fromGenesis: true) }
        let audit = try f.store.audit(articles[0])
        #expect(audit.historyBeginsAt == 501)
        #expect(audit.state != nil)
    }

    /// A library still in use: its old history is past the horizon, its newest ops are not. The
    /// drop point (the end of the last segment older than the horizon) has no snapshot of its
    /// own, so compaction writes one there first: history begins at it, and the state there is known.
    /// 900 ops: 600 from 400 days ago, then 300 from now (the fixture's clock is set just after them).
    static func agedLibrary(_ f: Fixture) throws {
        let server = ServerLog(library: f.store.libraryID, seed: 12)
        let device = UUID()
        var articles: [UUID] = []
        var ops: [Op] = []
        for i in 0..<900 {
            if i == 600 { server.time += 400 * 86_400_000 }   // then the library is used again, 400 days later
            if i % 3 == 0 || articles.isEmpty {
                articles.append(UUID())
                ops.append(server.op("article.save", entity: articles.last!, from: device, payload: ["url": .text("https://example.com/\(i)")]))
            } else {
                ops.append(server.op("article.tag", entity: articles[i % articles.count], from: device, payload: ["tag": .text("t\(i % 5)")]))
            }
        }
        for start in stride(from: 0, to: ops.count, by: 300) { try f.store.applyConfirmed(Array(ops[start..<start + 300])) }
        f.clock.set(milliseconds: server.time + 1_000)
    }

    /// `agedLibrary` in a fresh fixture, its digest, and a policy that keeps 100 ops hot, seals
    /// segments of 200 and drops history older than a day.
    static func agedLibraryWithAHorizon() throws -> (Fixture, digest: String, CompactionPolicy) {
        let f = try Fixture(seed: 12)
        try agedLibrary(f)
        var policy = policy(keepOps: 100, segmentOpsMax: 200)
        policy.horizonMilliseconds = 86_400_000
        return (f, try f.store.digest(), policy)
    }

    @Test func aHorizonInsideHistoryWritesTheSnapshotHistoryThenBeginsAt() throws {
        let (f, before, policy) = try Self.agedLibraryWithAHorizon()
        let plan = try f.store.compactionPlan(policy)
        #expect(plan.sealThrough == 800 && plan.snapshotAt == 800)
        #expect(plan.dropThrough == 600 && plan.snapshotAtDrop == 600)
        #expect(plan.snapshotAtHead, "nothing pending: the newest snapshot is read from the tables at the head, 900")
        let report = try f.store.compact(policy)
        #expect(report.snapshotSeq == 900)
        #expect(report.historyDroppedThrough == 600)
        #expect(try f.store.snapshotSeqs() == [600, 900])
        #expect(try f.store.segments().map(\.firstSeq) == [601])
        #expect(try f.store.historyStart().seq == 601)
        #expect(try f.store.digest() == before)
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild().digest == before)
        // The next compaction has nothing to drop, and keeps the snapshot history begins at.
        let again = try f.store.compact(policy)
        #expect(again.historyDroppedThrough == nil && again.opsSealed == 0)
        #expect(try f.store.snapshotSeqs() == [600, 900])
        #expect(try f.store.verify().passed)
    }

    /// Another compaction on the same file (a second process) deleted the snapshot this one wrote
    /// where history was to begin: the drop is skipped, the store stays whole, and the next run drops.
    @Test func aHorizonDropWithoutItsSnapshotIsSkippedAndTheNextRunDropsIt() throws {
        let (f, before, policy) = try Self.agedLibraryWithAHorizon()
        let report = try f.store.compact(policy, afterStep: { _, what in
            if what == "wrote the snapshot at seq 600" {
                try f.store.writer.withLock { db in try db.execute("DELETE FROM chronicle_snapshots WHERE seq = 600") }
            }
        })
        #expect(report.historyDroppedThrough == nil && report.opsSealed == 800)
        #expect(try f.store.historyStart().seq == 1)
        #expect(try f.store.verify().passed)
        #expect(try f.store.digest() == before)
        let again = try f.store.compact(policy)
        #expect(again.historyDroppedThrough == 600 && again.plan.snapshotAtDrop == 600)
        #expect(try f.store.historyStart().seq == 601)
        #expect(try f.store.verify().passed)
        #expect(try f.store.digest() == before)
    }

    @Test func aHorizonCompactionStoppedAfterAnyStepLeavesAWholeStore() throws {
        struct Stop: Error {}
        // 4 segments, the snapshot at the drop point, the one at the seal point, the drop, the VACUUM.
        for steps in 1...8 {
            let (f, before, policy) = try Self.agedLibraryWithAHorizon()
            #expect(throws: Stop.self) { try f.store.compact(policy, afterStep: { step, _ in if step == steps { throw Stop() } }) }
            let reopened = try DeviceStore.open(at: f.path)
            #expect(try reopened.digest() == before, "stopped after step \(steps)")
            #expect(try reopened.verify().passed, "stopped after step \(steps)")
            let rest = try reopened.compact(policy)
            #expect(try reopened.historyStart().seq == 601, "stopped after step \(steps): \(rest)")
            #expect(try reopened.snapshotSeqs() == [600, 900], "stopped after step \(steps)")
            #expect(try reopened.digest() == before)
            #expect(try reopened.verify().passed)
        }
    }

    /// Each article's audit as entries (op ids) and state, to compare before and after.
    static func audits(_ store: DeviceStore, _ articles: [UUID]) throws -> [String] {
        try articles.map { id in
            let audit = try store.audit(id)
            let state = audit.state.map { state in state.keys.sorted().map { "\($0)=\(state[$0]!)" } } ?? []
            return "\(audit.entries.map(\.op.opID)) \(state)"
        }
    }

    @Test("The newest snapshot: read from the tables at the head when nothing is pending, replayed to the seal point otherwise; where history begins, exact")
    func theNewestSnapshotIsReadAtTheHeadWhenNothingIsPending() throws {
        let policy = Self.policy(keepOps: 100, segmentOpsMax: 250)
        let synced = try Fixture(seed: 18)
        try Self.library(synced, count: 1_000, seed: 118)
        let before = try synced.store.digest()
        #expect(try synced.store.compactionPlan(policy).snapshotAtHead)
        let head = try synced.store.compact(policy)
        #expect(head.plan.snapshotAt == 900 && head.snapshotSeq == 1_000)
        #expect(try synced.store.snapshotSeqs() == [1_000])
        #expect(try synced.store.rebuild().digest == before)
        #expect(try synced.store.rebuild(fromGenesis: true).digest == before)
        #expect(try synced.store.verify().passed)

        let pending = try Fixture(seed: 19)
        try Self.library(pending, count: 1_000, seed: 119)
        _ = try pending.save("https://example.com/offline", title: "written in zanzibar")
        let withPending = try pending.store.digest()
        #expect(try !pending.store.compactionPlan(policy).snapshotAtHead)
        let exact = try pending.store.compact(policy)
        #expect(exact.snapshotSeq == 900)
        #expect(try pending.store.snapshotSeqs() == [900])
        #expect(try pending.store.rebuild().digest == withPending)
        #expect(try pending.store.verify().passed)
        // The snapshot holds the confirmed state at 900 only: the pending save is not in it.
        let bytes = try #require(try pending.store.read { db in
            try db.query("SELECT body FROM chronicle_snapshots WHERE seq = 900") { $0.withBytes(0) { [UInt8]($0) } }
        }.first)
        let fresh = try Fixture(seed: 20, library: pending.store.libraryID)
        #expect(try fresh.store.bootstrap(from: SnapshotFrame(bytes: bytes)) == 900)
        #expect(try fresh.store.search("zanzibar", limit: 10).isEmpty)
        #expect(try pending.store.search("zanzibar", limit: 10).count == 1)
    }

    @Test("Local writes between a large seal's segments: searchable at once, kept out of the snapshot, which is then replayed to the seal point")
    func writesDuringALargeSealAreKeptAndTheSnapshotIsReplayed() throws {
        let f = try Fixture(seed: 22)
        let articles = Array(try Self.library(f, count: 1_200, seed: 122).prefix(20))
        let policy = Self.policy(keepOps: 200, segmentOpsMax: 250)
        #expect(try f.store.compactionPlan(policy).snapshotAtHead, "nothing pending when planned")
        var written: [UUID] = []
        let report = try f.store.compact(policy, afterStep: { step, what in
            guard what == "sealed a segment", step <= 2 else { return }
            written.append(try f.save("https://example.com/during-\(step)", title: "quokka \(step)"))
            #expect(try f.store.search("quokka", limit: 10).count == step)
            #expect(try f.store.audit(written.last!).entries.count == 1, "its own history, between the seal's segments")
        })
        // A write landed before the snapshot: it holds the confirmed state at the seal point only.
        #expect(report.snapshotSeq == 1_000)
        #expect(try f.store.pendingOps().count == 2)
        #expect(try f.store.search("quokka", limit: 10).count == 2)
        #expect(try f.store.verify().passed)
        let digest = try f.store.digest()
        #expect(try f.store.rebuild().digest == digest)
        #expect(try f.store.rebuild(fromGenesis: true).digest == digest)
        for id in articles { #expect(try f.store.audit(id).entries.isEmpty == false) }
    }

    @Test("Segments read ahead on another thread: another compaction on the file sealing meanwhile leaves one whole chain")
    func aCompactionAlongsideAnotherOnTheSameFileLeavesOneWholeChain() throws {
        let f = try Fixture(seed: 17)
        try Self.library(f, count: 1_600, seed: 17)
        let before = try f.store.digest()
        var policy = Self.policy(keepOps: 100, segmentOpsMax: 250)
        policy.givesSpaceBack = false
        let other = try DeviceStore.open(at: f.path)   // a second process on the same file
        var otherReport: CompactionReport?
        let report = try f.store.compact(policy, afterStep: { step, _ in
            // After the first segment, with the next one read ahead: the other seals the rest.
            if step == 1 { otherReport = try other.compact(policy) }
        })
        #expect(report.segmentsWritten == 1)
        #expect(otherReport?.segmentsWritten == 5)
        let segments = try f.store.segments()
        #expect(segments.map(\.firstSeq) == [1, 251, 501, 751, 1_001, 1_251])
        #expect(zip(segments.dropFirst(), segments).allSatisfy { $0.previousDigest == $1.digest }, "one chain")
        #expect(try f.store.digest() == before)
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild().digest == before)
    }

    @Test("A seal that fails after two segments leaves a whole store, and the next one carries on")
    func aFailedSealLeavesAWholeStore() throws {
        struct Stop: Error {}
        let f = try Fixture(seed: 15)
        try Self.library(f, count: 1_200, seed: 15)
        let before = try f.store.digest()
        let policy = Self.policy(keepOps: 200, segmentOpsMax: 250)
        #expect(throws: Stop.self) {
            try f.store.compact(policy, afterStep: { step, _ in if step == 2 { throw Stop() } })
        }
        #expect(try f.store.segments().count == 2)
        #expect(try f.store.verify().passed)
        try f.store.compact(policy)
        #expect(try f.store.segments().count == 4)
        #expect(try f.store.digest() == before)
    }

    @Test func aTamperedSegmentFailsVerify() throws {
        let f = try Fixture(seed: 4)
        try Self.library(f, count: 400, seed: 4)
        let policy = Self.policy(keepOps: 0, segmentOpsMax: 200)
        try f.store.compact(policy)
        #expect(try f.store.verify().passed)
        try f.store.writer.withLock { db in
            try db.execute("DROP TRIGGER chronicle_segments_immutable")
            try db.execute("UPDATE chronicle_segments SET previous_digest = 'forged' WHERE first_seq = 201")
        }
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.contains { $0.detail.contains("not chained") })
    }

    @Test func aSealedSegmentOpensWithTheLZ4Tool() throws {
        let f = try Fixture(seed: 6)
        try Self.library(f, count: 300, seed: 6)
        var policy = CompactionPolicy()
        policy.keepOps = 0
        try f.store.compact(policy)
        let frame = try #require(try f.store.segmentFrame(firstSeq: 1))
        let path = f.directory.appendingPathComponent("segment.lz4").path
        try Data(frame).write(to: URL(fileURLWithPath: path))
        let decompressed = try ChildProcess.run("/usr/bin/lz4", ["-d", "-c", path])
        #expect(decompressed.status == 0)
        #expect(decompressed.output.prefix(4).elementsEqual("CHSG".utf8))
        #expect(try SegmentCodec.decodeBody(decompressed.output).ops.count == 300)
    }
}
