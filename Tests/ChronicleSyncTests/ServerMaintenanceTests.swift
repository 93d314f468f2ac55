import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore
import ChronicleTesting

/// The running server compacts libraries on its own (`MaintenancePolicy`): libraries that took
/// pushes are sealed once enough ops lie past what the policy keeps hot, pulls and new devices
/// read that history as before, and a compaction stopped between steps leaves a whole library.
@Suite struct ServerMaintenanceTests {
    /// Keep `keep` ops hot, seal whole segments of `segment` ops, snapshot every `snapshot` ops
    /// (nil: at every seal point).
    static func policy(keep: Int64, segment: Int, snapshot: Int64? = nil, every seconds: Double = 3_600) -> MaintenancePolicy {
        var maintenance = MaintenancePolicy()
        maintenance.compaction?.keepOps = keep
        maintenance.compaction?.segmentOpsMax = segment
        maintenance.compaction?.snapshotEveryOps = snapshot
        maintenance.checkIntervalSeconds = seconds
        return maintenance
    }

    static func sealedThrough(_ h: SyncHarness) throws -> Int64 {
        try h.library.read { db in try LogTables.sealedUpTo(in: db) }
    }

    static func segmentCount(_ h: SyncHarness) throws -> Int64 {
        try h.library.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_segments") ?? 0 }
    }

    /// Waits (at most 20 s) until the server's metrics count `ops` sealed by its own compactions
    /// (they are counted once a compaction has finished, its snapshot included).
    static func waitUntilSealed(_ h: SyncHarness, ops: Int64) async throws -> Bool {
        for _ in 0..<400 {
            if h.service.metrics.render().contains("chronicle_ops_sealed_total \(ops)\n") { return true }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return false
    }

    /// `stop()` waited for the maintenance thread's one end signal: a second call waited forever.
    /// The calls run on threads of their own, so that a hang fails the test instead of the run.
    @Test func stoppingTheServerTwiceOrFromThreeThreadsAtOnceReturns() throws {
        let directory = NSTemporaryDirectory() + "chronicle-stop-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for concurrent in [1, 3] {
            let server = try SyncServer(dataDirectory: "\(directory)/\(concurrent)",
                                        maintenance: Self.policy(keep: 10, segment: 10, every: 0.01))
            let first = DispatchGroup()
            for _ in 0..<concurrent {
                first.enter()
                Thread { server.stop(); first.leave() }.start()
            }
            #expect(first.wait(timeout: .now() + 30) == .success, "\(concurrent) first stop() calls returned")
            let again = DispatchSemaphore(value: 0)
            Thread { server.stop(); again.signal() }.start()
            #expect(again.wait(timeout: .now() + 30) == .success, "a stop() after the first returned")
            #expect(server.service.maintenance.isStopping)
        }
    }

    @Test func aRunningServerSealsABusyLibraryOnItsOwnAndANewDeviceStillGetsEverything() async throws {
        let h = try SyncHarness(.http, maintenance: Self.policy(keep: 40, segment: 25, every: 0.05))
        let a = try h.device("A")
        #expect(try Workload(seed: 31).run(200, on: a) == 200)
        await a.sync()
        // 160 ops lie past the 40 kept hot: six whole segments of 25 are sealed, then a snapshot of
        // the head as it was then (the last pass ran once at least 190 ops had come in).
        #expect(try await Self.waitUntilSealed(h, ops: 150), "the server sealed the library by itself")
        #expect(try Self.sealedThrough(h) == 150)
        #expect(try Self.segmentCount(h) == 6)
        #expect(try (190...200).contains(h.library.latestSnapshotSeq() ?? 0))

        // More pushes make it due again; pushes go on while it compacts.
        try Workload(seed: 32).run(60, on: a)
        await a.sync()
        #expect(try await Self.waitUntilSealed(h, ops: 200))
        // A snapshot is due only once the seal point passes the newest one, which may be of a head
        // later than 200 already.
        #expect(try Self.sealedThrough(h) == 200 && (190...260).contains(h.library.latestSnapshotSeq() ?? 0) && Self.segmentCount(h) == 8)
        let metrics = h.service.metrics.render()
        #expect(metrics.contains("chronicle_compactions_total{result=\"ok\"} 2"))
        #expect(metrics.contains("chronicle_compactions_total{result=\"failed\"} 0"))

        // A new device reads the sealed history over HTTP, and everyone agrees.
        let b = try h.device("B")
        await b.sync()
        #expect(try b.store.cursor() == 260)
        try h.expectConverged()
        #expect(try h.library.allOps().count == 260, "sealing kept every op")
    }

