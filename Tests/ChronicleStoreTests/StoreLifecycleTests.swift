import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

@Suite struct StoreLifecycleTests {
    func code(_ body: () throws -> Void) -> ChronicleError.Code? {
        do { try body(); return nil } catch let error as ChronicleError { return error.code } catch { return ChronicleError.Code(rawValue: "\(error)") }
    }

    @Test func reopenKeepsEverything() throws {
        let f = try Fixture()
        let id = try f.save(title: "Persisted")
        let digest = try f.store.digest()
        let reopened = try DeviceStore.open(at: f.path)
        #expect(reopened.deviceID == f.store.deviceID)
        #expect(reopened.libraryID == f.store.libraryID)
        #expect(try reopened.digest() == digest)
        #expect(try reopened.row(id)?["title"] == .text("Persisted"))
        let next = try reopened.write("article.tag", entity: id, payload: ["tag": .text("x")])
        #expect(next.deviceSeq == 2)
    }

    @Test("checkpoint() copies the write-ahead log into the database file and empties it; a copy of the file alone is the whole store")
    func checkpointLeavesTheDatabaseFileWhole() throws {
        let f = try Fixture()
        for n in 0..<50 { try f.save("https://example.com/\(n)", title: "article \(n)") }
        let wal = f.path + "-wal"
        let size = { (try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? Int) ?? 0 }
        #expect(size() > 0, "the writes are in the WAL before the checkpoint")
        #expect(f.store.checkpoint())
        #expect(size() == 0)
        // The database file alone, copied while the store stays open, holds every write.
        let copy = f.directory.appendingPathComponent("copy.chronicle").path
        try FileManager.default.copyItem(atPath: f.path, toPath: copy)
        let copied = try DeviceStore.open(at: copy)
        #expect(try copied.digest() == f.store.digest())
        #expect(try copied.rows("article").count == 50)
    }

    @Test func missingGarbageAndForeignFilesAreRefusedClearly() throws {
        let f = try Fixture()
        let missing = f.directory.appendingPathComponent("missing.chronicle").path
        #expect(code { _ = try DeviceStore.open(at: missing) } == .storeMissing)
        let garbage = f.directory.appendingPathComponent("garbage.chronicle").path
        try Data((0..<4096).map { UInt8($0 % 251) }).write(to: URL(fileURLWithPath: garbage))
        #expect(code { _ = try DeviceStore.open(at: garbage) } == .notAChronicleStore)
        let foreign = f.directory.appendingPathComponent("foreign.sqlite").path
        try Database(path: foreign).execute("CREATE TABLE t(x)")
        #expect(code { _ = try DeviceStore.open(at: foreign) } == .notAChronicleStore)
        #expect(code { _ = try DeviceStore.create(at: f.path, schema: .readItLater) } == .storeExists)
    }

