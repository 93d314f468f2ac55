import ChronicleCore
@testable import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// The device's hot log kept in blocks (store format v9): sealing whole blocks, runs of small
/// ones, seal points inside a block, rewinds into one, and the migration from rows.
@Suite struct BlockLogTests {
    /// Lays a v9 store out as store format v8 kept it: the hot log a row per op
    /// (`chronicle_log`, with its guard triggers and entity index), the sealed ids apart
    /// (`chronicle_sealed_ids`), and the outbox's guards reading them. Inside one transaction.
    static func downgradeToFormat8(_ store: DeviceStore) throws {
        let libraryID = store.libraryID
        try store.writer.withLock { db in
            try db.transaction { db in
                let sealed = try LogTables.sealedUpTo(in: db)
                var hot: [Op] = []
                try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: sealed) { hot.append($0) }
                try db.execute("""
                    CREATE TABLE chronicle_sealed_ids (
                      op_id BLOB PRIMARY KEY NOT NULL CHECK (typeof(op_id) = 'blob' AND length(op_id) = 16),
                      server_seq INTEGER NOT NULL
                    ) WITHOUT ROWID
                    """)
                try db.execute("INSERT INTO chronicle_sealed_ids SELECT op_id, server_seq FROM chronicle_op_ids WHERE server_seq <= ?1", [.integer(sealed)])
                try db.execute("DROP TRIGGER chronicle_outbox_once")
                try db.execute("DROP TRIGGER chronicle_outbox_leaves_when_settled")
                for table in ["chronicle_log_blocks", "chronicle_own_confirmed", "chronicle_op_ids"] { try db.execute("DROP TABLE \(table)") }
                for statement in StoreFormat.logStatements { try db.execute(statement) }
                try db.execute("DROP TRIGGER chronicle_log_append_only_delete")
                try db.execute("DROP TRIGGER chronicle_log_gap_free")
                try db.execute(StoreFormat.keyedGuardStatements[3])   // chronicle_log_leaves_only_sealed
                try db.execute(StoreFormat.keyedGuardStatements[5])   // chronicle_log_gap_free
                try db.execute(try #require(StoreFormat.version1.first { $0.contains("TRIGGER chronicle_outbox_once") }))
                try db.execute(try #require(StoreFormat.version5.last))   // chronicle_outbox_leaves_when_settled
                let insert = try db.statement("INSERT INTO chronicle_log(\(LogTables.logColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")
                for op in hot { try insert.execute(LogTables.logArguments(op)) }
                try db.execute("UPDATE chronicle_meta SET value = 8 WHERE key = 'format_version'")
            }
        }
    }

    /// A library of `count` ops applied in batches of `batch`, every seventh op this device's own.
    static func library(_ f: Fixture, count: Int, batch: Int, seed: UInt64) throws {
        // (Other seeds than the fixture's id generator: the ids must not meet the ones it makes.)
        let server = ServerLog(library: f.store.libraryID, seed: seed &+ 1_000)
        let rng = SeededIDGenerator(seed: seed &* 31 &+ 1_000)
        var ops: [Op] = []
        var articles: [UUID] = []
        for n in 0..<count {
            let device = n % 7 == 3 ? f.store.deviceID : rng.makeUUID()
            if articles.isEmpty || rng.next() % 4 == 0 {
                let id = rng.makeUUID()
                articles.append(id)
                ops.append(server.op("article.save", entity: id, from: device, payload: ["url": .text("https://example.com/\(n)"), "title": .text("title \(n)")]))
            } else {
                let id = articles[Int(rng.next() % UInt64(articles.count))]
                ops.append(server.op("article.update", entity: id, from: device, payload: ["title": .text("renamed \(n)")]))
            }
        }
        for start in stride(from: 0, to: ops.count, by: batch) { try f.store.applyConfirmed(Array(ops[start..<min(ops.count, start + batch)])) }
    }

    static func blocks(_ store: DeviceStore) throws -> [[Int64]] {
        try store.read { db in try db.query("SELECT first_seq, last_seq FROM chronicle_log_blocks ORDER BY first_seq") { [$0.int(0), $0.int(1)] } }
    }

    static func ownConfirmed(_ store: DeviceStore) throws -> [[String]] {
        try store.read { db in
            try db.query("SELECT server_seq, device_seq, op_id FROM chronicle_own_confirmed ORDER BY server_seq") { ["\($0.int(0))", "\($0.int(1))", $0.text(2)] }
        }
    }

    @Test("A batch is one block; a block that fits a segment is sealed whole, its body the segment's, byte for byte")
    func largeBlocksAreSealedWhole() throws {
        let f = try Fixture(seed: 1)
        try Self.library(f, count: 1_500, batch: 500, seed: 1)
        #expect(try Self.blocks(f.store) == [[1, 500], [501, 1_000], [1_001, 1_500]])
        let bodies = try f.store.read { db in try db.query("SELECT body FROM chronicle_log_blocks ORDER BY first_seq") { $0.withBytes(0) { Array($0) } } }
        let before = try f.store.digest()
        let report = try f.store.compact(CompactionTests.policy(keepOps: 500, segmentOpsMax: 10_000))
        #expect(report.opsSealed == 1_000 && report.segmentsWritten == 2)
        let segments = try f.store.segments()
        #expect(segments.map { [$0.firstSeq, $0.lastSeq] } == [[1, 500], [501, 1_000]])
        for (segment, body) in zip(segments, bodies) {
            let frame = try #require(try f.store.segmentFrame(firstSeq: segment.firstSeq))
            #expect(try LZ4Frame.decompress(frame, maxBytes: 64 << 20) == body)
        }
        #expect(try Self.blocks(f.store) == [[1_001, 1_500]])
        #expect(try f.store.digest() == before)
        #expect(try f.store.verify().passed)
        #expect(try f.store.confirmedOps().count == 1_500)
    }

    @Test("Runs of small blocks are encoded again into one segment; a seal point inside a block leaves it until sealing passes its end")
    func smallBlocksMergeAndASealPointInsideABlockKeepsIt() throws {
        let f = try Fixture(seed: 2)
        try Self.library(f, count: 400, batch: 10, seed: 2)   // blocks of 10 ops
        let before = try f.store.digest()
        let all = try f.store.confirmedOps()
        let report = try f.store.compact(CompactionTests.policy(keepOps: 95, segmentOpsMax: 100))
        #expect(report.opsSealed == 305)
        #expect(try f.store.segments().map(\.lastSeq) == [100, 200, 300, 305])
        // The block 301…310 straddles the sealed end: its ops up to 305 are read from the segment.
        #expect(try Self.blocks(f.store).first == [301, 310])
        #expect(try f.store.confirmedOps() == all)
        #expect(try f.store.verify().passed)
        #expect(try f.store.digest() == before)
        // The next compaction seals from inside that block on.
        let more = try f.store.compact(CompactionTests.policy(keepOps: 0, segmentOpsMax: 100))
        #expect(more.opsSealed == 95)
        #expect(try f.store.segments().map(\.lastSeq) == [100, 200, 300, 305, 400])
        #expect(try Self.blocks(f.store).isEmpty)
        #expect(try f.store.confirmedOps() == all)
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild(fromGenesis: true).digest == before)
    }