    @Test func aPassCompactsLibrariesThatTookPushesOnceAWholeSegmentIsDue() async throws {
        let h = try SyncHarness(.inMemory, maintenance: Self.policy(keep: 50, segment: 20))
        let a = try h.device("A")
        try Workload(seed: 41).run(60, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().isEmpty, "10 ops past the 50 kept: less than a segment")
        try Workload(seed: 42).run(20, on: a)
        await a.sync()
        let results = h.service.runMaintenance()
        #expect(results.count == 1 && results.first?.library == h.user.libraryID && results.first?.failure == nil)
        #expect(results.first?.report?.opsSealed == 20 && results.first?.report?.segmentsWritten == 1, "30 past: one whole segment")
        #expect(try Self.sealedThrough(h) == 20)
        #expect(h.service.runMaintenance().isEmpty, "nothing changed since")

        // Ops that reach the library without a push (server-authored) are not looked at until
        // a pass over every library, which compacts what is due.
        for _ in 0..<20 { try h.library.appendServerOp("library.plan", entity: h.user.libraryID, payload: ["plan": .text("premium")]) }
        #expect(h.service.runMaintenance().isEmpty)
        let all = h.service.runMaintenance(all: true)
        #expect(all.map(\.report?.opsSealed) == [20])
        #expect(h.service.runMaintenance(all: true).isEmpty, "nothing due")

        await a.sync()
        let b = try h.device("B")
        await b.sync()
        try h.expectConverged()
    }

    /// A busy library is snapshotted every so many ops, not at every seal (a snapshot costs the
    /// library's whole state); a new device starts from the newest snapshot and pulls the sealed
    /// and hot ops after it.
    @Test func snapshotsComeEveryNOpsNotAtEverySealAndANewDeviceStartsFromTheNewest() async throws {
        let h = try SyncHarness(.inMemory, maintenance: Self.policy(keep: 10, segment: 10, snapshot: 50))
        let a = try h.device("A")
        var sealed: [Int64] = []
        var due: [Int64?] = []
        var snapshots: [Int64?] = []
        for (seed, ops) in [(71, 40), (72, 30), (73, 20), (74, 40)] {
            try Workload(seed: UInt64(seed)).run(ops, on: a)
            await a.sync()
            let report = try #require(h.service.runMaintenance().first?.report)
            sealed.append(report.plan.sealThrough)
            due.append(report.plan.snapshotAt)
            snapshots.append(report.snapshotSeq)
        }
        // Sealed through 30, 60, 80, 120: a snapshot is due once the seal point is 50 ops past the
        // newest one (none at first), and holds the state at the head then (70, 130).
        #expect(sealed == [30, 60, 80, 120])
        #expect(due == [nil, 60, nil, 120])
        #expect(snapshots == [nil, 70, nil, 130])
        #expect(try h.library.read { db in try db.query("SELECT seq FROM chronicle_snapshots ORDER BY seq") { $0.int(0) } } == [130])

        try Workload(seed: 75).run(35, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().first?.report?.snapshotSeq == nil, "sealed through 150: 20 past the snapshot")
        #expect(try Self.sealedThrough(h) == 150 && h.library.latestSnapshotSeq() == 130)

        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 100
        let b = try h.device("B", configuration: configuration)
        let report = await b.sync()
        #expect(report.bootstrappedAt == 130, "from the newest snapshot, then 131...150 from segments and 151...165 from the log")
        #expect(try b.store.cursor() == 165)
        try h.expectConverged()
    }

