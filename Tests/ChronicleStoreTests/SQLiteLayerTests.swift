import ChronicleCore
@testable import ChronicleStore
import CSQLite
import Foundation
import Testing
import ChronicleTesting

@Suite struct SQLiteLayerTests {
    func scratch() throws -> (Database, URL) {
        let dir = Fixture.scratchRoot.appendingPathComponent("chronicle-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let db = try Database(path: dir.appendingPathComponent("t.sqlite").path)
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b INTEGER)")
        return (db, dir)
    }

    @Test("SQLite is configured before the first connection: memory statistics off, so no allocation takes a process-wide mutex")
    func memoryStatisticsAreOff() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(Database.configureLibrary(), "the first connection of this process configured SQLite")
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t(s) SELECT hex(randomblob(1000)) FROM n")
        _ = try db.query("SELECT s FROM t ORDER BY s") { $0.text(0) }
        // With statistics on, SQLite counts every allocation it holds; off, it counts none.
        #expect(sqlite3_memory_used() == 0)
        #expect(sqlite3_memory_highwater(0) == 0)
    }

    @Test func typedValuesRoundTrip() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let values: [Value] = [.integer(Int64.min), .real(-0.5), .text("naïve 🎉 \u{0}inside"), .bool(true)]
        try db.execute("INSERT INTO t VALUES (?1, ?2, ?3, ?4)", values)
        try db.execute("INSERT INTO t VALUES (?1, ?2, ?3, ?4)", [.null, .null, .text(""), .bool(false)])
        let rows = try db.query("SELECT i, r, s, b FROM t ORDER BY rowid") { row in (0..<4).map { row.value(Int32($0)) } }
        #expect(rows[0] == [.integer(Int64.min), .real(-0.5), .text("naïve 🎉 \u{0}inside"), .integer(1)])
        #expect(rows[1] == [.null, .null, .text(""), .integer(0)])
    }

    /// Incremental blob I/O: a value written and read back in pieces, never whole; a piece size
    /// that does not divide the length ends with a short piece; a missing row is an error.
    @Test func blobsAreWrittenAndReadInPieces() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        try db.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try db.execute("INSERT INTO blobs(id, body) VALUES (7, zeroblob(?1))", [.integer(Int64(bytes.count))])
        try db.writeBlob(table: "blobs", column: "body", rowid: 7) { piece in
            try bytes.withUnsafeBytes { raw in
                for start in stride(from: 0, to: raw.count, by: 4_096) {
                    try piece(UnsafeRawBufferPointer(rebasing: raw[start..<min(raw.count, start + 4_096)]))
                }
            }
        }
        var read: [UInt8] = []
        var sizes: [Int] = []
        try db.readBlob(table: "blobs", column: "body", rowid: 7, pieceBytes: 3_000) { piece in
            sizes.append(piece.count)
            read.append(contentsOf: piece)
        }
        #expect(read == bytes && sizes == [3_000, 3_000, 3_000, 1_000])
        #expect(throws: SQLiteError.self) { try db.readBlob(table: "blobs", column: "body", rowid: 8) { _ in } }
    }

    @Test func transactionRollsBackWhenTheBodyThrows() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction { db in
                try db.execute("INSERT INTO t(i) VALUES (1)")
                throw Boom()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 0)
        try db.transaction { db in try db.execute("INSERT INTO t(i) VALUES (2)") }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 1)
    }

    @Test func errorsCarryExtendedCodeMessageAndSQL() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        try db.execute("CREATE TABLE u (x INTEGER PRIMARY KEY)")
        try db.execute("INSERT INTO u VALUES (1)")
        do {
            try db.execute("INSERT INTO u VALUES (?1)", [.integer(1)])
            Issue.record("a duplicate key must fail")
        } catch {
            #expect(error.extendedCode == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
            #expect(error.isConstraint)
            #expect(error.sql == "INSERT INTO u VALUES (?1)")
            #expect(error.message.contains("UNIQUE"))
            #expect(!error.description.contains("?1)\" [1]"), "arguments are not printed")
        }
        do {
            _ = try db.statement("SELEKT 1")
            Issue.record("bad SQL must fail")
        } catch {
            #expect(error.primaryCode == SQLITE_ERROR)
            #expect(error.description.contains("SELEKT 1"))
        }
    }

    @Test func statementsAreCachedAndReusable() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try db.statement("SELECT ?1 + 1")
        #expect(first === (try db.statement("SELECT ?1 + 1")))
        for i in 0..<5 {
            #expect(try db.query("SELECT ?1 + 1", [.integer(Int64(i))]) { $0.int(0) } == [Int64(i) + 1])
        }
    }

    @Test func uuidBlobTurnsAUUIDsTextIntoItsSixteenBytesAndAnythingElseIntoNull() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let id = UUID()
        let hex = withUnsafeBytes(of: id.uuid) { $0.map { String(format: "%02x", $0) }.joined() }
        for text in [id.lowercased, id.uuidString] {
            #expect(try db.scalarText("SELECT hex(chronicle_uuid_blob(?1))", [.text(text)])?.lowercased() == hex)
            #expect(try db.scalarText("SELECT typeof(chronicle_uuid_blob(?1))", [.text(text)]) == "blob")
        }
        // Bound as bytes, the same value: a text id and a bound UUID find the same row.
        try db.execute("CREATE TABLE k (id BLOB PRIMARY KEY) WITHOUT ROWID")
        try db.statement("INSERT INTO k(id) VALUES (?1)").execute([.null], uuid: id, at: 1)
        #expect(try db.scalarInt("SELECT count(*) FROM k WHERE id = chronicle_uuid_blob(?1)", [.text(id.lowercased)]) == 1)
        #expect(try db.statement("SELECT 1 FROM k WHERE id = ?1").exists([], uuid: id, at: 1))
        #expect(try !db.statement("SELECT 1 FROM k WHERE id = ?1").exists([], uuid: UUID(), at: 1))
        let text = id.lowercased
        let notUUIDs: [Value] = [.text(""), .text(String(text.dropLast())), .text(text + "0"), .text(text.replacingOccurrences(of: "-", with: "")),
                                 .text(String(text.dropLast()) + "g"), .text(text.replacingOccurrences(of: "-", with: "+")),
                                 .text(String(repeating: "é", count: 18)), .integer(7), .null]
        for value in notUUIDs {
            #expect(try db.scalarInt("SELECT chronicle_uuid_blob(?1) IS NULL", [value]) == 1, "\(value)")
        }
    }

    @Test func walModeAndPragmasAreSet() throws {
        let (db, dir) = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try db.scalarText("PRAGMA journal_mode") == "wal")
        #expect(try db.scalarInt("PRAGMA foreign_keys") == 1)
        #expect(try db.scalarInt("PRAGMA synchronous") == 2)
    }
}