    @Test("A rewind to a seq inside a block keeps the block's ops up to it, encoded again, and requeues this device's ops after it")
    func aRewindInsideABlockKeepsItsPrefix() throws {
        let f = try Fixture(seed: 3)
        try Self.library(f, count: 300, batch: 100, seed: 3)
        let kept = try f.store.confirmedOps(limit: 150)
        let ownAfter = try f.store.confirmedOps(after: 150).filter { $0.deviceID == f.store.deviceID }
        let report = try f.store.rewind(toAgreedSeq: 150)
        #expect(report.rewoundTo == 150 && report.dropped == 150)
        #expect(report.requeued == ownAfter.count)
        #expect(try Self.blocks(f.store) == [[1, 100], [101, 150]])
        #expect(try f.store.confirmedOps() == kept)
        #expect(try f.store.pendingOps().map(\.opID) == ownAfter.map(\.opID))
        #expect(try Self.ownConfirmed(f.store).allSatisfy { Int64($0[0])! <= 150 })
        #expect(try f.store.confirmedSeq(of: ownAfter[0].opID) == nil)
        #expect(try f.store.verify().passed)
    }

    @Test("Format v8 → v9: the log's rows become blocks, every id and this device's ops are kept apart, and the store reads as before")
    func migrationFromRowsToBlocks() throws {
        let f = try Fixture(seed: 4)
        try Self.library(f, count: 2_345, batch: 250, seed: 4)
        try f.store.compact(CompactionTests.policy(keepOps: 1_000, segmentOpsMax: 500))
        _ = try f.save("https://example.com/queued", title: "queued before the update")
        let digest = try f.store.digest()
        let ops = try f.store.confirmedOps()
        let own = try Self.ownConfirmed(f.store)
        #expect(own.count == ops.count(where: { $0.deviceID == f.store.deviceID }))
        try Self.downgradeToFormat8(f.store)
        #expect(try f.store.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_log") } == 1_000)

        let reopened = try DeviceStore.open(at: f.path)
        #expect(try reopened.status().formatVersion == 9)
        #expect(try Self.blocks(reopened) == [[1_346, 2_345]])
        #expect(try reopened.confirmedOps() == ops)
        #expect(try Self.ownConfirmed(reopened) == own)
        #expect(try reopened.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_op_ids") } == Int64(ops.count))
        #expect(try reopened.read { db in try db.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name IN ('chronicle_log', 'chronicle_sealed_ids')") } == 0)
        #expect(try reopened.digest() == digest)
        #expect(try reopened.verify().passed)
        #expect(try reopened.rebuild(fromGenesis: true).digest == digest)
        // The ids still refuse a repeat, sealed or hot.
        for op in [ops[10], ops[2_000]] {
            let error = #expect(throws: ChronicleError.self) {
                var again = op
                again.serverSeq = Int64(ops.count + 1)
                try reopened.applyConfirmed([again])
            }
            #expect(error?.code == .duplicateOp)
        }
    }
}