    /// Devices starting from the snapshot at the same time share one copy of its frame, read
    /// straight from its row; the copy lives only while a response holds it, and a newer
    /// snapshot is read afresh.
    @Test func devicesStartingFromTheSnapshotAtOnceShareOneCopyOfIt() async throws {
        let h = try SyncHarness(.http, maintenance: Self.policy(keep: 10, segment: 10))
        let a = try h.device("A")
        try Workload(seed: 81).run(60, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().first?.report?.snapshotSeq == 60)
        let token = try h.service.accounts.registerDevice(user: "ada", password: h.password, deviceID: UUID()).token
        let id = h.user.libraryID
        weak var released: SharedBytes?
        do {
            let first = try h.service.sharedSnapshotNow(library: id, token: token)
            let second = try h.service.sharedSnapshotNow(library: id, token: token)
            #expect(first.seq == 60 && first.frame === second.frame, "one copy while one is held")
            #expect(try first.frame.bytes == h.library.latestSnapshot()?.frame)
            #expect(try SnapshotCodec.decode(first.frame.bytes).seq == 60)
            released = first.frame
        }
        #expect(released == nil, "freed once nobody holds it")

        try Workload(seed: 82).run(30, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().first?.report?.snapshotSeq == 90)
        #expect(try h.service.sharedSnapshotNow(library: id, token: token).seq == 90)

        // Over HTTP, eight new devices at once: each starts from the snapshot and gets the rest.
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 1
        let devices = try (0..<8).map { try h.device("N\($0)", configuration: configuration) }
        let reports = await withTaskGroup(of: SyncReport.self) { group in
            for device in devices { group.addTask { await device.sync() } }
            var all: [SyncReport] = []
            for await report in group { all.append(report) }
            return all
        }
        #expect(reports.allSatisfy { $0.bootstrappedAt == 90 }, "\(reports.map(\.bootstrappedAt))")
        try h.expectConverged()
        #expect(throws: ProtocolError.self) { try h.service.sharedSnapshotNow(library: id, token: "not a token") }
    }

    /// A library in use for years with a one-day horizon: the pass seals whole segments, writes
    /// a snapshot where the old history ends, and drops it; a device away since then starts from
    /// the snapshot and gets everything after it. With the server's default snapshot cadence
    /// (100,000 ops), the one at the drop point is the only one.
    @Test func aPassWithAHorizonDropsOldHistoryAndADeviceAwaySinceStartsFromTheSnapshot() async throws {
        let clock = ManualClock()
        var maintenance = Self.policy(keep: 10, segment: 20, snapshot: MaintenancePolicy().compaction?.snapshotEveryOps)
        maintenance.compaction?.horizonMilliseconds = 86_400_000
        let h = try SyncHarness(.inMemory, maintenance: maintenance, clock: clock)
        let a = try h.device("A")
        let b = try h.device("B")
        try Workload(seed: 61).run(50, on: a)
        await a.sync()
        await b.sync()
        try Workload(seed: 62).run(50, on: a)
        await a.sync()
        clock.advance(milliseconds: 2 * 86_400_000)
        try Workload(seed: 63).run(30, on: a)
        await a.sync()

        let results = h.service.runMaintenance()
        let report = try #require(results.first?.report, "\(results)")
        // 120 ops past the 10 kept hot: six segments. The first 100 are two days old: history ends there.
        #expect(report.opsSealed == 120 && report.plan.snapshotAt == nil)
        #expect(report.historyDroppedThrough == 100 && report.plan.snapshotAtDrop == 100)
        #expect(try h.library.latestSnapshotSeq() == 100)
        #expect(try h.library.read { db in try LogTables.historyBase(in: db) } == 100)
        #expect(try h.library.allOps().map(\.serverSeq) == (101...130).map { $0 })

        let back = await b.sync()
        #expect(back.bootstrappedAt == 100, "from the snapshot at the drop point, then 101...130")
        try h.expectConverged()
        #expect(h.service.runMaintenance(all: true).isEmpty, "nothing more is due")
    }

    /// A pull names the op the server holds at its cursor (`PullPage.afterOpID`, which a device
    /// compares with its own to find out that the server lost history) in sealed history as well as
    /// in the log, and past the retention horizon, where the op ids are kept.
    @Test func aPullNamesTheOpAtItsCursorInSealedHistoryAndPastTheHorizon() async throws {
        let clock = ManualClock()
        var maintenance = Self.policy(keep: 10, segment: 20)
        maintenance.compaction?.horizonMilliseconds = 86_400_000
        let h = try SyncHarness(.inMemory, maintenance: maintenance, clock: clock)
        let a = try h.device("A")
        try Workload(seed: 64).run(50, on: a)
        await a.sync()
        clock.advance(milliseconds: 2 * 86_400_000)
        try Workload(seed: 65).run(30, on: a)
        await a.sync()
        let ops = try h.library.allOps()
        let head = Int64(ops.count)
        #expect(h.service.runMaintenance().first?.report?.historyDroppedThrough ?? 0 > 0)
        let base = try h.library.read { db in try LogTables.historyBase(in: db) }
        let sealed = try Self.sealedThrough(h)
        #expect(base >= 20 && sealed > base && sealed < head, "base \(base), sealed \(sealed), head \(head)")
        for cursor in [base + 1, sealed, sealed + 1, head] {
            #expect(try h.library.pull(after: cursor, limit: 1).afterOpID == ops[Int(cursor) - 1].opID, "at \(cursor)")
        }
        // Past the horizon the pull is refused (410), but the server still knows the op there.
        #expect(try h.library.read { db in try ServerLibrary.opID(at: base, in: db) } != nil)
        #expect(try h.library.read { db in try ServerLibrary.opID(at: head + 1, in: db) } == nil, "nothing past the head")
    }

