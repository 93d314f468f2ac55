import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore
import ChronicleTesting

/// The server's retention horizon: a device whose cursor is older gets 410, starts from
/// the snapshot, keeps its outbox and pushes it: nothing done offline is lost.
@Suite struct RetentionHorizonTests {
    /// Seals everything and drops all history older than a millisecond ago.
    static func compactWithHorizon(_ h: SyncHarness) throws -> CompactionReport {
        usleep(5_000)
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 250
        policy.horizonMilliseconds = 1
        return try h.service.compact(library: h.user.libraryID, policy: policy)
    }

    @Test(arguments: TransportKind.allCases)
    func aDeviceAwayPastTheHorizonWith500QueuedOpsStartsFromTheSnapshotAndPushesThemAll(kind: TransportKind) async throws {
        let h = try SyncHarness(kind)
        let a = try h.device("A")
        let b = try h.device("B")
        for i in 0..<10 { try a.save("Before the trip \(i)") }
        await a.sync()
        await b.sync()

        try Workload(seed: 11).run(500, on: a)
        let queued = try a.store.pendingOps()
        #expect(queued.count == 500)
        try Workload(seed: 12).run(200, on: b)
        await b.sync()
        let report = try Self.compactWithHorizon(h)
        #expect(report.historyDroppedThrough == (try h.library.head))

        let back = await a.sync()
        #expect(back.bootstrappedAt == report.historyDroppedThrough)
        #expect(back.pushed == 500 && back.rejected == 0)
        #expect(try a.store.pendingOps().isEmpty)
        let log = try h.library.allOps()
        #expect(Set(log.map(\.opID)).isSuperset(of: queued.map(\.opID)), "every op written offline reached the server")
        await b.sync()
        try h.expectConverged()
        // A new device starts from the snapshot too, then catches up with the tail.
        let c = try h.device("C")
        let first = await c.sync()
        #expect(first.bootstrappedAt == report.historyDroppedThrough)
        try h.expectConverged()
    }

    /// The server is restored from a backup, takes other ops past a device's cursor and drops that
    /// history behind its horizon before the device comes back. Pulls from the device's cursor are
    /// refused (410), so where the two last agreed cannot be looked for; the refusal names the op
    /// the server holds at that cursor, another one, and the device queues every op of its own
    /// again before it starts from the snapshot: the ones the server lost reach it, once.
    @Test func aDeviceAwayPastTheHorizonOfARestoredServerQueuesItsLostOpsAgain() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        for i in 0..<10 { try a.save("Before the backup \(i)") }
        await a.sync()
        await b.sync()
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        for i in 0..<5 { try a.save("Lost with the server \(i)") }
        await a.sync()
        let lost = try a.store.read { db in try db.query("SELECT op_id FROM chronicle_own_confirmed WHERE server_seq > 10") { UUID(uuidString: $0.text(0))! } }
        #expect(lost.count == 5)

        // The server runs on the copy: B writes there, and the history past A's cursor is dropped.
        let restored = try SyncService(dataDirectory: backup)
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        try Workload(seed: 13).run(40, on: b)
        #expect(await engine(b).syncOnce().outcome == .synced)
        usleep(5_000)
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.horizonMilliseconds = 1
        let compacted = try restored.compact(library: h.user.libraryID, policy: policy)
        let base = try #require(compacted.historyDroppedThrough)
        #expect(base > 15, "A's cursor is behind the horizon")

