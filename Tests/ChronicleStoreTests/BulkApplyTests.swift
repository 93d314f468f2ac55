import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

@Suite struct BulkApplyTests {
    /// A small library from two remote devices, in batches.
    func library(_ server: ServerLog, articles: Int) -> [[Op]] {
        let phone = UUID(), tablet = UUID()
        var ops: [Op] = []
        var ids: [UUID] = []
        for i in 0..<articles {
            let id = UUID()
            ids.append(id)
            ops.append(server.op("article.save", entity: id, from: i % 2 == 0 ? phone : tablet,
                                 payload: ["url": .text("https://example.com/\(i)"), "title": .text("Article \(i) about tunnels")]))
            ops.append(server.op("article.tag", entity: id, from: phone, payload: ["tag": .text("t\(i % 3)")]))
            if i % 4 == 0 { ops.append(server.op("article.update", entity: ids[i / 2], from: tablet, payload: ["title": .text("Renamed \(i) planes")])) }
        }
        return stride(from: 0, to: ops.count, by: 25).map { Array(ops[$0..<min($0 + 25, ops.count)]) }
    }

    @Test func bulkAndIncrementalReachTheSameStateAndSearch() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 120)
        for batch in batches { try a.store.applyConfirmed(batch) }
        var progressCalls = 0
        let result = try b.store.applyConfirmedInBulk(batches) { _, _ in progressCalls += 1 }
        #expect(result.applied == batches.map(\.count).reduce(0, +))
        #expect(progressCalls == batches.count)
        #expect(try a.store.digest() == b.store.digest())
        #expect(try !b.store.needsSearchIndexRebuild())
        #expect(try b.store.verify().passed)
        for query in ["tunnels", "planes", "renamed 4*", "t1"] {
            #expect(try a.store.search(query, limit: 50).map(\.id) == b.store.search(query, limit: 50).map(\.id), "\(query)")
        }
        // What bulk apply set aside for its duration is back: durable commits.
        #expect(try b.store.writer.withLock { db in try db.scalarInt("PRAGMA synchronous") } == 2)
        let entity = batches[0][0].entityID
        #expect(try b.store.confirmedOps(entity: entity) == a.store.confirmedOps(entity: entity))
        // …and the projection's read indexes, which queries by tag use again.
        #expect(try readIndexes(b.store) == Set(b.store.projection.readIndexes.map(\.name)))
        #expect(try b.store.read { db in
            try db.query("EXPLAIN QUERY PLAN SELECT id FROM article_tags WHERE value = 't1'") { $0.text(3) }
        }.contains { $0.contains("article_tags_by_value") })
    }

    /// The projection's read indexes (`ProjectionSchema.readIndexes`) present in the store.
    func readIndexes(_ store: DeviceStore) throws -> Set<String> {
        let names = store.projection.readIndexes.map(\.name)
        return Set(try store.read { db in
            try db.query("SELECT name FROM sqlite_schema WHERE type = 'index'") { $0.text(0) }
        }.filter(names.contains))
    }

    /// `library` in batches of `DeviceStore.sealOnArrivalOpsMin` ops (the last one shorter).
    func sealableBatches(_ server: ServerLog) -> [[Op]] {
        let ops = library(server, articles: 1_000).flatMap { $0 }
        let size = DeviceStore.sealOnArrivalOpsMin
        return stride(from: 0, to: ops.count, by: size).map { Array(ops[$0..<min($0 + size, ops.count)]) }
    }

    @Test("Bulk apply keeps every batch but the last as sealed segments, and reads, verifies, rebuilds and refuses repeats as from log rows")
    func bulkApplySealsAllButTheLastBatch() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID), c = try Fixture(seed: 3, library: a.store.libraryID)
        let batches = sealableBatches(ServerLog(library: a.store.libraryID))
        #expect(batches.count >= 3)
        for batch in batches { try a.store.applyConfirmed(batch) }
        try b.store.applyConfirmedInBulk(batches)
        try c.store.applyConfirmedInBulk(batches, sealing: false)

        let sealed = batches.dropLast()
        #expect(try b.store.segments().map(\.firstSeq) == sealed.map { $0[0].serverSeq! })
        #expect(try b.store.segments().map(\.lastSeq) == sealed.map { $0.last!.serverSeq! })
        let logged = { (store: DeviceStore) in
            try store.read { db in try db.scalarInt("SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM chronicle_log_blocks") }
        }
        #expect(try logged(b.store) == Int64(batches.last!.count), "the last batch stays hot")
        #expect(try b.store.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_op_ids") } == Int64(batches.joined().count))
        #expect(try c.store.segments().isEmpty)
        #expect(try logged(c.store) == Int64(batches.joined().count))
        // A sealed segment holds its batch's ops exactly, in an LZ4 frame.
        let frame = try #require(try b.store.segmentFrame(firstSeq: 1))
        let segment = try SegmentCodec.decodeBody(try LZ4Frame.decompress(frame, maxBytes: 64 << 20))
        #expect(segment.ops == batches[0])

        for store in [b.store, c.store] {
            #expect(try store.digest() == a.store.digest())
            let report = try store.verify()
            #expect(report.passed, "\(report)")
            #expect(try store.confirmedOps() == a.store.confirmedOps())
            for entity in [batches[0][0].entityID, batches[1][5].entityID, batches.last!.last!.entityID] {
                #expect(try store.audit(entity).entries.map(\.op) == a.store.audit(entity).entries.map(\.op))
            }
            #expect(try store.search("tunnels", limit: 50).map(\.id) == a.store.search("tunnels", limit: 50).map(\.id))
        }
        #expect(try b.store.rebuild(fromGenesis: true).digest == a.store.digest())

        // An op id applies at most once, sealed or not, and the log goes on after the segments.
        var again = batches[0][3]
        again.serverSeq = Int64(batches.joined().count + 1)
        #expect((#expect(throws: ChronicleError.self) { try b.store.applyConfirmed([again]) })?.code == .duplicateOp)
        let server = ServerLog(library: a.store.libraryID, seed: 7)
        server.seq = Int64(batches.joined().count)
        let next = server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://example.com/next")])
        try b.store.applyConfirmed([next])
        #expect(try b.store.verify().passed)
    }

    @Test("A first sync killed after some sealed batches reopens whole, and the next catch-up goes on sealing where it stopped")
    func aFirstSyncKilledBetweenSealedBatchesResumes() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = sealableBatches(ServerLog(library: a.store.libraryID))
        for batch in batches { try a.store.applyConfirmed(batch) }
        // What a process killed after its second sealed batch leaves: finishBulk never runs.
        try b.store.beginBulk()
        for batch in batches[..<2] { try b.store.applyBulkBatch(batch, seal: true) }
        #expect(try b.store.segments().count == 2)
        let reopened = try DeviceStore.open(at: b.path)
        #expect(try reopened.needsSearchIndexRebuild(), "opening changes nothing")
        #expect(try reopened.upkeepDue().searchIndexesStale)
        #expect(try reopened.performUpkeep().searchIndexesStale)
        #expect(try !reopened.needsSearchIndexRebuild())
        let unfinished = try reopened.verify()
        #expect(unfinished.passed, "\(unfinished)")
        #expect(try reopened.cursor() == batches[1].last!.serverSeq!)
        // The rest arrives in a second catch-up: its batches but the last are sealed after the first two.
        try reopened.applyConfirmedInBulk(Array(batches[2...]))
        #expect(try reopened.segments().map(\.firstSeq) == batches.dropLast().map { $0[0].serverSeq! })
        #expect(try reopened.digest() == a.store.digest())
        #expect(try reopened.verify().passed)
    }

    @Test("Bulk apply seals nothing onto a store whose log has hot ops, nor batches too short, nor a lone batch")
    func bulkApplyLogsWhatItCannotSeal() throws {
        let f = try Fixture(), g = try Fixture(seed: 2), h = try Fixture(seed: 3)
        var batches = sealableBatches(ServerLog(library: f.store.libraryID))
        try f.store.applyConfirmed(batches.removeFirst())
        try f.store.applyConfirmedInBulk(batches)
        #expect(try f.store.segments().isEmpty)
        #expect(try f.store.verify().passed)

        let short = library(ServerLog(library: g.store.libraryID), articles: 100)
        try g.store.applyConfirmedInBulk(short)
        #expect(try g.store.segments().isEmpty)

        let whole = sealableBatches(ServerLog(library: h.store.libraryID)).joined()
        try h.store.applyConfirmedInBulk([Array(whole)])
        #expect(try h.store.segments().isEmpty, "the only batch is the last: it stays hot")
    }

    @Test func oneEntitysHistoryReadsWhileBulkApplyRuns() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 30)
        for batch in batches { try a.store.applyConfirmed(batch) }
        try b.store.beginBulk()
        for batch in batches { try b.store.applyBulkBatch(batch) }
        // Between batches the entity index is gone, and the writer is back to durable commits
        // (only the batches' own commits skip waiting for the disk).
        #expect(try b.store.read { db in
            try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'chronicle_log_by_entity'")
        } == 0)
        #expect(try b.store.writer.withLock { db in try db.scalarInt("PRAGMA synchronous") } == 2)
        // The read indexes are set aside too: a query by tag scans its table, with the same answer.
        #expect(try readIndexes(b.store).isEmpty)
        let tagged = "SELECT id FROM article_tags WHERE value = 't1' ORDER BY id"
        #expect(try b.store.read { db in try db.query(tagged) { $0.text(0) } } == a.store.read { db in try db.query(tagged) { $0.text(0) } })
        #expect(try !b.store.read { db in try db.query(tagged) { $0.text(0) } }.isEmpty)
        let entity = batches[0][0].entityID
        let history = try b.store.confirmedOps(entity: entity)
        #expect(!history.isEmpty)
        #expect(history == (try a.store.confirmedOps(entity: entity)))
        let audit = try b.store.audit(entity)
        #expect(audit.entries.map(\.op.opID) == (try a.store.audit(entity)).entries.map(\.op.opID))
        #expect(audit.state == (try a.store.audit(entity)).state)
        let during = try b.store.verify()
        #expect(during.passed)
        #expect(during.checks.contains { $0.name == "projection indexes" && $0.detail.contains("set aside by a bulk apply") })
        try b.store.finishBulk()
        #expect(try b.store.verify().passed)
        #expect(try readIndexes(b.store).count == b.store.projection.readIndexes.count)
    }

    @Test("Writes while a bulk apply runs leave its emptied search indexes alone; its close indexes them with the rest")
    func writesDuringABulkApplyAreIndexedAtItsClose() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let kept = try f.save("https://example.com/kept", title: "kept before")
        let episode = try f.store.write("episode.save", payload: ["title": .text("harbor talk"), "audio_ref": .text("a.mp3"),
                                                                  "transcript": .text("the lantern by the harbor")]).entityID
        try f.store.beginBulk()
        try f.store.applyBulkBatch(library(server, articles: 8).joined().map { $0 })
        // Rows the emptied indexes no longer hold: an entry removed from them would be an error.
        try f.store.write("article.update", entity: kept, payload: ["title": .text("kept during copper")])
        try f.store.write("episode.update", entity: episode, payload: ["transcript": .text("a copper lantern in the basement")])
        let added = try f.save("https://example.com/added", title: "added during copper")
        try f.store.write("article.tag", entity: added, payload: ["tag": .text("meadow")])
        try f.store.finishBulk()
        let hits = Set(try f.store.search("copper").map(\.id))
        #expect(hits == [kept.lowercased, added.lowercased, episode.lowercased], "\(hits)")
        #expect(try f.store.search("meadow").map(\.id) == [added.lowercased])
        #expect(try f.store.search("harbor").isEmpty == false)
        #expect(try f.store.verify().passed)
    }

    @Test func aFailingBatchKeepsWhatLandedAndLeavesIndexesWhole() throws {
        let f = try Fixture()
        var batches = library(ServerLog(library: f.store.libraryID), articles: 40)
        batches[2] = Array(batches[2].dropFirst())  // a gap: the third batch is refused
        let error = #expect(throws: ChronicleError.self) { try f.store.applyConfirmedInBulk(batches) }
        #expect(error?.code == .logGap)
        #expect(try f.store.cursor() == Int64(batches[0].count + batches[1].count))
        #expect(try !f.store.needsSearchIndexRebuild())
        #expect(try f.store.verify().passed)
    }

    @Test func storeKilledMidBulkRebuildsItsIndexesAtItsUpkeep() throws {
        let f = try Fixture()
        let batches = library(ServerLog(library: f.store.libraryID), articles: 20)
        try f.store.applyConfirmed(batches[0])
        // What a process killed after its second bulk batch leaves behind: finishBulk never runs.
        try f.store.beginBulk()
        try f.store.applyBulkBatch(batches[1])
        #expect(try f.store.search("tunnels").isEmpty)
        let unfinished = try f.store.verify()
        #expect(unfinished.passed, "a store mid-bulk is consistent, its indexes reported as stale: \(unfinished)")
        let reopened = try DeviceStore.open(at: f.path)
        #expect(try reopened.search("tunnels").isEmpty, "opening changes nothing")
        #expect(try reopened.upkeepDue().steps == ["build the search indexes an interrupted catch-up left stale",
                                                   "fill the phrase indexes in the background"])
        try reopened.performUpkeep()
        #expect(try !reopened.needsSearchIndexRebuild())
        #expect(reopened.waitForPhraseIndexing(timeoutSeconds: 60))
        #expect(try reopened.upkeepDue().isEmpty)
        #expect(try !reopened.search("tunnels").isEmpty)
        #expect(try readIndexes(reopened).count == reopened.projection.readIndexes.count)
        #expect(try reopened.verify().passed)
    }

    @Test func aBatchPreparedOnAnotherThreadFoldsAsTheOpsDoAndBadOpsAreRefused() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 30)
        for batch in batches { try a.store.applyConfirmed(batch) }
        let store = b.store
        let prepared = Locked<[PreparedBatch]>([])
        let thread = Thread { prepared.withLock { $0 = batches.map { store.prepareBatch($0) } } }
        thread.start()
        while prepared.withLock({ $0.count }) != batches.count { usleep(1_000) }
        try b.store.beginBulk()
        for batch in prepared.withLock({ $0 }) { try b.store.applyBulkBatch(batch) }
        try b.store.finishBulk()
        #expect(try b.store.digest() == a.store.digest())

        // An op without its server seq is refused, as unprepared, rather than trapping.
        var unconfirmed = batches[0][0]
        unconfirmed.serverSeq = nil
        let c = try Fixture(seed: 3, library: a.store.libraryID)
        let error = #expect(throws: ChronicleError.self) { try c.store.applyBulkBatch(c.store.prepareBatch([unconfirmed])) }
        #expect(error?.code == .invariantViolated)
    }

    @Test("What the writer hands over is freed on another thread, once, after the hand-over")
    func releaseInBackgroundFreesOffTheCallersThread() throws {
        final class Probe: @unchecked Sendable {
            let freed: (pthread_t) -> Void
            init(_ freed: @escaping (pthread_t) -> Void) { self.freed = freed }
            deinit { freed(pthread_self()) }
        }
        let done = DispatchSemaphore(value: 0)
        let threads = Locked<[pthread_t]>([])
        let caller = pthread_self()
        ReleaseInBackground.release((Probe { thread in threads.withLock { $0.append(thread) }; done.signal() }, [1, 2, 3]))
        #expect(done.wait(timeout: .now() + 10) == .success)
        let freedOn = threads.withLock { $0 }
        #expect(freedOn.count == 1)
        #expect(freedOn.first.map { pthread_equal($0, caller) == 0 } == true, "freed on the caller's thread")
    }

    @Test("Verify names a log block whose entity filter leaves out one of its entities (an audit would miss its ops)")
    func verifyReportsABlockFilterThatMissesAnEntity() throws {
        let f = try Fixture()
        try f.store.applyConfirmed(library(ServerLog(library: f.store.libraryID), articles: 5)[0])
        #expect(try f.store.verify().passed)
        try f.store.writer.withLock { db in
            try db.execute("DROP TRIGGER chronicle_log_blocks_immutable")
            try db.statement("UPDATE chronicle_log_blocks SET filter = ?1").execute([], blob: SegmentFilter(ids: [UUID]()).bytes, at: 1)
        }
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.contains { !$0.passed && $0.detail.contains("entity filter that leaves out") })
    }

    @Test func verifyReportsAMissingReadIndex() throws {
        let f = try Fixture()
        try f.store.applyConfirmed(library(ServerLog(library: f.store.libraryID), articles: 5)[0])
        #expect(try f.store.verify().checks.contains { $0.name == "projection indexes" && $0.passed })
        try f.store.writer.withLock { db in try db.execute("DROP INDEX highlight_by_article_id") }
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.contains { $0.name == "projection indexes" && !$0.passed && $0.detail == "missing: highlight_by_article_id" })
    }
}