    /// A library file of format v3 gains the index that finds a sealed op by its seq when the
    /// server opens it, and answers as before.
    @Test func aV3LibraryFileLearnsToFindSealedOpsBySeq() async throws {
        let directory = NSTemporaryDirectory() + "chronicle-v3-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/library.sqlite"
        let libraryID = UUID()
        do {
            let library = try ServerLibrary.openOrCreate(at: path, libraryID: libraryID, schema: .readItLater)
            #expect(library.head == 0)
        }
        let db = try Database(path: path)
        try db.execute("DROP INDEX chronicle_sealed_ops_by_seq")
        try db.execute("UPDATE chronicle_meta SET value = 3 WHERE key = 'format_version'")
        let reopened = try ServerLibrary.openOrCreate(at: path, libraryID: libraryID, schema: .readItLater)
        #expect(try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE name = 'chronicle_sealed_ops_by_seq'") == 1)
        #expect(try LogTables.meta("format_version", in: db).integerValue == ServerLibrary.formatVersion)
        #expect(ServerLibrary.formatVersion == 4)
        #expect(try reopened.pull(after: 0, limit: 10).ops.isEmpty)
    }

    @Test func aCompactionStoppedBetweenStepsLeavesAWholeLibraryAndTheNextFinishesIt() async throws {
        let h = try SyncHarness(.inMemory, maintenance: .off)
        let a = try h.device("A")
        try Workload(seed: 51).run(100, on: a)
        await a.sync()
        let digest = try h.library.digest()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 10
        policy.givesSpaceBack = false
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try h.library.compact(policy, afterStep: { step, _ in if step == 3 { throw Stop() } })
        }
        #expect(try Self.sealedThrough(h) == 30)
        #expect(try h.library.digest() == digest)
        #expect(try h.library.allOps().count == 100)
        let b = try h.device("B")
        await b.sync()
        try h.expectConverged()

        #expect(h.service.runMaintenance(all: true).isEmpty, "maintenance is off")
        let report = try h.library.compact(policy)
        #expect(report.opsSealed == 70 && report.plan.snapshotAt == 100 && report.snapshotSeq == 100)
        #expect(try h.library.digest() == digest)
        let c = try h.device("C")
        await c.sync()
        try h.expectConverged()
    }

    /// The device side: an engine configured with a compaction policy seals whole segments of
    /// its own log after a round that synced; the state and every op stay.
    @Test(arguments: TransportKind.allCases)
    func anEngineWithACompactionPolicySealsTheDevicesLogAfterARound(kind: TransportKind) async throws {
        let h = try SyncHarness(kind, maintenance: .off)
        var configuration = SyncEngine.Configuration()
        configuration.backoffBaseMilliseconds = 5
        configuration.backoffMaxMilliseconds = 50
        var policy = CompactionPolicy()
        policy.keepOps = 20
        policy.segmentOpsMax = 25
        policy.givesSpaceBack = false
        configuration.compaction = policy
        let a = try h.device("A", configuration: configuration)
        try Workload(seed: 71).run(110, on: a)
        let first = await a.sync()
        // 90 ops past the 20 kept hot: three whole segments of 25.
        #expect(first.sealed == 75)
        #expect(try a.store.segments().count == 3)
        #expect(try a.store.verify().passed)
        #expect(await a.sync().sealed == 0, "15 ops past: less than a segment")
        try Workload(seed: 72).run(10, on: a)
        #expect(await a.sync().sealed == 25)
        try h.expectConverged()
        #expect(try a.store.rebuild(fromGenesis: true).digest == (try h.library.digest()))
    }

    @Test func aServerWithMaintenanceStopsPromptlyAndIdleOnesLookAtNothing() throws {
        let directory = NSTemporaryDirectory() + "chronicle-maintenance-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try SyncServer(dataDirectory: directory, maintenance: Self.policy(keep: 10, segment: 10, every: 0.01))
        Thread.sleep(forTimeInterval: 0.1)
        let start = Date()
        server.stop()
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(server.service.metrics.render().contains("chronicle_compactions_total{result=\"ok\"} 0"))
    }
}