@Suite struct AuditTests {
    @Test func auditShowsEveryOpAndTheStateAsOfAnySeq() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let phone = UUID()
        let save = try f.store.write("article.save", payload: ["url": .text("https://e.com"), "title": .text("One")])
        try f.store.applyConfirmed([server.confirm(save)])                                                         // seq 1
        try f.store.applyConfirmed([server.op("article.update", entity: save.entityID, from: phone, payload: ["title": .text("Two")])])  // seq 2
        try f.store.applyConfirmed([server.op("article.tag", entity: save.entityID, from: phone, payload: ["tag": .text("x")])])        // seq 3
        try f.store.write("article.update", entity: save.entityID, payload: ["title": .text("Three")])               // pending

        let audit = try f.store.audit(save.entityID)
        #expect(audit.entries.map { $0.op.serverSeq } == [1, 2, 3, nil])
        #expect(audit.entries[0].effects.first { $0.field == "title" }?.outcome == .superseded)
        #expect(audit.entries[1].effects.first?.detail.contains("superseded by pending #2") == true)
        #expect(audit.entries[3].effects.first?.outcome == .applied)
        #expect(audit.state?["title"] == .text("Three"))
        #expect(audit.sets["tags"] == [.text("x")])

        let atTwo = try f.store.audit(save.entityID, asOf: 2)
        #expect(atTwo.state?["title"] == .text("Two"))
        #expect(atTwo.sets["tags"] == [])
        #expect(try f.store.audit(save.entityID, asOf: 0).state == nil, "before its creation the row does not exist")
        #expect(throws: ChronicleError.self) { _ = try f.store.audit(UUID()) }
    }
}

@Suite struct CheckpointTests {
    @Test func walIsCheckpointedInTheBackgroundNotByCommits() throws {
        let f = try Fixture()
        let id = try f.save(title: "t")
        #expect(try f.store.read { db in try db.scalarInt("PRAGMA wal_autocheckpoint") } == 1000, "readers keep the default")
        let writerSetting = try f.store.writer.withLock { db in try db.scalarInt("PRAGMA wal_autocheckpoint") }
        #expect(writerSetting == 0)
        for i in 0..<1500 {
            try f.store.write("article.update", entity: id, payload: ["title": .text("title \(i) " + String(repeating: "x", count: 1500))])
        }
        f.store.checkpointer.drain()
        #expect(f.store.checkpointer.completed > 0)
        #expect(try f.store.verify().passed)
    }
}

