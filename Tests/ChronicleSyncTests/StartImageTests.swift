import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// Start images (`StartImageInfo`): the server builds, after the compaction that wrote a
/// snapshot, the device store a new device would make from it; a new device takes it whole and
/// ends exactly where one that started from the snapshot does. Anything it cannot take (damaged,
/// another schema, a store that already holds something) leaves it starting from the snapshot.
@Suite struct StartImageTests {
    /// Keep 10 ops hot, seal segments of 10, a snapshot at every seal point, start images from 1 op.
    static func policy() -> MaintenancePolicy {
        var maintenance = ServerMaintenanceTests.policy(keep: 10, segment: 10)
        maintenance.startImageOpsMin = 1
        return maintenance
    }

    static var fromSnapshot: SyncEngine.Configuration {
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = 1
        return configuration
    }

    /// A library with a snapshot at 60 and its start image, and 30 more ops after it.
    static func library(_ kind: TransportKind = .http) async throws -> (SyncHarness, TestDevice) {
        let h = try SyncHarness(kind, maintenance: policy())
        let a = try h.device("A")
        try Workload(seed: 91).run(60, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().first?.report?.snapshotSeq == 60)
        try Workload(seed: 92).run(30, on: a)
        await a.sync()
        return (h, a)
    }

    @Test(arguments: TransportKind.allCases)
    func aNewDeviceTakesTheStartImageAndEndsWhereTheSnapshotStartEnds(_ kind: TransportKind) async throws {
        let (h, a) = try await Self.library(kind)
        let library = try h.library
        let info = try #require(try library.currentStartImage(), "built by the pass that wrote the snapshot")
        #expect(info.seq == 60 && info.storeFormat == DeviceStore.storeFormatVersion && info.schemaFingerprint == h.schema.fingerprint)
        #expect(info.imageBytes > 0 && info.imageBytes < info.storeBytes)
        // One LZ4 frame the `lz4` tool opens, holding a SQLite file.
        let frame = try #require(FileManager.default.contents(atPath: library.startImagePath))
        let store = try LZ4Frame.decompress([UInt8](frame), maxBytes: Int(info.storeBytes))
        #expect(Int64(store.count) == info.storeBytes && Array(store.prefix(15)) == Array("SQLite format 3".utf8))

        let n = try h.device("N", configuration: Self.fromSnapshot)
        let report = await n.sync()
        #expect(report.bootstrappedAt == 60 && report.startedFromImage && report.pulled == 30, "the image at 60, then 61...90 pulled: \(report)")
        #expect(try n.store.read { db in try LogTables.meta("device_id", in: db).textValue } == n.store.deviceID.lowercased)
        #expect(try n.store.phraseIndexesComplete(), "the phrase indexes came complete")
        #expect(try n.store.read { db in try db.scalarInt("SELECT max(seq) FROM chronicle_snapshots") } == 60, "the snapshot is kept for rebuilds")
        try h.expectConverged()

        // The device writes as itself, and both ends agree.
        let id = try n.save("written after a start from an image")
        await n.sync()
        await a.sync()
        #expect(try a.title(id) == "written after a start from an image")
        #expect(try h.library.allOps().last?.deviceID == n.store.deviceID)
        try h.expectConverged()
        // Reopened, the store is an ordinary one (its rebuild from the snapshot gives the same digest).
        let path = n.store.path
        let digest = try n.store.digest()
        let reopened = try DeviceStore.open(at: path)
        let rebuilt = try reopened.rebuild()
        #expect(rebuilt.digest == digest && rebuilt.fromSnapshot == 60, "\(rebuilt)")
    }

    @Test func aDamagedImageIsRefusedAndTheDeviceStartsFromTheSnapshot() async throws {
        let (h, _) = try await Self.library()
        let library = try h.library
        // A byte changed in the middle of the frame: its checksum no longer matches.
        var bytes = [UInt8](try #require(FileManager.default.contents(atPath: library.startImagePath)))
        bytes[bytes.count / 2] ^= 0x5A
        let damaged = h.directory + "/damaged.lz4"
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))