    @Test func storeFromAFutureVersionIsRefusedAndLeftUntouched() throws {
        let f = try Fixture()
        try f.save()
        let path = f.directory.appendingPathComponent("future.chronicle").path
        do {
            let db = try Database(path: f.path)
            try db.execute("VACUUM INTO '\(path)'")
        }
        do {
            let db = try Database(path: path)
            try db.execute("UPDATE chronicle_meta SET value = 99 WHERE key = 'format_version'")
            try db.execute("PRAGMA journal_mode = DELETE")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = #expect(throws: ChronicleError.self) { _ = try DeviceStore.open(at: path) }
        #expect(error?.code == .futureStoreVersion)
        #expect(error?.message.contains("v99") == true && error?.message.contains("v\(StoreFormat.currentVersion)") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test func premiumPlanTurnsOnFullTextSearchAndFreeTurnsItOff() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let save = try f.store.write("article.save", payload: ["url": .text("https://e.com/p"), "title": .text("Plain title")])
        let id = save.entityID
        try f.store.applyConfirmed([server.confirm(save)])
        try f.store.applyConfirmed([server.op("article.parsed", entity: id, from: Op.serverDeviceID,
                                              payload: ["text": .text("a body mentioning photosynthesis"), "word_count": .integer(4)])])
        #expect(try f.store.search("photosynthesis").isEmpty, "full text is not searchable on the free plan")
        try f.store.applyConfirmed([server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("premium")])])
        #expect(try f.store.search("photosynthesis").map(\.id) == [id.lowercased])
        #expect(try f.store.verify().passed)
        // A rebuild refills the premium index on premium, and only empties it on free.
        try f.store.rebuild()
        #expect(try f.store.search("photosynthesis").map(\.id) == [id.lowercased])
        try f.store.applyConfirmed([server.op("library.plan", entity: f.store.libraryID, from: Op.serverDeviceID, payload: ["plan": .text("free")])])
        #expect(try f.store.search("photosynthesis").isEmpty)
        #expect(try f.store.verify().passed)
        try f.store.rebuild()
        #expect(try f.store.search("photosynthesis").isEmpty)
        #expect(try f.store.verify().passed)
    }

    @Test func clientOpSettingAServerOnlyFieldChangesNothingWhenConfirmed() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let id = try f.save()
        try f.store.applyConfirmed([server.op("article.parsed", entity: id, from: UUID(), payload: ["text": .text("forged")])])
        #expect(try f.field(id, "text")?.isNull == true)
    }

    @Test func readersDoNotWaitForTheWriter() throws {
        let f = try Fixture()
        try f.save(title: "Before")
        let db = try Database(path: f.path)
        try db.execute("BEGIN IMMEDIATE")
        try db.execute("UPDATE article SET title = 'Uncommitted'")
        // The write lock is held; a read still answers at once with committed data.
        let titles = try f.store.read { db in try db.query("SELECT title FROM article") { $0.text(0) } }
        #expect(titles == ["Before"])
        try db.execute("ROLLBACK")
    }

    @Test func fieldServiceSchemaRunsOnTheSameEngine() throws {
        let f = try Fixture(schema: .fieldService)
        let job = try f.store.write("job.create", payload: ["title": .text("Replace boiler"), "customer": .text("Ada")])
        let part = try f.store.write("part.add", payload: ["job_id": .text(job.entityID.lowercased), "sku": .text("VALVE-22")])
        try f.store.write("part.adjust", entity: part.entityID, payload: ["delta": .integer(5)])
        try f.store.write("part.adjust", entity: part.entityID, payload: ["delta": .integer(-2)])
        try f.store.write("job.assign", entity: job.entityID, payload: ["member": .text("sam")])
        #expect(try f.store.row(part.entityID)?["quantity"] == .integer(3))
        #expect(try f.store.search("valve").first?.id == job.entityID.lowercased, "a part hit counts for its job")
        #expect(try f.store.search("boiler").first?.kind == "job")
        #expect(try f.store.verify().passed)
    }
}

@Suite struct FormatMigrationTests {
    /// A store written by format v1 (before sync bookkeeping) opens as v2: backed up first,
    /// its queued ops kept, and the new outbox rules in force.
    @Test func aVersion1StoreIsBackedUpAndMigratedWithItsOutboxKept() throws {
        let f = try Fixture()
        let directory = f.directory.appendingPathComponent("v1")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("old.chronicle").path
        do {
            let db = try Database(path: path)
            try db.transaction { db in
                for statement in StoreFormat.version1 { try db.execute(statement) }
                let meta: [(String, Value)] = [
                    ("format_version", .integer(1)), ("schema_name", .text("readitlater")), ("schema_version", .integer(1)),
                    ("schema_fingerprint", .text(Schema.readItLater.fingerprint)), ("library_id", .text(UUID().lowercased)),
                    ("device_id", .text(UUID().lowercased)), ("last_device_seq", .integer(0)), ("cursor", .integer(0)),
                    ("created_at", .integer(0)),
                ]
                for (key, value) in meta { try LogTables.setMeta(key, value, in: db) }
                try ProjectionTables.createProjection(ProjectionSchema(schema: .readItLater), in: db, withSearch: true)
            }
        }
        let store = try DeviceStore.open(at: path)
        #expect(try store.status().formatVersion == StoreFormat.currentVersion)
        #expect(FileManager.default.fileExists(atPath: path + ".backup-v1"))
        // The backup is the store as it was: whole, at format v1, in no journal mode it would need a -wal for.
        let backup = try Database(path: path + ".backup-v1", options: { var o = Database.Options(); o.readOnly = true; return o }())
        #expect(try backup.query("PRAGMA integrity_check") { $0.text(0) } == ["ok"])
        #expect(try backup.scalarInt("SELECT value FROM chronicle_meta WHERE key = 'format_version'") == 1)
        #expect(try backup.scalarText("PRAGMA journal_mode") == "delete")
        // The phrase indexes of format v6 and v7 are made and filled at its upkeep.
        #expect(try store.performUpkeep().phraseIndexesToFill)
        #expect(store.waitForPhraseIndexing(timeoutSeconds: 60))
        let id = try store.write("article.save", payload: ["url": .text("https://example.com/migrated")]).entityID
        #expect(try store.row(id) != nil)
        #expect(try store.syncState().unsent == 1)
        #expect(try store.verify().passed)
        // The v2 rule: an op leaves the outbox only when confirmed or rejected.
        #expect(throws: SQLiteError.self) { try store.writer.withLock { try $0.execute("DELETE FROM chronicle_outbox") } }
        #expect(try store.reject(store.pendingOps()[0].opID, code: "test", message: "refused", verdict: nil))
        #expect(try store.row(id) == nil, "the refused create is undone")
        #expect(try store.notices().map(\.code) == ["test"])
    }
}

