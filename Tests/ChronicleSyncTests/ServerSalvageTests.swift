import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore
import ChronicleTesting

/// A server's library file damaged (a page the disk or a copy broke): salvaged with the server
/// stopped, its history kept up to the first op that cannot be read, and the devices that
/// synced past that point give the server back their own ops, as after a restore from a backup.
@Suite struct ServerSalvageTests {
    typealias Pages = SalvageTests.Pages

    /// Two devices that made the same article id first: B's create reached the server, and A's,
    /// queued behind it, is refused (`entity_exists`) when A next syncs.
    static func clashingDevices(_ h: SyncHarness) async throws -> (a: TestDevice, b: TestDevice) {
        let clash = UUID()
        let a = try h.device("A", ids: ScriptedIDs([clash]))
        let b = try h.device("B", ids: ScriptedIDs([clash]))
        try b.store.write("article.save", payload: ["url": .text("https://example.com/b"), "title": .text("B's article")])
        await b.sync()
        try a.store.write("article.save", payload: ["url": .text("https://example.com/a"), "title": .text("A's article")])
        return (a, b)
    }

    /// A library two devices wrote to, with refusals among its answers; the server's file checkpointed.
    static func library(_ h: SyncHarness) async throws -> (a: TestDevice, b: TestDevice, path: String) {
        let (a, b) = try await Self.clashingDevices(h)
        try Workload(seed: 41).run(700, on: a)
        #expect(await a.sync().rejected == 1)
        try Workload(seed: 42).run(200, on: b)
        await b.sync()
        await a.sync()
        let path = h.directory + "/server/libraries/\(h.user.libraryID.lowercased).sqlite"
        try Pages.checkpoint(path)
        return (a, b, path)
    }

