import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
import ChronicleTesting

/// Damage to a store's file (a page the disk or a copy broke), told plainly (`store_damaged`),
/// reported by `verify`, and salvaged: everything still readable is kept, the projection is
/// rebuilt, and the server gives back what the log lost.
@Suite struct SalvageTests {
    typealias Pages = DamagedPages

    /// A device with history of its own and another's, and changes waiting to sync.
    static func library(_ h: SyncHarness, confirmed: Int, pending: Int) async throws -> (a: TestDevice, b: TestDevice) {
        let a = try h.device("A")
        let b = try h.device("B")
        // In rounds of a sync each: the log keeps a block per confirmed batch, and its table spans several pages.
        let workload = Workload(seed: 21)
        for start in stride(from: 0, to: confirmed, by: max(1, confirmed / 16)) {
            try workload.run(min(max(1, confirmed / 16), confirmed - start), on: a)
            await a.sync()
        }
        try Workload(seed: 22).run(confirmed / 4, on: b)
        await b.sync()
        await a.sync()
        try Workload(seed: 23).run(pending, on: a)
        return (a, b)
    }

    @Test func aDamagedProjectionPageLosesNothing() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b) = try await Self.library(h, confirmed: 300, pending: 40)
        let digest = try a.store.digest()
        let pending = try a.store.pendingOps().map(\.opID)
        let path = a.store.path
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "article", in: path), in: path)

        let damaged = try DeviceStore.open(at: path)
        let verified = try damaged.verify()
        #expect(!verified.passed)
        #expect(verified.checks.contains { !$0.passed && $0.detail.contains("chronicle salvage") })
        #expect(throws: (any Error).self) { _ = try damaged.rows("article") }

        let report = try DeviceStore.salvage(at: path)
        #expect(report.lostNothing)
        #expect(report.digest == digest, "the projection rebuilt from the kept log and outbox is the one before the damage")
        #expect(report.pendingKept == pending.count && report.pendingLost.isEmpty)
        #expect(FileManager.default.fileExists(atPath: report.damagedPath))

        let back = try h.device("A2", opening: path, token: a.token)
        #expect(try back.store.pendingOps().map(\.opID) == pending)
        #expect(try back.store.verify().passed)
        let synced = await back.sync()
        #expect(synced.pushed == pending.count)
        await b.sync()
        #expect(try back.store.digest() == (try h.library.digest()))
        #expect(try b.store.digest() == (try h.library.digest()))
    }

    /// A sync that meets a broken page stops with the store's own code, not as a refusal by the
    /// server, and the store salvaged syncs on.
    @Test func aSyncThatMeetsABrokenPageSaysTheStoreIsDamaged() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b) = try await Self.library(h, confirmed: 300, pending: 0)
        await a.sync()
        let path = a.store.path
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "article", in: path), in: path)
        try Workload(seed: 24).run(60, on: b)
        await b.sync()

        let damaged = try h.device("A2", opening: path, token: a.token)
        let report = await damaged.engine.syncOnce()
        guard case .blocked(let reason) = report.outcome else {
            Issue.record("a sync over a broken page ended \(report.outcome)")
            return
        }
        #expect(reason.hasSuffix("[store_damaged]") && reason.contains("chronicle salvage"), "\(reason)")

        _ = try DeviceStore.salvage(at: path)
        let back = try h.device("A3", opening: path, token: a.token)
        await back.sync()
        #expect(try back.store.digest() == (try h.library.digest()))
    }

    @Test func aDamagedLogPageIsPulledAgainFromTheServer() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b) = try await Self.library(h, confirmed: 800, pending: 30)
        let pending = try a.store.pendingOps().map(\.opID)
        let path = a.store.path
        try Pages.checkpoint(path)
        try Pages.damageMiddleLeaf(of: "chronicle_log_blocks", in: path)

        let report = try DeviceStore.salvage(at: path)
        #expect(!report.lostNothing)
        let log = try #require(report.tables.first { $0.name == "chronicle_log_blocks" })
        let lost = try #require(log.unreadable.first)
        // The history is kept up to the first block that cannot be read (its key follows the last readable one's).
        #expect(report.confirmedKept >= lost.lowerBound - 1 && report.confirmedKept < lost.upperBound, "\(report.confirmedKept) \(lost)")
        #expect(report.confirmedKept < report.confirmedBefore)
        // A's own confirmed ops in the log past the cut are queued again (the server may have lost
        // them); the server answers them as duplicates.
        #expect(report.requeued > 0)
        #expect(report.pendingKept == pending.count + report.requeued && report.pendingLost.isEmpty)

        let back = try h.device("A2", opening: path, token: a.token)
        #expect(try back.store.verify().passed)
        let synced = await back.sync()
        #expect(synced.pulled >= Int(report.confirmedBefore - report.confirmedKept), "the server gives back what the log lost")
        #expect(synced.pushed == pending.count + report.requeued)
        #expect(try back.store.pendingOps().isEmpty)
        await b.sync()
        let server = try h.library
        let logged = try server.allOps().map(\.opID)
        #expect(Set(logged).count == logged.count, "no op twice in the server's log")
        #expect(Set(logged).isSuperset(of: pending))
        #expect(try back.store.digest() == (try server.digest()))
        #expect(try b.store.digest() == (try server.digest()))
        #expect(try back.store.verify().passed)
    }

    /// The server restored from a backup, and this device's own ops past it confirmed on a page
    /// of its log that broke: their last copies are gone from everywhere. Going back to where the
    /// two agree, the device gives their numbers up, so its outbox still accounts for every
    /// number (`verify` failed there: seeds 724 and 746 of the damage soak), and the rest syncs.
    @Test func ownOpsLostWithABrokenPageAndARestoredServerAreGivenUpWhenTheDeviceGoesBack() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 25).run(100, on: a)
        await a.sync()
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        let workload = Workload(seed: 26)
        for _ in 0..<14 {
            try workload.run(50, on: a)
            await a.sync()
        }
        let head = try h.library.head
        let path = a.store.path
        try Pages.checkpoint(path)
        try Pages.damageMiddleLeaf(of: "chronicle_log_blocks", in: path)
        let report = try DeviceStore.salvage(at: path)
        #expect(try #require(report.tables.first { $0.name == "chronicle_log_blocks" }?.unreadable.first) != nil)
        // Every op is A's: past the kept point, those of readable blocks are queued again, the rest are gone.
        let unreadable = Int(report.confirmedBefore - report.confirmedKept) - report.requeued
        #expect(unreadable > 0 && report.confirmedKept >= 100, "the broken page holds ops the backup does not")

        // The server runs on the backup: it lost every op after the first 100.
        let restored = try SyncService(dataDirectory: backup)
        let back = try h.device("A2", opening: path, token: a.token)
        // What its next sync finds out (`cursor_ahead`): it goes back to the 100 ops they agree on.
        let rewound = try back.store.rewind(toAgreedSeq: 100)
        #expect(rewound.lost == unreadable, "the numbers of the ops on the broken page are given up")
        let wentBack = try back.store.verify()
        #expect(wentBack.passed, "\(wentBack.checks.filter { !$0.passed })")
        let engine = SyncEngine(store: back.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: a.token),
                                random: { 0.5 })
        for _ in 0..<3 { _ = await engine.syncOnce() }
        let verified = try back.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed })")
        #expect(try back.store.pendingOps().isEmpty)
        let library = try restored.library(h.user.libraryID)
        let ops = try library.allOps()
        // Every op but those on the broken page is back, or refused where it needed one of those
        // (an edit of a row created there).
        let refused = try back.store.notices().count
        #expect(ops.count + refused == Int(head) - unreadable, "\(ops.count) ops and \(refused) refusals of \(head)")
        // (A page of the log's blocks holds a few hundred ops, more than a page of rows did: the edits of rows
        // created on it are refused.)
        #expect(Double(refused) < Double(ops.count) * 0.1)
        #expect(Set(ops.map(\.opID)).count == ops.count)
        #expect(try back.store.digest() == library.digest())
    }

    @Test func queuedChangesOnADamagedPageAreReportedLostAndTheRestSync() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b) = try await Self.library(h, confirmed: 20, pending: 600)
        let pending = try a.store.pendingOps()
        let path = a.store.path
        try Pages.checkpoint(path)
        try Pages.damageMiddleLeaf(of: "chronicle_outbox", in: path)

        let report = try DeviceStore.salvage(at: path)
        #expect(!report.lostNothing)
        let lost = report.pendingLost.reduce(0) { $0 + $1.count }
        #expect(lost > 0 && report.pendingKept + lost == pending.count, "every queued op is kept or named lost")
        #expect(report.confirmedKept == report.confirmedBefore)
        let lostSeqs = Set(report.pendingLost.flatMap { Array($0) })
        let kept = pending.filter { !lostSeqs.contains($0.deviceSeq) }.map(\.opID)

        let back = try h.device("A2", opening: path, token: a.token)
        #expect(try back.store.pendingOps().map(\.opID) == kept)
        #expect(try back.store.verify().passed, "the numbers of the lost ops are given up")
        await back.sync()
        await back.sync()
        #expect(try back.store.pendingOps().isEmpty)
        await b.sync()
        let server = try h.library
        // Each kept op reached the server, or was refused there with a notice (an op on a row that
        // one of the lost ops created: the server has no such row).
        let logged = Set(try server.allOps().map(\.opID))
        let refused = try back.store.notices()
        #expect(refused.allSatisfy { $0.code == "unknown_entity" }, "\(refused.map(\.code))")
        #expect(logged.union(refused.map(\.op.opID)).isSuperset(of: kept))
        #expect(refused.count < kept.count / 2)
        #expect(try back.store.digest() == (try server.digest()))
        #expect(try b.store.digest() == (try server.digest()))
    }

    /// The outbox's last page broken: its end cannot be read, so the row ids up to the last
    /// device seq are searched (not without bound), and the ops on that page are named lost.
    @Test func theOutboxsLastPageDamaged() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, _) = try await Self.library(h, confirmed: 20, pending: 600)
        let pending = try a.store.pendingOps()
        let path = a.store.path
        try Pages.checkpoint(path)
        let children = try Pages.children(of: try Pages.rootPage(of: "chronicle_outbox", in: path), in: path)
        try Pages.damage(page: try #require(children.last), in: path)

        let report = try DeviceStore.salvage(at: path)
        let lost = report.pendingLost.reduce(0) { $0 + $1.count }
        #expect(lost > 0 && report.pendingKept + lost == pending.count)
        #expect(report.pendingLost.last?.upperBound == pending.last?.deviceSeq, "the lost ops run to the last one queued")
        let back = try h.device("A2", opening: path, token: a.token)
        #expect(try back.store.verify().passed)
        await back.sync()
        #expect(try back.store.pendingOps().isEmpty)
    }

    /// A compacted store: the ids of its sealed ops are made again from its segments, and a
    /// damaged segment cuts the history there (the server gives the rest back).
    @Test func sealedHistoryIsKeptOrCutAtItsFirstDamagedSegment() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b) = try await Self.library(h, confirmed: 1_200, pending: 10)
        var policy = CompactionPolicy()
        policy.keepOps = 100
        policy.segmentOpsMax = 50
        _ = try a.store.compact(policy)
        let digest = try a.store.digest()
        let path = a.store.path
        try Pages.checkpoint(path)
        let copy = path + ".copy"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let leafCopy = path + ".leaf"
        try FileManager.default.copyItem(atPath: path, toPath: leafCopy)
        func sealedIDs(_ path: String) throws -> Int64 {
            let db = try Database(path: path, options: { var o = Database.Options(); o.readOnly = true; return o }())
            return try db.scalarInt("SELECT count(*) FROM chronicle_op_ids WHERE server_seq > 0") ?? 0
        }
        let ids = try sealedIDs(path)
        #expect(ids > 1_000)

        // The table of sealed op ids unreadable: made again from the segments, nothing lost.
        try Pages.damage(page: try Pages.rootPage(of: "chronicle_op_ids", in: path), in: path)
        let report = try DeviceStore.salvage(at: path)
        #expect(report.lostNothing, "\(report.tables)")
        #expect(report.tables.first { $0.name == "chronicle_op_ids" }?.madeAgain == true)
        #expect(report.digest == digest)
        #expect(try sealedIDs(path) == ids, "every sealed op's id is kept")

        // One leaf of it broken (its keys are 16-byte blobs): the rest is read range of keys by
        // range, and only that page's ids are made again.
        try Pages.damageMiddleLeaf(of: "chronicle_op_ids", in: leafCopy)
        let leaf = try DeviceStore.salvage(at: leafCopy)
        let table = try #require(leaf.tables.first { $0.name == "chronicle_op_ids" })
        #expect(!table.lostWhole && !table.unreadableKeys.isEmpty && table.madeAgain, "\(table)")
        #expect(table.rowsCopied > ids / 2 && table.rowsCopied < ids, "\(table.rowsCopied) of \(ids)")
        #expect(leaf.lostNothing && leaf.digest == digest)
        #expect(try sealedIDs(leafCopy) == ids)

        // A segment unreadable: the history is kept up to it, and pulled again after it.
        try Pages.damageMiddleLeaf(of: "chronicle_segments", in: copy)
        let cut = try DeviceStore.salvage(at: copy)
        #expect(cut.segmentsDropped > 0)
        #expect(cut.confirmedKept < cut.confirmedBefore)
        let back = try h.device("A2", opening: copy, token: a.token)
        #expect(try back.store.verify().passed)
        await back.sync()
        await b.sync()
        #expect(try back.store.digest() == (try h.library.digest()))
        #expect(try back.store.verify().passed)
    }

    /// A library whose file on the server is damaged: 503 `library_damaged` with a Retry-After
    /// (devices keep what they sent and try again), not a 500 with SQLite's words.
    @Test func aDamagedLibraryOnTheServerAnswers503LibraryDamaged() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 31).run(300, on: a)
        await a.sync()
        let path = try h.library.path
        let libraryID = h.user.libraryID
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "chronicle_log", in: path), in: path)
        // A server started over the damaged file (the harness's own has its pages cached).
        let fresh = try SyncService(dataDirectory: h.directory + "/server", schemas: [h.schema])
        func expectDamaged(_ error: ProtocolError, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(error.status == 503 && error.code == ProtocolError.Code.libraryDamaged, "\(error)", sourceLocation: sourceLocation)
            #expect(error.retryAfterSeconds != nil && error.message.contains("backup"), sourceLocation: sourceLocation)
        }
        do {
            _ = try await fresh.pull(library: libraryID, after: 0, limit: 100, waitMilliseconds: 0, token: a.token)
            Issue.record("a pull from a damaged library was answered")
        } catch {
            expectDamaged(error)
        }
        try Workload(seed: 32).run(5, on: a)
        let segment = try Segment(libraryID: libraryID, ops: try a.store.pendingOps())
        do {
            _ = try await fresh.push(segment, token: a.token)
            Issue.record("a push into a damaged library was answered")
        } catch {
            expectDamaged(error)
        }
        #expect(try a.store.pendingOps().count == segment.ops.count, "the device keeps what it could not send")
    }

    @Test func aStoreWhoseListOfTablesIsDamagedIsRefusedAndLeftAsItWas() throws {
        let directory = NSTemporaryDirectory() + "chronicle-salvage-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.chronicle"
        do {
            let store = try DeviceStore.create(at: path, schema: .readItLater, libraryID: UUID(), deviceID: UUID())
            for i in 0..<5 { _ = try store.write("article.save", payload: ["url": .text("https://example.org/\(i)")]) }
        }
        try Pages.checkpoint(path)
        try Pages.damage(page: 1, in: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        #expect { _ = try DeviceStore.open(at: path) } throws: { ($0 as? ChronicleError)?.code == .storeDamaged }
        #expect { _ = try DeviceStore.salvage(at: path) } throws: { error in
            guard let error = error as? ChronicleError else { return false }
            return error.code == .storeDamaged && error.message.contains("beyond salvage")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the damaged file is left exactly as it was")
        #expect(!FileManager.default.fileExists(atPath: path + ".salvage"))

        let text = directory + "/notes.txt"
        try Data("not a store at all".utf8).write(to: URL(fileURLWithPath: text))
        #expect { _ = try DeviceStore.salvage(at: text) } throws: { ($0 as? ChronicleError)?.code == .notAChronicleStore }

        #expect { _ = try DeviceStore.open(at: directory) } throws: { error in
            guard let error = error as? ChronicleError else { return false }
            return error.code == .notAChronicleStore && error.message.contains("directory")
        }
    }
}