        try a.save("Queued on the way back")
        let back = await engine(a).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        #expect(back.bootstrappedAt == base)
        let rewound = try #require(back.rewound, "A found out that the server lost what it had from it")
        #expect(rewound.rewoundTo == 0 && rewound.requeued == 15)
        let library = try restored.library(h.user.libraryID)
        let log = try library.allOps()
        for id in lost + [try #require(try a.store.pendingOps().isEmpty ? log.last?.opID : nil)] {
            #expect(log.filter { $0.opID == id }.count == 1 && log.first { $0.opID == id }?.deviceID == a.store.deviceID, "\(id)")
        }
        #expect(try a.store.verify().passed)
        #expect(await engine(b).syncOnce().outcome == .synced)
        for device in [a, b] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
    }

    /// A device that started from the server's snapshot at seq S holds no op there, only the
    /// state. The server is then restored from a backup taken before S and takes other ops up to
    /// S: the device's cursor is not ahead, and no op of its own log can be compared. It kept the
    /// id of the op the server held at S when it started (`history_base_op_id`), finds that the
    /// server now holds another one there, and starts over from what the server holds.
    @Test func aDeviceThatStartedFromASnapshotFindsOutThatTheServerLostTheHistoryBeneathIt() async throws {
        let (h, a, b, c, fromSnapshot, backup) = try await Self.cStartsFromASnapshotPastABackup(keepingIncarnation: false)
        #expect(try c.store.historyBaseSeq() == 15 && c.store.cursor() == 15)

        let restored = try SyncService(dataDirectory: backup)
        func engine(_ device: TestDevice, _ configuration: SyncEngine.Configuration = SyncEngine.Configuration()) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       configuration: configuration, random: { 0.5 })
        }
        for i in 0..<5 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)
        let library = try restored.library(h.user.libraryID)
        #expect(library.head == 15, "the restored server's head is C's cursor again")

        let back = await engine(c, fromSnapshot).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        let rewound = try #require(back.rewound, "C found out that the server lost the history its snapshot held")
        #expect(rewound.rewoundTo == 0 && rewound.requeued == 0)
        #expect(try c.store.digest() == library.digest())
        #expect(try c.store.verify().passed)
        // A comes back, goes back to seq 10 and sends its five lost ops again; everyone agrees.
        #expect(await engine(a).syncOnce().rewound?.agreedSeq == 10)
        for device in [b, c] { #expect(await engine(device).syncOnce().outcome == .synced) }
        for device in [a, b, c] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
        #expect(try library.allOps().count == 20)
    }

    /// The same, with one op of C's own after the snapshot (seq 16), which the restored server lost
    /// too: the op at C's cursor differs, and C looks for where the two agree before seq 16. Its
    /// history starts at the snapshot (15), so nothing after the base was to be read, and the op
    /// at the base was not compared either: C went back to 15, kept the state of the history the
    /// server lost, and synced with a digest unlike the server's (simulator seeds 13661 and 13904
    /// of 400 steps). The op at the base is compared first now. The copy keeps the file's
    /// incarnation here, so that the op at the cursor is what tells.
    @Test func theOpAtTheBaseIsComparedWhereTheDisagreementIsRightAfterIt() async throws {
        let (h, a, b, c, fromSnapshot, backup) = try await Self.cStartsFromASnapshotPastABackup(keepingIncarnation: true)
        try c.save("C's op after the snapshot, lost too")
        #expect(await c.sync().outcome == .synced)                                        // seq 16
        #expect(try c.store.historyBaseSeq() == 15 && c.store.cursor() == 16)

        let restored = try SyncService(dataDirectory: backup)
        func engine(_ device: TestDevice, _ configuration: SyncEngine.Configuration = SyncEngine.Configuration()) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       configuration: configuration, random: { 0.5 })
        }
        for i in 0..<6 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seqs 11…16
        let library = try restored.library(h.user.libraryID)
        #expect(library.head == 16)

        let back = await engine(c, fromSnapshot).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        let rewound = try #require(back.rewound, "C found out that the server lost the history beneath its snapshot")
        #expect(rewound.rewoundTo == 0, "\(rewound)")
        #expect(try c.store.digest() == library.digest())
        #expect(try c.store.verify().passed)
        #expect(await engine(a).syncOnce().rewound?.agreedSeq == 10)
        #expect(await engine(b).syncOnce().outcome == .synced)
        #expect(await engine(c, fromSnapshot).syncOnce().outcome == .synced)
        for device in [a, b, c] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
        #expect(try library.allOps().filter { $0.deviceID == c.store.deviceID }.count == 1, "C's op, sent again, once")
    }

    /// Backs the server's data directory up to `server-backup`; `keepingIncarnation`: as a copy
    /// made by other means would, the copy keeps the library file's incarnation.
    static func backUp(_ h: SyncHarness, keepingIncarnation: Bool) throws -> String {
        let incarnation = try h.library.incarnation
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        if keepingIncarnation {
            try Database(path: backup + "/libraries/\(h.user.libraryID.lowercased).sqlite")
                .execute("UPDATE chronicle_meta SET value = ?1 WHERE key = ?2", [.text(incarnation.lowercased), .text(ServerLibrary.incarnationKey)])
        }
        return backup
    }

    /// A writes 10 ops, the server is backed up, A writes 5 more, the server compacts them all,
    /// and C (configured to start from a snapshot) starts from the snapshot at 15.
    static func cStartsFromASnapshotPastABackup(keepingIncarnation: Bool) async throws
        -> (SyncHarness, TestDevice, TestDevice, TestDevice, SyncEngine.Configuration, String) {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        var fromSnapshot = SyncEngine.Configuration()
        fromSnapshot.snapshotStartOpsMin = 1
        let c = try h.device("C", configuration: fromSnapshot)
        for i in 0..<10 { try a.save("Before the backup \(i)") }
        await a.sync()
        let backup = try backUp(h, keepingIncarnation: keepingIncarnation)
        for i in 0..<5 { try a.save("Lost with the server \(i)") }
        await a.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        _ = try h.service.compact(library: h.user.libraryID, policy: policy)
        #expect(await c.sync().bootstrappedAt == 15)
        return (h, a, b, c, fromSnapshot, backup)
    }

    /// Fails the calls numbered in `failing` (from 1) as a lost network would, and passes the rest on.
    final class FailingCalls: SyncTransport, @unchecked Sendable {
        let inner: any SyncTransport
        let failing: Set<Int>
        private let calls = Locked(0)
        init(_ inner: any SyncTransport, failing: Set<Int>) { self.inner = inner; self.failing = failing }
        private func next() throws(SyncError) {
            let call = calls.withLock { $0 += 1; return $0 }
            if failing.contains(call) { throw .transient(reason: "Could not connect to the server (call \(call) lost).", retryAfterSeconds: nil) }
        }
        func push(_ segment: Segment) async throws(SyncError) -> PushResponse { try next(); return try await inner.push(segment) }
        func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
            try next(); return try await inner.pull(after: cursor, limit: limit, waitMilliseconds: waitMilliseconds)
        }
        func verdict(for entity: UUID) async throws(SyncError) -> Verdict { try next(); return try await inner.verdict(for: entity) }
        func snapshot() async throws(SyncError) -> SnapshotFrame { try next(); return try await inner.snapshot() }
    }

    /// A backs up 10 ops, then writes 4 more (seqs 11…14) and C one (seq 15) that a server
    /// restored from the backup (at `backup`) will have lost; A has pulled up to 15.
    static func backupThenFourOfAsOpsAndOneOfCs() async throws -> (SyncHarness, TestDevice, TestDevice, TestDevice, String) {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        let c = try h.device("C")
        for i in 0..<10 { try a.save("Before the backup \(i)") }
        await a.sync()                                                                    // seqs 1…10
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        for i in 0..<4 { try a.save("Lost with the server \(i)") }
        await a.sync()                                                                    // seqs 11…14
        try c.save("C's op, lost and then back at the same seq")
        await c.sync()                                                                    // seq 15
        await a.sync()
        return (h, a, b, c, backup)
    }

    /// A device finds out that the restored server lost ops it holds (`cursor_ahead`), and the
    /// network goes away while it looks for where the two agree. By its next round the server has
    /// moved on: another device's lost op came back at the very seq of this device's cursor, so
    /// the op there matches and nothing else shows the disagreement. The store kept it
    /// (`noteDisagreement`), so the search is taken up again, and the device's own lost ops are
    /// sent again (simulator seed 13267 of 400 steps: they were lost, and the device diverged).
    @Test func aSearchForWhereTheTwoAgreeThatTheNetworkCutShortIsTakenUpAgain() async throws {
        let (h, a, b, c, backup) = try await Self.backupThenFourOfAsOpsAndOneOfCs()
        #expect(try a.store.cursor() == 15)

        let restored = try SyncService(dataDirectory: backup)
        var once = SyncEngine.Configuration()
        once.retriesPerRoundMax = 0
        func engine(_ device: TestDevice, failing: Set<Int> = []) -> SyncEngine {
            let transport = InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token)
            return SyncEngine(store: device.store, transport: FailingCalls(transport, failing: failing), configuration: once, random: { 0.5 })
        }
        // A's first pull is told the log ends at 10; the search's first page is lost with the network.
        let cut = await engine(a, failing: [2]).syncOnce()
        #expect(cut.outcome != .synced && cut.rewound == nil, "\(cut.outcome)")
        #expect(try a.store.noticedDisagreement() == 11)

        for i in 0..<4 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seqs 11…14
        let back = await engine(c).syncOnce()                                              // C's op again, at 15
        #expect(back.rewound?.agreedSeq == 10 && back.outcome == .synced, "\(back.outcome)")
        let library = try restored.library(h.user.libraryID)
        #expect(library.head == 15)
        let fifteen = try #require(try library.allOps().last)
        #expect(try a.store.holdsConfirmed(fifteen.opID, at: 15) == true, "the op at A's cursor matches")

        let resumed = await engine(a).syncOnce()
        #expect(resumed.outcome == .synced, "\(resumed.outcome)")
        #expect(resumed.rewound?.agreedSeq == 10, "the search was taken up again")
        #expect(resumed.rewound?.requeued == 4)
        #expect(try a.store.noticedDisagreement() == nil)
        for device in [b, c] { #expect(await engine(device).syncOnce().outcome == .synced) }
        for device in [a, b, c] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
        #expect(try library.allOps().count == 19, "A's four lost ops are in the log again")
        #expect(try a.store.verify().passed)
    }

    /// The same restored server, and A comes back only once C's lost op is back at A's cursor:
    /// nothing at the cursor shows that the server lost A's four ops. The backup gave the library
    /// file an incarnation of its own, the server's pages name it, and A, which synced with the
    /// file before, compares its whole history before it pulls on.
    @Test func aDeviceThatMissedTheRestoreFindsItByTheLibrarysIncarnation() async throws {
        let (h, a, b, c, backup) = try await Self.backupThenFourOfAsOpsAndOneOfCs()
        let before = try #require(try a.store.serverIncarnation())
        #expect(try h.service.library(h.user.libraryID).incarnation == before)

        let restored = try SyncService(dataDirectory: backup)
        let library = try restored.library(h.user.libraryID)
        #expect(library.incarnation != before, "the backup's copy is an incarnation of its own")
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        for i in 0..<4 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seqs 11…14
        #expect(await engine(c).syncOnce().rewound?.agreedSeq == 10)                      // C's op again, at 15
        #expect(try a.store.holdsConfirmed(try #require(try library.allOps().last).opID, at: 15) == true, "the op at A's cursor matches")

        let back = await engine(a).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        #expect(back.rewound?.agreedSeq == 10 && back.rewound?.requeued == 4, "\(String(describing: back.rewound))")
        #expect(try a.store.serverIncarnation() == library.incarnation)
        #expect(await engine(a).syncOnce().rewound == nil, "once compared, the new incarnation is kept")
        for device in [b, c] { #expect(await engine(device).syncOnce().outcome == .synced) }
        for device in [a, b, c] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
        #expect(try library.allOps().count == 19, "A's four lost ops are in the log again")
        #expect(try a.store.verify().passed)
    }

    /// The restored server lost A's ops #3…#5, which A had dropped past its own horizon since,
    /// and #6…#8, which A still holds confirmed. Its data directory was copied by other means
    /// (it keeps the file's incarnation), and the op at A's cursor is C's, pushed again at the
    /// same seq: nothing on the pull shows the loss. The server's `device_seq_gap` (it waits for
    /// #3) does: A starts over from what the server holds, sends #6…#8 again, and #3…#5 are gone
    /// with the server's data (simulator seed 13594 of 400 steps: two devices stayed wedged on
    /// the gap, and one of them never sent its lost ops again).
    @Test func ownOpsTheServerLostBeneathAHistoryTheDeviceDroppedAreFoundByTheGapTheyLeave() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        let c = try h.device("C")
        for i in 0..<2 { try a.save("Before the backup \(i)") }
        await a.sync()                                                                    // seqs 1, 2
        let incarnation = try h.library.incarnation
        let backup = try Self.backUp(h, keepingIncarnation: true)
        for i in 0..<6 { try a.save("Lost with the server \(i)") }
        await a.sync()                                                                    // seqs 3…8: A's #3…#8
        let lost = try a.store.read { db in try db.query("SELECT op_id FROM chronicle_own_confirmed WHERE server_seq > 5") { UUID(uuidString: $0.text(0))! } }
        try c.save("C's op, lost and then back at the same seq")
        await c.sync()                                                                    // seq 9
        await a.sync()
        usleep(5_000)
        var policy = CompactionPolicy()
        policy.keepOps = 4
        policy.horizonMilliseconds = 1
        #expect(try a.store.compact(policy).historyDroppedThrough == 5, "A keeps seqs 6…9 and drops the rest")
        #expect(try a.store.historyBaseSeq() == 5 && a.store.cursor() == 9)

        let restored = try SyncService(dataDirectory: backup)
        let library = try restored.library(h.user.libraryID)
        #expect(library.incarnation == incarnation)
        var once = SyncEngine.Configuration()
        once.retriesPerRoundMax = 0
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       configuration: once, random: { 0.5 })
        }
        for i in 0..<6 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seqs 3…8
        #expect(await engine(c).syncOnce().rewound?.agreedSeq == 2)                       // C's op again, at 9
        #expect(library.head == 9)
        #expect(try a.store.holdsConfirmed(try #require(try library.allOps().last).opID, at: 9) == true, "the op at A's cursor matches")

        try a.save("Queued on the way back")
        let back = await engine(a).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        let rewound = try #require(back.rewound, "A found out by the gap that the server lost its ops")
        #expect(rewound.rewoundTo == 0 && rewound.requeued == 3, "\(rewound)")
        #expect(rewound.lost + back.lostWithServer == 3, "#3…#5 are gone: \(rewound), \(back.lostWithServer)")
        #expect(try a.store.pendingOps().isEmpty)
        let log = try library.allOps()
        for id in lost { #expect(log.filter { $0.opID == id }.count == 1, "\(id)") }
        #expect(log.filter { $0.deviceID == a.store.deviceID }.count == 6, "#1, #2, the three sent again and the new one")
        let verified = try a.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")
        for device in [b, c] { #expect(await engine(device).syncOnce().outcome == .synced) }
        for device in [a, b, c] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
    }

    /// A restored server took other ops after A's history, and one that A held at seq 11 (D's, lost
    /// with the server and pushed again) came back after the server's horizon, at 15; C's op came
    /// back at A's very cursor (13), so the 410's `afterOpID` matches. A started from the snapshot
    /// keeping the ids of its own history, and the snapshot's tail held one of them at another seq:
    /// every round was refused as `duplicate_op`, for good (simulator seed 31385 with damage, files
    /// and new devices). A's own op #11, which the server lost, was also held only in that history.
    /// The library's other incarnation (or, where a copy kept it, the id met again) shows that A's
    /// history is not the server's: A queues its own ops again first, and starts over.
    @Test(arguments: [false, true])
    func aDeviceWhoseHistoryARestoredServerReplacedBeneathItsHorizonStartsOverFromTheSnapshot(keepingIncarnation: Bool) async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b, c, d) = (try h.device("A"), try h.device("B"), try h.device("C"), try h.device("D"))
        for i in 0..<10 { try a.save("Before the backup \(i)") }
        await a.sync()                                                                    // seqs 1…10
        await d.sync()
        let backup = try Self.backUp(h, keepingIncarnation: keepingIncarnation)
        try d.save("D's op, lost and then back past the horizon")
        await d.sync()                                                                    // seq 11
        try a.save("A's op, lost with the server")
        await a.sync()                                                                    // seq 12
        let lost = try #require(try a.store.confirmedOps(after: 11).first { $0.deviceID == a.store.deviceID })
        try c.save("C's op, lost and then back at the same seq")
        await c.sync()                                                                    // seq 13
        await a.sync()
        #expect(try a.store.cursor() == 13)

        let restored = try SyncService(dataDirectory: backup)
        let library = try restored.library(h.user.libraryID)
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        for i in 0..<2 { try b.save("Taken by the restored server \(i)") }
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seqs 11, 12
        #expect(await engine(c).syncOnce().rewound?.agreedSeq == 10)                      // C's op again, at 13
        #expect(try a.store.holdsConfirmed(try #require(try library.allOps().last).opID, at: 13) == true, "the op at A's cursor matches")
        try b.save("Taken by the restored server 2")
        #expect(await engine(b).syncOnce().outcome == .synced)                           // seq 14
        usleep(5_000)
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.horizonMilliseconds = 1
        #expect(try restored.compact(library: h.user.libraryID, policy: policy).historyDroppedThrough == 14)
        #expect(await engine(d).syncOnce().outcome == .synced)                           // D's op again, at 15
        #expect(try library.allOps().last?.serverSeq == 15)

        let back = await engine(a).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        #expect(back.bootstrappedAt == 14)
        let rewound = try #require(back.rewound, "A found out that its history is not the server's")
        #expect(rewound.rewoundTo == 0 && rewound.requeued == 11, "\(rewound)")
        #expect(try a.store.pendingOps().isEmpty)
        let log = try library.allOps()
        #expect(log.filter { $0.opID == lost.opID && $0.deviceID == a.store.deviceID }.count == 1, "A's lost op reached the server again")
        let verified = try a.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")
        for device in [b, c, d] { #expect(await engine(device).syncOnce().outcome == .synced, "\(device.name)") }
        for device in [a, b, c, d] { #expect(try device.store.digest() == library.digest(), "\(device.name)") }
    }

    /// A server restored from a backup that holds everything a device had: the device compares
    /// its history once (the incarnation changed), finds the two agreeing up to its cursor, goes
    /// back nowhere, reports no rewind, and keeps the new incarnation.
    @Test func aRestoreThatLostNothingOfADevicesHistoryIsComparedOnceAndNotReportedAsARewind() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        for i in 0..<12 { try a.save("Kept by the backup \(i)") }
        await a.sync()
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        let restored = try SyncService(dataDirectory: backup)
        let library = try restored.library(h.user.libraryID)
        let transport = InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: a.token)
        let engine = SyncEngine(store: a.store, transport: transport, random: { 0.5 })
        try a.save("Written after the restore")
        let digestBefore = try a.store.digest()

        let report = await engine.syncOnce()
        #expect(report.outcome == .synced, "\(report.outcome)")
        #expect(report.rewound == nil, "nothing was lost: no rewind to report")
        #expect(report.pushed == 1)
        #expect(try a.store.serverIncarnation() == library.incarnation)
        let requests = transport.requestCount
        #expect(requests >= 4, "a push, a pull, the comparison's page, the pull after it: \(requests)")
        #expect(try a.store.digest() == library.digest() && a.store.digest() == digestBefore)
        #expect(await engine.syncOnce().rewound == nil)
        #expect(transport.requestCount - requests <= 2, "compared once, not every round")
        #expect(try a.store.verify().passed)
    }

    /// Compacted history goes out as it is stored: a page that is exactly one sealed segment
    /// carries that segment's frame, byte for byte; any other page is encoded as before.
    @Test(arguments: TransportKind.allCases)
    func aPageThatIsOneSealedSegmentGoesOutAsItsStoredFrame(kind: TransportKind) async throws {
        let h = try SyncHarness(kind)
        let a = try h.device("A")
        try Workload(seed: 21).run(600, on: a)
        await a.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 100
        policy.segmentOpsMax = 250
        #expect(try h.service.compact(library: h.user.libraryID, policy: policy).segmentsWritten == 2)
        let library = try h.library
        let stored = try library.read { db in
            try db.query("SELECT body FROM chronicle_segments WHERE first_seq = 251") { row in row.withBytes(0) { Array($0) } }.first
        }
        let whole = try library.pull(after: 250, limit: 400, alignToSegments: true)
        #expect(whole.ops.map(\.serverSeq) == (251...500).map { $0 }, "a page of sealed history ends with its segment")
        #expect(whole.encoded?.frame == stored)
        #expect(try whole.encoded.map { try SegmentCodec.decodeBody($0.body).ops } == whole.ops)
        #expect(try library.pull(after: 250, limit: 249, alignToSegments: true).encoded == nil, "a page shorter than the segment is encoded")
        let inside = try library.pull(after: 200, limit: 400, alignToSegments: true)
        #expect(inside.encoded == nil && inside.ops.last?.serverSeq == 250, "a page that starts inside a segment ends with it")
        #expect(try library.pull(after: 500, limit: 250, alignToSegments: true).encoded == nil, "hot ops are encoded")
        #expect(try library.pull(after: 200, limit: 400).ops.count == 400, "without alignment a page holds `limit` ops")

        let page = try await a.transport.pull(after: 250, limit: 1_000, waitMilliseconds: 0)
        #expect(page.segment.ops == whole.ops && page.nextCursor == 500 && page.more)
        #expect(page.encoded?.frame == stored, "the frame crosses the wire as it is stored")
        let c = try h.device("C")
        await c.sync()
        try h.expectConverged()
    }

    /// Ops the server ordered inside the snapshot (pushed, but their answers lost) are
    /// recognised as duplicates afterwards and not applied twice (counters would show it).
    @Test(arguments: TransportKind.allCases)
    func opsTheSnapshotAlreadyHoldsAreNotAppliedTwice(kind: TransportKind) async throws {
        let h = try SyncHarness(kind, schema: .fieldService)
        let a = try h.device("A")
        let job = try a.store.write("job.create", payload: ["title": .text("Stock check")]).entityID
        let part = try a.store.write("part.add", payload: ["job_id": .text(job.lowercased), "sku": .text("VALVE-1")]).entityID
        try a.store.write("part.adjust", entity: part, payload: ["delta": .integer(10)])
        await a.sync()
        for _ in 0..<5 { try a.store.write("part.adjust", entity: part, payload: ["delta": .integer(-1)]) }
        // Pushed, answers lost: the server holds them, the device does not know.
        _ = try await a.transport.push(try Segment(libraryID: a.store.libraryID, ops: try a.store.pendingOps()))
        let report = try Self.compactWithHorizon(h)
        #expect(report.historyDroppedThrough == 8)

        let back = await a.sync()
        #expect(back.bootstrappedAt == 8)
        #expect(try a.store.pendingOps().isEmpty)
        #expect(try a.store.row(part)?["quantity"] == .integer(5))
        try h.expectConverged()
    }

    /// D started from the server's snapshot at 12. The server is then restored from a backup taken
    /// at 10: B's new op takes seq 11, and C's lost op, pushed again, lands at 12 where it was. The
    /// op at D's base matches, but the state at 12 D started from holds A's lost op and not B's:
    /// the file's incarnation says the server was restored, so D cannot trust what lies below its
    /// base and starts over (simulator seed 138 of 400 steps with app updates: D kept the old state
    /// and never saw seq 11).
    @Test func aStoreThatStartedFromASnapshotStartsOverWhenTheServerWasRestoredBelowIt() async throws {
        let (h, d, backup) = try await Self.dReadyToStartFromASnapshotPastABackup()
        #expect(await d.sync().bootstrappedAt == 12)
        try await Self.restoreBelowD(h, d, backup: backup)
    }

    /// The same restore below D's snapshot, but D's round ended right after it started over from
    /// the snapshot: the pull after it failed, so no pull had named the server's incarnation to D
    /// yet. D took the next pull's, from the restored server, for its own, and kept the state of
    /// the history the server lost beneath every op it pulled afterwards (damage soak seed 1138 of
    /// 400 steps, where D's own op, pushed again, landed at D's base and matched it). The store
    /// keeps the incarnation the snapshot's tail named now.
    @Test func aStoreWhoseFirstPullAfterStartingOverFailedStillFindsTheRestoreBelowIt() async throws {
        let (h, d, backup) = try await Self.dReadyToStartFromASnapshotPastABackup()
        // D starts over from the snapshot at 12; the pull after it fails, and the round ends there.
        let cut = CutAfterSnapshotTail(InMemoryTransport(endpoint: h.service, library: h.user.libraryID, token: d.token))
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 1
        configuration.retriesPerRoundMax = 0
        let first = await SyncEngine(store: d.store, transport: cut, configuration: configuration, random: { 0.5 }).syncOnce()
        #expect(first.bootstrappedAt == 12 && first.outcome != .synced, "\(first)")
        #expect(try d.store.cursor() == 12 && d.store.serverIncarnation() == (try h.library.incarnation))
        try await Self.restoreBelowD(h, d, backup: backup)
    }

    /// A, B and C synced seqs 1…10; a backup of the server is taken; A's op takes 11 and C's 12,
    /// and the server compacts with a snapshot at 12. D is signed in (starting from a snapshot
    /// whenever there is one) and has not synced yet.
    static func dReadyToStartFromASnapshotPastABackup() async throws -> (SyncHarness, TestDevice, backup: String) {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        let c = try h.device("C")
        var snapshotFirst = SyncEngine.Configuration()
        snapshotFirst.snapshotStartOpsMin = 1
        let d = try h.device("D", configuration: snapshotFirst)
        for i in 0..<10 { try a.save("Before the backup \(i)") }
        await a.sync()                                                                    // seqs 1…10
        await b.sync()
        await c.sync()
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        try a.save("A's, lost with the server")
        await a.sync()                                                                    // seq 11
        try c.save("C's, lost and then back at 12")
        await c.sync()                                                                    // seq 12
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 4
        #expect(try h.service.compact(library: h.user.libraryID, policy: policy).snapshotSeq == 12)
        return (h, d, backup)
    }

    /// The server restored from `backup` (another incarnation): B's new op takes seq 11 and C's
    /// lost op, pushed again, lands at 12 where it was. D, which started from the snapshot at 12,
    /// must see B's op below its old base and end with the server's state, as everyone must.
    static func restoreBelowD(_ h: SyncHarness, _ d: TestDevice, backup: String,
                              sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let (a, b, c) = (h.devices["A"]!, h.devices["B"]!, h.devices["C"]!)
        let restored = try SyncService(dataDirectory: backup)
        #expect(try restored.library(h.user.libraryID).incarnation != (try h.library.incarnation), sourceLocation: sourceLocation)
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        let bs = try b.save("B's, at 11 on the restored server")
        #expect(await engine(b).syncOnce().outcome == .synced, sourceLocation: sourceLocation)    // seq 11
        #expect(await engine(c).syncOnce().outcome == .synced, sourceLocation: sourceLocation)    // C's again, at 12
        let library = try restored.library(h.user.libraryID)
        #expect(try library.allOps().map(\.deviceID) == Array(repeating: a.store.deviceID, count: 10) + [b.store.deviceID, c.store.deviceID],
                sourceLocation: sourceLocation)

        let back = await engine(d).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)", sourceLocation: sourceLocation)
        #expect(try d.title(bs) == "B's, at 11 on the restored server", "D sees the op below its old base", sourceLocation: sourceLocation)
        #expect(await engine(a).syncOnce().outcome == .synced, sourceLocation: sourceLocation)    // A's lost op again, at 13
        for device in [b, c, d] { #expect(await engine(device).syncOnce().outcome == .synced, sourceLocation: sourceLocation) }
        for device in [a, b, c, d] {
            #expect(try device.store.digest() == library.digest(), "\(device.name)", sourceLocation: sourceLocation)
        }
        #expect(try d.store.verify().passed, sourceLocation: sourceLocation)
    }

    /// B's op took seq 2 under an id A had also made (an op id clash). The server is restored from
    /// a backup taken at 1, and A, whose op never reached it before, pushes first: A's op takes seq
    /// 2 under that id, and B's is refused as a clash. C pulled B's op at 2 before the restore. The
    /// same id at the same seq is not the same op: C and B go back to 1 and take A's (simulator
    /// seed 498 with app updates: C kept B's op and never saw A's, its state different for good).
    @Test func anOpOfAnotherDeviceUnderTheSameIDAtTheSameSeqIsNotAgreement() async throws {
        let h = try SyncHarness(.inMemory)
        let clash = UUID()
        let a = try h.device("A", ids: ScriptedIDs([UUID(), UUID(), UUID(), clash]))
        let b = try h.device("B", ids: ScriptedIDs([UUID(), clash]))
        let c = try h.device("C")
        try a.save("A's first")
        await a.sync()                                                                    // seq 1
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        let bs = try b.save("B's, lost with the server")
        await b.sync()                                                                    // seq 2: B's, under `clash`
        await c.sync()
        #expect(try c.title(bs) == "B's, lost with the server")
        let aSecond = try a.save("A's second, under the same id")
        #expect(try a.store.pendingOps().last?.opID == clash)

        let restored = try SyncService(dataDirectory: backup)
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        #expect(await engine(a).syncOnce().outcome == .synced)                           // seq 2: A's, under `clash`
        let library = try restored.library(h.user.libraryID)
        #expect(try library.allOps().map(\.deviceID) == [a.store.deviceID, a.store.deviceID])
        #expect(await engine(b).syncOnce().outcome == .synced)
        #expect(try b.store.notices(limit: 10).map(\.op.opID) == [clash], "B's op is refused as a clash")
        let back = await engine(c).syncOnce()
        #expect(back.outcome == .synced, "\(back.outcome)")
        #expect(try c.title(aSecond) == "A's second, under the same id", "C takes A's op at 2")
        #expect(try c.title(bs) == nil, "B's op, refused, is not in C's state")
        for device in [a, b, c] {
            #expect(await engine(device).syncOnce().outcome == .synced)
            #expect(try device.store.digest() == library.digest(), "\(device.name)")
            #expect(try device.store.verify().passed, "\(device.name)")
        }
    }
}

/// Forwards to an in-memory transport, and once a snapshot was downloaded lets one pull through
/// (the snapshot's tail) and fails every pull after it: a round cut off right after the store
/// started over from the snapshot.
final class CutAfterSnapshotTail: SyncTransport, @unchecked Sendable {
    private let inner: InMemoryTransport
    private let state = Locked((snapshotFetched: false, tailPulled: false))

    init(_ inner: InMemoryTransport) { self.inner = inner }

    func push(_ segment: Segment) async throws(SyncError) -> PushResponse { try await inner.push(segment) }

    func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        let cut = state.withLock { state -> Bool in
            guard state.snapshotFetched else { return false }
            defer { state.tailPulled = true }
            return state.tailPulled
        }
        if cut { throw .transient(reason: "The network went away right after the snapshot.", retryAfterSeconds: nil) }
        return try await inner.pull(after: cursor, limit: limit, waitMilliseconds: waitMilliseconds)
    }

    func verdict(for entity: UUID) async throws(SyncError) -> Verdict { try await inner.verdict(for: entity) }

    func snapshot() async throws(SyncError) -> SnapshotFrame {
        let frame = try await inner.snapshot()
        state.withLock { $0.snapshotFetched = true }
        return frame
    }
}