    /// Engines for the devices against a server started again on the (salvaged) data directory.
    static func restarted(_ h: SyncHarness, _ devices: [TestDevice]) throws -> (SyncService, [SyncEngine]) {
        let service = try SyncService(dataDirectory: h.directory + "/server", maintenance: .off)
        let engines = devices.map { device in
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: service, library: h.user.libraryID, token: device.token),
                       random: { 0.5 })
        }
        return (service, engines)
    }

    @Test func anIntactLibraryIsKeptWholeUnderANewIncarnation() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, _, path) = try await Self.library(h)
        let before = try h.library
        let (digest, head, incarnation) = (try before.digest(), before.head, before.incarnation)
        let answered = try before.read { db in try db.query("SELECT device_id, last_device_seq FROM chronicle_devices ORDER BY 1") { "\($0.text(0)) \($0.int(1))" } }
        let refusals = try before.read { db in try db.scalarInt("SELECT count(*) FROM chronicle_rejected_ops") ?? 0 }

        let report = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
        #expect(report.lostNothing, "\(report.tables)")
        #expect(report.headKept == head && report.headBefore == head)
        #expect(report.digest == digest)
        #expect(report.refusalsKept == Int(refusals) && report.refusalsDropped == 0)
        #expect(report.incarnation != incarnation)
        #expect(FileManager.default.fileExists(atPath: report.damagedPath))

        let (service, engines) = try Self.restarted(h, [a])
        let library = try service.library(h.user.libraryID)
        #expect(library.incarnation == report.incarnation)
        #expect(try library.verify().passed)
        #expect(try library.read { db in try db.query("SELECT device_id, last_device_seq FROM chronicle_devices ORDER BY 1") { "\($0.text(0)) \($0.int(1))" } } == answered)
        try a.save("After the salvage")
        #expect(await engines[0].syncOnce().outcome == .synced)
        #expect(try a.store.digest() == (try library.digest()))
    }

    /// A leaf in the middle of the server's log broken: the history past it is dropped, and the
    /// two devices, which hold every op, push theirs again. Nothing is lost; nothing is doubled.
    @Test func aBrokenLogPageIsGivenBackByTheDevicesThatWroteIt() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b, _) = try await Self.library(h)
        // A plan change past the page that will break: no device pushes the server's own ops
        // again, so salvage names it.
        let plan = try h.service.setPlan(library: h.user.libraryID, plan: "premium")
        for device in [a, b] { await device.sync() }
        let path = h.directory + "/server/libraries/\(h.user.libraryID.lowercased).sqlite"
        try Pages.checkpoint(path)
        let ops = try h.library.allOps().filter { $0.deviceID != Op.serverDeviceID }
        #expect(try h.library.verify().passed)
        try Pages.damageMiddleLeaf(of: "chronicle_log", in: path)
        let damaged = try ServerLibrary.openOrCreate(at: path, libraryID: h.user.libraryID, schema: .readItLater).verify()
        // SQLite's own check either says what it found, or cannot read on: the report ends there.
        #expect(!damaged.passed && damaged.checks.contains { !$0.passed && ($0.name == "sqlite integrity_check" || $0.detail.contains("chronicle server salvage")) },
                "\(damaged.checks)")
        #expect(throws: (any Error).self) { _ = try ServerLibrary.openOrCreate(at: path, libraryID: h.user.libraryID, schema: .readItLater).allOps() }

        let report = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
        #expect(!report.lostNothing)
        let log = try #require(report.tables.first { $0.name == "chronicle_log" })
        let firstLost = try #require(log.unreadable.first?.lowerBound)
        #expect(report.headKept == firstLost - 1, "history kept up to the first unreadable op")
        #expect(report.headBefore == plan.serverSeq)
        #expect(report.devices == 2)
        #expect(report.serverOpsLost.count == 1 && report.serverOpsLost[0].hasPrefix("seq \(plan.serverSeq ?? 0): \(plan.type)")
                && report.serverOpsLost[0].contains("premium"), "\(report.serverOpsLost)")

        let (service, engines) = try Self.restarted(h, [a, b])
        let library = try service.library(h.user.libraryID)
        #expect(library.head == report.headKept)
        for _ in 0..<2 { for engine in engines { _ = await engine.syncOnce() } }
        let after = try library.allOps().filter { $0.deviceID != Op.serverDeviceID }
        #expect(Set(after.map(\.opID)) == Set(ops.map(\.opID)), "every op the devices wrote is back")
        #expect(after.count == ops.count, "once")
        for device in [a, b] {
            #expect(try device.store.pendingOps().isEmpty)
            #expect(try device.store.digest() == (try library.digest()))
            let own = after.filter { $0.deviceID == device.store.deviceID }.map(\.deviceSeq)
            #expect(own == own.sorted(), "\(device.name)'s ops in the order it wrote them")
        }
    }

    /// The server's answers to each device (refusals, last deviceSeqs) broken along with the log:
    /// the devices' numbers are worked out from the kept history, and they sync on.
    @Test func brokenAnswersAreWorkedOutFromTheKeptHistory() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, b, path) = try await Self.library(h)
        let ops = try h.library.allOps()
        try Pages.damage(page: try Pages.rootPage(of: "chronicle_devices", in: path), in: path)
        try Pages.damageMiddleLeaf(of: "chronicle_log", in: path)

        let report = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
        let devices = try #require(report.tables.first { $0.name == "chronicle_devices" })
        #expect(devices.lostWhole && devices.madeAgain)
        let (service, engines) = try Self.restarted(h, [a, b])
        for _ in 0..<2 { for engine in engines { _ = await engine.syncOnce() } }
        let library = try service.library(h.user.libraryID)
        #expect(Set(try library.allOps().map(\.opID)) == Set(ops.map(\.opID)))
        #expect(try a.store.digest() == (try library.digest()) && b.store.digest() == (try library.digest()))
    }

    /// History dropped past a retention horizon and the devices' numbers broken: the numbers of
    /// the authors of that history (the server itself among them, which numbers its plan changes
    /// by it) are set above any they used, so that their next ops still follow their earlier ones;
    /// a refusal kept, of an earlier number, does not stand in for them (seed 631 of the soak).
    @Test func numbersLostWithHistoryPastTheHorizonAreSetAboveAnyUsed() async throws {
        let h = try SyncHarness(.inMemory)
        let (a, _) = try await Self.clashingDevices(h)
        try Workload(seed: 43).run(300, on: a)
        await a.sync()
        _ = try h.service.setPlan(library: h.user.libraryID, plan: "premium")
        _ = try h.service.setPlan(library: h.user.libraryID, plan: "free")
        let before = try h.library.allOps()
        #expect(try RetentionHorizonTests.compactWithHorizon(h).historyDroppedThrough != nil)
        let path = h.directory + "/server/libraries/\(h.user.libraryID.lowercased).sqlite"
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "chronicle_devices", in: path), in: path)

        let report = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
        #expect(report.headKept == report.headBefore, "the history itself is whole")
        #expect(report.refusalsKept == 1, "A's first op was refused, and the refusal is kept")
        let (service, engines) = try Self.restarted(h, [a])
        let answered = try service.library(h.user.libraryID).read { db in
            try db.scalarInt("SELECT last_device_seq FROM chronicle_devices WHERE device_id = ?1", [.text(a.store.deviceID.lowercased)])
        }
        #expect((answered ?? 0) >= 301, "A's number is above the 301 it used, not the refusal's 1: \(answered ?? 0)")
        let plan = try service.setPlan(library: h.user.libraryID, plan: "premium")
        let serverOps = before.filter { $0.deviceID == Op.serverDeviceID }.map(\.deviceSeq)
        #expect(serverOps.count == 2 && plan.deviceSeq > serverOps.max()!, "the server's next op follows its earlier ones: \(plan.deviceSeq)")
        try Workload(seed: 44).run(20, on: a)
        #expect(await engines[0].syncOnce().outcome == .synced)
        let ops = try service.library(h.user.libraryID).allOps().filter { $0.deviceID == a.store.deviceID }.map(\.deviceSeq)
        #expect(ops.count == 20 && ops.min()! > before.filter { $0.deviceID == a.store.deviceID }.map(\.deviceSeq).max()!,
                "A's new ops follow its earlier ones: \(ops)")
        #expect(try a.store.pendingOps().isEmpty && a.store.digest() == service.library(h.user.libraryID).digest())
    }

    /// A leaf in the middle of a table keyed by op id (the sealed ops' ids) broken: the rest of
    /// the table is read range of keys by range, and the ids on the broken page are made again
    /// from the sealed segments, so a repeat of any sealed op is still answered as one.
    @Test func aBrokenLeafOfSealedOpIdsLosesOnlyItsKeysAndTheyAreMadeAgain() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 45).run(1_500, on: a)
        await a.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 250
        #expect(try h.service.compact(library: h.user.libraryID, policy: policy).opsSealed == 1_500)
        let digest = try h.library.digest()
        let sealed = try h.library.read { db in try db.query("SELECT op_id, server_seq FROM chronicle_sealed_ops ORDER BY op_id") { "\($0.text(0)) \($0.int(1))" } }
        let path = h.directory + "/server/libraries/\(h.user.libraryID.lowercased).sqlite"
        try Pages.checkpoint(path)
        try Pages.damageMiddleLeaf(of: "chronicle_sealed_ops", in: path)

        let report = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
        let ids = try #require(report.tables.first { $0.name == "chronicle_sealed_ops" })
        #expect(!ids.lostWhole && !ids.unreadableKeys.isEmpty && ids.madeAgain, "\(ids)")
        #expect(ids.rowsCopied > 1_000 && ids.rowsCopied < 1_500, "only the broken page's ids were not read: \(ids)")
        #expect(report.lostNothing && report.digest == digest && report.headKept == 1_500)
        let (service, engines) = try Self.restarted(h, [a])
        #expect(try service.library(h.user.libraryID).read { db in
            try db.query("SELECT op_id, server_seq FROM chronicle_sealed_ops ORDER BY op_id") { "\($0.text(0)) \($0.int(1))" }
        } == sealed)
        try Workload(seed: 46).run(10, on: a)
        #expect(await engines[0].syncOnce().outcome == .synced)
    }

    @Test func aFileWhoseListOfTablesIsBrokenIsLeftAsItWas() async throws {
        let h = try SyncHarness(.inMemory)
        let (_, _, path) = try await Self.library(h)
        try Pages.damage(page: 1, in: path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            _ = try ServerLibrary.salvage(at: path, libraryID: h.user.libraryID, schema: .readItLater)
            Issue.record("a library whose list of tables is broken was salvaged")
        } catch let error as ChronicleError {
            #expect(error.code == .storeDamaged && error.message.contains("beyond salvage") && error.message.contains("backup"), "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        #expect(!FileManager.default.fileExists(atPath: path + ".salvage"))
    }

    @Test func salvageIsRefusedWhileAServerHoldsTheDataDirectory() async throws {
        let h = try SyncHarness(.inMemory)
        _ = try await Self.library(h)
        let data = h.directory + "/server"
        try {
            let held = try DataDirectoryLock(dataDirectory: data, purpose: "chronicle serve")
            defer { withExtendedLifetime(held) {} }
            do {
                _ = try ServerSalvage.run(dataDirectory: data, user: "ada", dryRun: true)
                Issue.record("salvage ran beside a server")
            } catch let error as ChronicleError {
                #expect(error.code == .dataDirectoryInUse && error.message.contains("chronicle serve"), "\(error)")
            }
        }()
        let report = try ServerSalvage.run(dataDirectory: data, user: "ada", dryRun: true)
        #expect(report.lostNothing && report.damagedPath.isEmpty)
        #expect(throws: ChronicleError.self) { _ = try ServerSalvage.run(dataDirectory: data, user: "nobody") }
    }

    /// A page of a library's files file broken: the server answers `blob_store_damaged` and lists
    /// the file in `/healthz` with the command that salvages it. The salvage keeps every file it
    /// can read whole, and the library's new incarnation has the device that added them send the
    /// ones that were lost: afterwards another device fetches every file, byte for byte.
    @Test func aBrokenFilesPageIsGivenBackByTheDeviceThatHoldsThem() async throws {
        let h = try SyncHarness(.http)
        let a = try h.device("A"), b = try h.device("B")
        var files: [BlobRef: [UInt8]] = [:]
        for seed in 0..<12 {
            let bytes = BlobSyncTests.file(UInt64(60 + seed), bytes: 3_000)
            let ref = try a.store.addBlob(bytes)
            files[ref] = bytes
            try a.store.write("episode.save", payload: ["title": .text("Episode \(seed)"), "audio_ref": .text(ref.description)])
        }
        #expect(await a.sync().blobsUploaded == 12)
        await b.sync()
        let path = ServerBlobFiles.path(of: h.user.libraryID, in: h.directory + "/server")
        try Pages.checkpoint(path)
        try Pages.damageMiddleLeaf(of: "chronicle_blob_chunks", in: path)

        // The damaged file's answers ask for 5 minutes: a fetch says so at once rather than wait.
        var damaged = 0
        let started = Date()
        for ref in files.keys.sorted() {
            do { try await b.engine.fetchBlob(ref) } catch {
                #expect("\(error)".contains("blob_store_damaged"), "\(error)")
                damaged += 1
            }
        }
        #expect(damaged >= 1 && Date().timeIntervalSince(started) < 200, "no fetch waited out the 300 s")
        let problem = try #require(h.service.health.problems.first)
        #expect(problem.code == "blob_store_damaged" && problem.file == "blobs/\(h.user.libraryID.lowercased).sqlite")
        #expect(problem.action.hasSuffix("salvage --data \(h.directory)/server ada --files"), "\(problem.action)")
        #expect(h.service.health.isReady && !h.service.health.isDamaged(h.user.libraryID), "the library itself is served")
        h.http?.stop()

        let incarnation = try h.library.incarnation
        let dry = try ServerSalvage.runFiles(dataDirectory: h.directory + "/server", user: "ada", dryRun: true)
        #expect(dry.damagedPath.isEmpty && !dry.lostNothing)
        let report = try ServerSalvage.runFiles(dataDirectory: h.directory + "/server", user: "ada")
        #expect(report.filesDropped >= 1 && report.filesKept + report.filesDropped + report.filesCutShort == 12, "\(report)")
        #expect(FileManager.default.fileExists(atPath: report.damagedPath))

        let (service, engines) = try Self.restarted(h, [a, b])
        #expect(try service.library(h.user.libraryID).incarnation != incarnation)
        var sent: Int64 = 0
        for _ in 0..<3 { sent += await engines[0].syncOnce().blobBytesSent }
        #expect(sent == Int64(3_000 * (12 - report.filesKept)), "A sent the files that were lost, and only those")
        let other = try h.device("C")
        let fetcher = SyncEngine(store: other.store, transport: InMemoryTransport(endpoint: service, library: h.user.libraryID, token: other.token))
        _ = await fetcher.syncOnce()
        for (ref, bytes) in files {
            #expect(try await fetcher.fetchBlob(ref).state == .fetched)
            #expect(try other.store.blob(ref) == bytes)
        }
        let again = try ServerSalvage.runFiles(dataDirectory: h.directory + "/server", user: "ada", dryRun: true)
        #expect(again.lostNothing && again.filesKept == 12)
    }
}
