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
        #expect(try !b.store.searchIndexesStale())
        #expect(try b.store.verify().passed)
        for query in ["tunnels", "planes", "renamed 4*", "t1"] {
            #expect(try a.store.search(query, limit: 50).map(\.id) == b.store.search(query, limit: 50).map(\.id), "\(query)")
        }
        // What bulk apply set aside for its duration is back: the log's entity index, durable commits.
        #expect(try b.store.writer.withLock { db in try db.scalarInt("PRAGMA synchronous") } == 2)
        #expect(try b.store.read { db in
            try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'chronicle_log_by_entity'")
        } == 1)
        let entity = batches[0][0].entityID
        #expect(try b.store.confirmedOps(entity: entity) == a.store.confirmedOps(entity: entity))
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
        let entity = batches[0][0].entityID
        let history = try b.store.confirmedOps(entity: entity)
        #expect(!history.isEmpty)
        #expect(history == (try a.store.confirmedOps(entity: entity)))
        let audit = try b.store.audit(entity)
        #expect(audit.entries.map(\.op.opID) == (try a.store.audit(entity)).entries.map(\.op.opID))
        #expect(audit.state == (try a.store.audit(entity)).state)
        try b.store.finishBulk()
        #expect(try b.store.verify().passed)
    }

    @Test func aFailingBatchKeepsWhatLandedAndLeavesIndexesWhole() throws {
        let f = try Fixture()
        var batches = library(ServerLog(library: f.store.libraryID), articles: 40)
        batches[2] = Array(batches[2].dropFirst())  // a gap: the third batch is refused
        let error = #expect(throws: ChronicleError.self) { try f.store.applyConfirmedInBulk(batches) }
        #expect(error?.code == .logGap)
        #expect(try f.store.cursor() == Int64(batches[0].count + batches[1].count))
        #expect(try !f.store.searchIndexesStale())
        #expect(try f.store.verify().passed)
    }

    @Test func storeKilledMidBulkRebuildsItsIndexesOnOpen() throws {
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
        #expect(try !reopened.searchIndexesStale())
        #expect(try !reopened.search("tunnels").isEmpty)
        #expect(try reopened.read { db in
            try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'chronicle_log_by_entity'")
        } == 1)
        #expect(try reopened.verify().passed)
    }

    @Test func aBatchPreparedOnAnotherThreadFoldsAsTheOpsDoAndBadOpsAreRefused() throws {
        let a = try Fixture(seed: 1), b = try Fixture(seed: 2, library: a.store.libraryID)
        let batches = library(ServerLog(library: a.store.libraryID), articles: 30)
        for batch in batches { try a.store.applyConfirmed(batch) }
        let store = b.store
        let prepared = Locked<[PreparedBatch]>([])
        let thread = Thread { prepared.withLock { $0 = batches.map(store.prepareBatch) } }
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

    @Test func verifyReportsAMissingEntityIndex() throws {
        let f = try Fixture()
        try f.store.applyConfirmed(library(ServerLog(library: f.store.libraryID), articles: 5)[0])
        try f.store.writer.withLock { db in try db.execute("DROP INDEX chronicle_log_by_entity") }
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.contains { !$0.passed && $0.detail.contains("chronicle_log_by_entity") })
    }
}