/// Rebuild reads and decodes the log on a second connection and thread while the writer
/// applies it (`DeviceStore.forEachPreparedOp`): both sides' failures must stop both.
@Suite struct PrefetchedRebuildTests {
    @Test func aRebuildAcrossManyChunksGivesTheIncrementalDigest() throws {
        let f = try Fixture(seed: 41)
        try CompactionTests.library(f, count: LogTables.prefetchChunkOps * 3 + 17, seed: 41)
        let before = try f.store.digest()
        #expect(try f.store.rebuild().digest == before)
        #expect(try f.store.verify().passed)
    }

    @Test func aLogBlockTheReaderCannotDecodeFailsTheRebuildAndChangesNothing() throws {
        let f = try Fixture(seed: 42)
        try CompactionTests.library(f, count: LogTables.prefetchChunkOps + 200, seed: 42)
        let before = try f.store.digest()
        let cursor = try f.store.cursor()
        // A block past the first chunk whose body is not a segment's (only a tool writing SQL can do this).
        try f.store.writer.withLock { db in
            try db.transaction { db in
                try db.execute("""
                    INSERT INTO chronicle_log_blocks(first_seq, last_seq, newest_time, filter, body)
                    SELECT last_seq + 1, last_seq + 1, newest_time, filter, x'43485347ffff' FROM chronicle_log_blocks ORDER BY first_seq DESC LIMIT 1
                    """)
                try LogTables.setMeta("cursor", .integer(cursor + 1), in: db)
            }
        }
        let error = #expect(throws: ChronicleError.self) { try f.store.rebuild() }
        #expect(error?.code == .malformedSegment || error?.code == .futureSegmentVersion, "\(String(describing: error))")
        #expect(try f.store.digest() == before, "the rebuild rolled back")
        // The reading connection went back to the pool and the writer was let go: reads go on,
        // and the next rebuild runs (and fails the same way) instead of waiting forever.
        #expect(try f.store.cursor() == cursor + 1)
        #expect(throws: ChronicleError.self) { try f.store.rebuild() }
    }

    @Test func aConsumerThatStopsReleasesAWaitingProducer() throws {
        let channel = PrefetchChannel<(op: Op, steps: [SQLStep])>(capacity: 1)
        let op = Op(opID: UUID(), libraryID: UUID(), deviceID: UUID(), deviceSeq: 1, type: "article.save", version: 1,
                    entityID: UUID(), payload: [:], deviceTime: 0, baseSeq: 0)
        let producer = Thread {
            do {
                for _ in 0..<100 { try channel.put([(op, [])]) }
                channel.finish(nil)
            } catch {
                channel.finish(error)
            }
        }
        producer.start()
        #expect(try channel.take()?.count == 1)
        channel.cancel()
        channel.waitUntilFinished()   // returns only because the blocked put threw
        #expect(try channel.take() == nil, "a cancelled producer's stop is not an error")
    }
}