@Suite struct IDGeneratorTests {
    @Test func systemIdsAreVersion7AndSortByTime() {
        let clock = ManualClock(startMilliseconds: 1_800_000_000_000)
        let ids = SystemIDGenerator(clock: clock)
        var previous = ""
        for _ in 0..<100 {
            clock.advance(milliseconds: 1)
            let id = ids.makeUUID().lowercased
            #expect(Array(id)[14] == "7", "version nibble")
            #expect(id > previous, "later ids sort later")
            previous = id
        }
    }
}

@Suite struct CheckpointerTests {
    /// A database in `f`'s directory with table `t(id, body)` and a checkpointer whose
    /// background checkpoints and writer restarts both start at 400 pages.
    func walTable(in f: Fixture) throws -> (String, Database, Checkpointer) {
        let path = f.directory.appendingPathComponent("wal.sqlite").path
        let db = try Database(path: path)
        let checkpointer = Checkpointer(path: path, thresholdPages: 400, restartPages: 400)
        try checkpointer.install(on: db)
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        return (path, db, checkpointer)
    }

    /// Under writes that never pause, background PASSIVE checkpoints alone never let the
    /// WAL start over; past its limit the writer restarts it, so the file stays bounded.
    @Test func theWALStaysBoundedUnderSustainedWrites() throws {
        // No background checkpoints compete here (they start at the same size the restart does),
        // so the restart never meets a busy lock and the bound is exact whatever the machine's load.
        let f = try Fixture()
        let (path, db, checkpointer) = try walTable(in: f)
        let body = String(repeating: "x", count: 3_000)
        var largest: Int64 = 0
        for batch in 0..<300 {
            try db.transaction { db in
                for i in 0..<10 { try db.execute("INSERT INTO t(body) VALUES (?1)", [.text(body + String(batch * 10 + i))]) }
            }
            let wal = ((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size]) as? Int64) ?? 0
            largest = max(largest, wal)
        }
        checkpointer.drain()
        #expect(checkpointer.restarts > 0, "the writer restarted the WAL")
        // 300 batches wrote over 9 MB of pages; the WAL never held much more than the restart limit.
        #expect(largest < 600 * 4_200, "largest WAL \(largest) bytes")
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 3_000)
    }

    /// A compaction's seals hold checkpoints: however long the WAL grows, their commits neither
    /// restart it on the writer nor schedule a background checkpoint; one runs after the last.
    @Test func commitsHoldingCheckpointsScheduleNoneUntilTheyEnd() throws {
        let f = try Fixture()
        let (path, db, checkpointer) = try walTable(in: f)
        let body = String(repeating: "z", count: 3_000)
        try checkpointer.holdingCheckpoints {
            for batch in 0..<100 {
                try db.transaction { db in
                    for i in 0..<10 { try db.execute("INSERT INTO t(body) VALUES (?1)", [.text(body + String(batch * 10 + i))]) }
                }
            }
            checkpointer.drain()
            #expect(checkpointer.restarts == 0 && checkpointer.completed == 0, "no checkpoint while held")
        }
        let wal = ((try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size]) as? Int64) ?? 0
        #expect(wal > 400 * 4_096, "the WAL grew past both limits (\(wal) bytes)")
        checkpointer.drain()
        #expect(checkpointer.completed == 1, "one background checkpoint after the last")
    }

    /// One large commit after which writes pause (a rebuild, a bootstrap, the end of a bulk
    /// apply) leaves its WAL to the background checkpoint; the next ordinary commit past the
    /// limit gets the writer's restart again.
    @Test func aLargeCommitLeavesItsWALToTheBackground() throws {
        let f = try Fixture()
        let (_, db, checkpointer) = try walTable(in: f)
        let body = String(repeating: "y", count: 3_000)
        try checkpointer.deferringRestart {
            try db.transaction { db in
                for i in 0..<1_000 { try db.execute("INSERT INTO t(body) VALUES (?1)", [.text(body + String(i))]) }
            }
        }
        #expect(checkpointer.restarts == 0, "the writer left the WAL to the background")
        checkpointer.drain()
        #expect(checkpointer.completed > 0, "the background checkpoint ran")
        try db.transaction { db in
            for i in 0..<1_000 { try db.execute("INSERT INTO t(body) VALUES (?1)", [.text(body + String(i))]) }
        }
        checkpointer.drain()
        #expect(checkpointer.restarts > 0, "an ordinary commit past the limit restarts the WAL again")
    }
}