        let n = try h.device("N", configuration: Self.fromSnapshot)
        #expect(throws: ChronicleError.self) { try n.store.adoptStartImage(damaged) }
        do {
            try n.store.adoptStartImage(damaged)
        } catch let error as ChronicleError {
            #expect(error.code == .malformedStartImage, "\(error)")
        }
        #expect(try n.store.isPristine(), "left as it was")
        // Truncated, and not an LZ4 frame at all.
        try Data(bytes.prefix(bytes.count / 3)).write(to: URL(fileURLWithPath: damaged))
        #expect(throws: ChronicleError(.malformedStartImage, "The start image is damaged: The LZ4 frame is truncated: it ends after \(bytes.count / 3) bytes.")) {
            try n.store.adoptStartImage(damaged)
        }
        try Data("not a frame".utf8).write(to: URL(fileURLWithPath: damaged))
        #expect(throws: ChronicleError.self) { try n.store.adoptStartImage(damaged) }
        #expect(try n.store.isPristine())

        // The server's own file damaged: the device starts from the snapshot instead.
        try Data(bytes).write(to: URL(fileURLWithPath: library.startImagePath))
        let report = await n.sync()
        #expect(report.bootstrappedAt == 60 && !report.startedFromImage && report.pulled == 30, "\(report)")
        #expect(try n.store.read { db in try LogTables.meta("device_id", in: db).textValue } == n.store.deviceID.lowercased)
        try h.expectConverged()
    }

    @Test func onlyAPristineStoreOfTheSameFormatAndSchemaTakesAnImage() async throws {
        let (h, a) = try await Self.library()
        let library = try h.library
        let token = try h.service.accounts.registerDevice(user: "ada", password: h.password, deviceID: UUID()).token
        // Another schema's fingerprint, another store format: 404, and the device starts from the snapshot.
        for (format, fingerprint) in [(DeviceStore.storeFormatVersion, "another"), (DeviceStore.storeFormatVersion + 1, h.schema.fingerprint)] {
            let error = #expect(throws: ProtocolError.self) {
                _ = try h.service.startImageNow(library: h.user.libraryID, token: token, storeFormat: format, schemaFingerprint: fingerprint)
            }
            #expect(error?.status == 404 && error?.code == .noStartImage)
        }
        #expect(throws: ProtocolError.self) {
            _ = try h.service.startImageNow(library: h.user.libraryID, token: "not a token", storeFormat: DeviceStore.storeFormatVersion,
                                            schemaFingerprint: h.schema.fingerprint)
        }
        // A store that holds something refuses it, whatever it holds.
        let image = h.directory + "/image.lz4"
        try FileManager.default.copyItem(atPath: library.startImagePath, toPath: image)
        #expect(try !a.store.isPristine())
        #expect(throws: ChronicleError.self) { try a.store.adoptStartImage(image) }
        let writer = try h.device("W", configuration: Self.fromSnapshot)
        try writer.save("queued before the first sync")
        #expect(try !writer.store.isPristine())
        let report = await writer.sync()
        #expect(report.bootstrappedAt == 60 && !report.startedFromImage, "from the snapshot, its queued op kept and pushed: \(report)")
        await a.sync()
        try h.expectConverged()
        // A store of another library refuses it.
        let other = try DeviceStore.create(at: h.directory + "/other.chronicle", schema: h.schema)
        #expect(throws: ChronicleError.self) { try other.adoptStartImage(image) }
        #expect(try other.isPristine())
    }

    @Test func aNewerSnapshotGetsANewImage() async throws {
        let (h, a) = try await Self.library()
        let library = try h.library
        #expect(try library.currentStartImage()?.seq == 60)
        try Workload(seed: 93).run(40, on: a)
        await a.sync()
        #expect(h.service.runMaintenance().first?.report?.snapshotSeq == 130)
        #expect(try library.currentStartImage()?.seq == 130)
        // Gone, it is built again at the next pass.
        library.removeStartImage()
        #expect(try library.currentStartImage() == nil)
        _ = h.service.runMaintenance(all: true)
        #expect(try library.currentStartImage()?.seq == 130)
        let n = try h.device("N", configuration: Self.fromSnapshot)
        let report = await n.sync()
        #expect(report.bootstrappedAt == 130 && report.startedFromImage)
        try h.expectConverged()
    }

    /// The store's file is replaced while it is open: a read in progress is waited for (it sees the
    /// empty store), and reads after it see the image; the device then syncs as any other.
    @Test func aReadInProgressIsWaitedForAndTheNextReadsSeeTheImage() async throws {
        let (h, _) = try await Self.library()
        let image = h.directory + "/image.lz4"
        try FileManager.default.copyItem(atPath: try h.library.startImagePath, toPath: image)
        let n = try h.device("N", configuration: Self.fromSnapshot)
        let seen = Locked<Int64?>(nil)
        let inside = DispatchSemaphore(value: 0)
        let store = n.store
        let reader = Thread {
            let count = try? store.read { db -> Int64 in
                inside.signal()
                Thread.sleep(forTimeInterval: 0.3)
                return try db.scalarInt("SELECT count(*) FROM article") ?? -1
            }
            seen.withLock { $0 = count }
        }
        reader.start()
        inside.wait()
        let start = DispatchTime.now().uptimeNanoseconds
        #expect(try n.store.adoptStartImage(image) == 60)
        #expect(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 >= 0.2, "waited for the read in progress")
        #expect(seen.withLock { $0 } == 0, "that read saw the store as it was")
        #expect(try n.store.read { db in try db.scalarInt("SELECT count(*) FROM article") ?? 0 } > 0)
        #expect(try !n.store.isPristine())
        #expect(!FileManager.default.fileExists(atPath: n.store.startImagePath), "the decompressed copy was renamed into place")
        let report = await n.sync()
        #expect(report.bootstrappedAt == nil && report.pulled == 30)
        try h.expectConverged()
    }

    /// The image comes in ranges (here of 4 KiB, so in many), each of the image the first one
    /// named; a range of another image, or past its end, is refused.
    @Test func theImageComesInRangesOfOneImage() async throws {
        let (h, _) = try await Self.library()
        let library = try h.library
        let info = try #require(try library.currentStartImage())
        let token = try h.service.accounts.registerDevice(user: "ada", password: h.password, deviceID: UUID()).token
        let server = try #require(h.http)
        var components = URLComponents(url: server.url.appendingPathComponent("v1/libraries/\(h.user.libraryID.lowercased)/start-image"),
                                       resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "format", value: String(DeviceStore.storeFormatVersion)),
                                 URLQueryItem(name: "schema", value: h.schema.fingerprint)]
        var request = URLRequest(url: components.url!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let target = h.directory + "/ranged.chronicle"
        try await HTTPTransport.downloadDecompressing(request, session: session, to: target, rangeBytes: 4096)
        #expect(info.imageBytes > 4096 * 4, "many ranges")
        let frame = [UInt8](try #require(FileManager.default.contents(atPath: library.startImagePath)))
        let whole = try LZ4Frame.decompress(frame, maxBytes: Int(info.storeBytes))
        #expect([UInt8](try #require(FileManager.default.contents(atPath: target))) == whole)

        // Another image's ETag: 412, and the download throws and leaves no file.
        var stale = request
        stale.setValue("\"1-2-3\"", forHTTPHeaderField: "If-Match")
        stale.setValue("bytes=0-99", forHTTPHeaderField: "Range")
        let refused = await #expect(throws: SyncError.self) { _ = try await HTTPTransport.send(stale, session: session) }
        if case .terminal(let refusal)? = refused { #expect(refusal.status == 412 && refusal.code == .startImageChanged) }
        var past = request
        past.setValue("bytes=\(info.imageBytes)-", forHTTPHeaderField: "Range")
        let pastEnd = await #expect(throws: SyncError.self) { _ = try await HTTPTransport.send(past, session: session) }
        if case .terminal(let refusal)? = pastEnd { #expect(refusal.status == 416 && refusal.code == .rangeNotSatisfiable) }
        var unasked = request
        unasked.url = URL(string: components.url!.absoluteString.replacingOccurrences(of: "format=", with: "formats="))
        let missing = await #expect(throws: SyncError.self) { _ = try await HTTPTransport.send(unasked, session: session) }
        if case .terminal(let refusal)? = missing { #expect(refusal.status == 400) }
    }

    /// Killed after each step of the adoption in turn (the image checked and synced beside the
    /// store; the store's file out of WAL mode; the rename), the store opens again as the empty
    /// store, which then takes the image, or as the whole image, as this device. A download left
    /// beside a store that holds something goes when it opens; beside an empty one it stays.
    @Test func aStoreKilledWhileTakingTheImageOpensAsTheEmptyStoreOrTheImage() async throws {
        let (h, _) = try await Self.library()
        let image = h.directory + "/image.lz4"
        try FileManager.default.copyItem(atPath: try h.library.startImagePath, toPath: image)
        struct Killed: Error {}
        for step in 1...3 {
            let path = h.directory + "/killed-\(step).chronicle"
            let deviceID = UUID()
            do {
                let store = try DeviceStore.create(at: path, schema: h.schema, libraryID: h.user.libraryID, deviceID: deviceID)
                #expect(throws: Killed.self) {
                    try store.adoptStartImage(image, afterStep: { done, _ in if done == step { throw Killed() } })
                }
            }
            let reopened = try DeviceStore.open(at: path)
            #expect(reopened.deviceID == deviceID)
            #expect(try reopened.verify().checks.allSatisfy(\.passed), "step \(step)")
            if step < 3 {
                #expect(try reopened.isPristine(), "killed before the rename (step \(step)), the store is the empty one")
                #expect(try reopened.adoptStartImage(image) == 60)
            }
            #expect(try reopened.cursor() == 60 && !reopened.isPristine(), "step \(step)")
            #expect(try reopened.read { db in try LogTables.meta("device_id", in: db).textValue } == deviceID.lowercased)
            #expect(try reopened.read { db in try db.scalarText("PRAGMA journal_mode") } == "wal")
        }
        // A download left beside a store: kept while the store is empty, gone once it holds something.
        let empty = h.directory + "/empty.chronicle"
        _ = try DeviceStore.create(at: empty, schema: h.schema, libraryID: h.user.libraryID)
        #expect(FileManager.default.createFile(atPath: empty + ".start-image", contents: Data([1, 2, 3])))
        let emptyStore = try DeviceStore.open(at: empty)
        #expect(try !emptyStore.upkeepDue().leftoverStartImage)
        try emptyStore.performUpkeep()
        #expect(FileManager.default.fileExists(atPath: emptyStore.startImagePath))
        let held = h.directory + "/killed-1.chronicle"
        #expect(FileManager.default.createFile(atPath: held + ".start-image", contents: Data([1, 2, 3])))
        let heldStore = try DeviceStore.open(at: held)
        #expect(FileManager.default.fileExists(atPath: held + ".start-image"), "opening changes nothing")
        #expect(try heldStore.performUpkeep().leftoverStartImage)
        #expect(!FileManager.default.fileExists(atPath: held + ".start-image"))
    }
}
