import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore
import ChronicleTesting

/// Blobs: large files that travel beside the ops, in chunks that resume, never in the ops' way.
@Suite struct BlobSyncTests {
    /// Bytes that are not the same from one chunk to the next (a file of 3.5 chunks by default).
    static func file(_ seed: UInt64, bytes: Int = BlobLimits.chunkBytes * 7 / 2) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<bytes).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// An episode recorded offline on A, its audio a blob: A's sync sends the op and then the
    /// file; B gets the op, and the file when it asks for it, byte for byte.
    @Test(arguments: TransportKind.allCases)
    func anEpisodeRecordedOfflineReachesTheOtherDeviceWithItsAudio(kind: TransportKind) async throws {
        let h = try SyncHarness(kind)
        let a = try h.device("A")
        let b = try h.device("B")
        let audio = Self.file(1)
        let ref = try a.store.addBlob(audio, mediaType: "audio/mpeg")
        #expect(ref == BlobRef.of(audio))
        #expect(try a.store.addBlob(audio) == ref, "the same bytes again change nothing")
        let episode = try a.store.write("episode.save", payload: ["title": .text("Offline episode"), "audio_ref": .text(ref.description)]).entityID
        #expect(try a.store.blobUploadBacklog().count == 1)

        let report = await a.sync()
        #expect(report.pushed == 1)
        #expect(report.blobsUploaded == 1 && report.blobBytesSent == Int64(audio.count) && report.blobError == nil)
        #expect(try a.store.blobInfo(ref)?.state == .uploaded)
        #expect(try a.store.blobUploadBacklog().count == 0)
        let again = await a.sync()
        #expect(again.blobsUploaded == 0, "an uploaded blob is not sent again")

        await b.sync()
        let named = try #require(try b.store.row(episode)?["audio_ref"]?.textValue)
        let wanted = try #require(BlobRef(named))
        #expect(try b.store.blob(wanted) == nil, "B fetches a file when it asks for it, not with the ops")
        let fetched = try await b.engine.fetchBlob(wanted)
        #expect(fetched.state == .fetched && fetched.length == Int64(audio.count))
        #expect(try b.store.blob(wanted) == audio)
        try h.expectConverged()
    }

    /// An upload cut off after three chunks (the last one's answer lost) goes on from what the
    /// server holds: only the rest is sent.
    @Test func anUploadCutOffGoesOnFromWhatTheServerHolds() async throws {
        let h = try SyncHarness(.inMemory)
        let progress = Locked<[Int64]>([])
        var configuration = SyncEngine.Configuration()
        configuration.blobUploadProgress = { _, held, _ in progress.withLock { $0.append(held) } }
        let a = try h.device("A", configuration: configuration)
        let audio = Self.file(2)
        let ref = try a.store.addBlob(audio)
        let chunk = BlobLimits.chunkBytes
        // An earlier run of this device sent two chunks, then the connection dropped.
        for index in 0..<2 {
            let status = try await a.transport.putBlob(ref, length: Int64(audio.count), offset: Int64(index * chunk),
                                                       bytes: Array(audio[index * chunk..<(index + 1) * chunk]))
            #expect(status.received == Int64((index + 1) * chunk) && !status.complete)
        }
        #expect(try await a.transport.blobStatus(ref).received == Int64(2 * chunk))

        // The third chunk reached the server, and its answer was lost on the way back.
        a.memory!.dropResponsesNext(1)
        do {
            _ = try await a.transport.putBlob(ref, length: Int64(audio.count), offset: Int64(2 * chunk), bytes: Array(audio[2 * chunk..<3 * chunk]))
            Issue.record("the answer was not lost")
        } catch {
            guard case .transient = error else { Issue.record("\(error)"); return }
        }
        #expect(try a.store.blobInfo(ref)?.state == .queued, "the file stays queued until the server says it holds all of it")

        let report = await a.sync()
        #expect(report.blobsUploaded == 1)
        #expect(report.blobBytesSent == Int64(audio.count - 3 * chunk), "only what the server lacked was sent")
        #expect(progress.withLock { $0 } == [Int64(audio.count)], "the progress of the one chunk sent")
        let status = try await a.transport.blobStatus(ref)
        #expect(status.complete && status.received == Int64(audio.count))
        let range = try await a.transport.blobRange(ref, offset: Int64(chunk) - 10, count: 20)
        #expect(range.bytes == Array(audio[(chunk - 10)..<(chunk + 10)]) && range.length == Int64(audio.count))
    }

    /// A server that cannot keep files (its blob store unusable) does not hold up the ops: they
    /// sync, the file stays queued with the reason, and it goes once the server can take it.
    @Test func opsSyncWhileTheServerCannotTakeFiles() async throws {
        let h = try SyncHarness(.http)
        let a = try h.device("A")
        let b = try h.device("B")
        let photo = Self.file(3, bytes: 300_000)
        let ref = try a.store.addBlob(photo, mediaType: "image/jpeg")
        let blocked = ServerBlobFiles.path(of: h.user.libraryID, in: h.service.dataDirectory)
        try FileManager.default.createDirectory(atPath: blocked, withIntermediateDirectories: true)   // not a database
        let article = try a.save("Written with a photo")

        let report = await a.sync()
        #expect(report.pushed == 1, "the ops went")
        #expect(report.blobsUploaded == 0)
        #expect(report.blobError?.contains("blob_store_failed") == true, "\(report.blobError ?? "no error")")
        #expect(try a.store.blobInfo(ref)?.state == .queued)
        await b.sync()
        #expect(try b.title(article) == "Written with a photo")

        try FileManager.default.removeItem(atPath: blocked)
        let later = await a.sync()
        #expect(later.blobsUploaded == 1)
        #expect(try await b.engine.fetchBlob(ref).length == Int64(photo.count))
        #expect(try b.store.blob(ref) == photo)
    }

    /// A file whose bytes changed in the store after it was added (damage) hashes to another
    /// address: the server refuses it for good, the refusal is kept, and the queue goes on.
    @Test func aDamagedFileIsRefusedAndTheQueueGoesOn() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let damaged = try a.store.addBlob(Self.file(4, bytes: 5_000))
        let fine = try a.store.addBlob(Self.file(5, bytes: 7_000))
        #expect(try a.store.verify().checks.first { $0.name.hasPrefix("files") }?.passed == true)
        try Database(path: a.store.path).execute("UPDATE chronicle_blob_chunks SET data = zeroblob(5000) WHERE hash = ?1",
                                                 [.text(damaged.hex)])
        let check = try #require(try a.store.verify().checks.first { $0.name.hasPrefix("files") })
        #expect(!check.passed && check.detail.contains("hash to something else"), "verify finds it: \(check.detail)")
        let report = await a.sync()
        #expect(report.blobsRefused == 1 && report.blobsUploaded == 1)
        let refused = try #require(try a.store.blobInfo(damaged))
        #expect(refused.state == .refused && refused.refusal?.contains("blob_digest_mismatch") == true)
        #expect(try a.store.blobInfo(fine)?.state == .uploaded)
        #expect(try await a.transport.blobStatus(damaged).received == 0, "nothing of it was kept")
        #expect(try a.store.queuedBlobs().isEmpty)
    }

    /// A fetch cut off goes on from what the store holds; a file not uploaded yet is refused with
    /// a stable code, and an address that is not one is refused too.
    @Test(arguments: TransportKind.allCases)
    func aFetchResumesAndAFileNotUploadedYetIsSaidSo(kind: TransportKind) async throws {
        let h = try SyncHarness(kind)
        let a = try h.device("A")
        let b = try h.device("B")
        let audio = Self.file(6)
        let ref = try a.store.addBlob(audio)
        do {
            _ = try await b.engine.fetchBlob(ref)
            Issue.record("a blob the server does not hold was fetched")
        } catch {
            guard case .terminal(let refusal) = error else { Issue.record("\(error)"); return }
            #expect(refusal.code == .blobNotFound)
        }
        await a.sync()
        // B fetched one range, then was cut off.
        let first = try await b.transport.blobRange(ref, offset: 0, count: BlobLimits.chunkBytes)
        #expect(try b.store.appendFetchedBlob(ref, length: first.length, offset: 0, bytes: first.bytes) == Int64(BlobLimits.chunkBytes))
        #expect(try b.store.blobInfo(ref)?.state == .fetching)
        #expect(try b.store.blob(ref) == nil, "a blob part-fetched is not read")
        let seen = Locked<[Int64]>([])
        try await b.engine.fetchBlob(ref) { held, length in
            #expect(length == Int64(audio.count))
            seen.withLock { $0.append(held) }
        }
        #expect(try b.store.blob(ref) == audio)
        #expect(seen.withLock { $0 } == [Int64(audio.count)], "one 4 MiB range after the first 1 MiB, reported as it is kept")
        #expect(BlobRef("sha256:xyz") == nil && BlobRef(String(repeating: "g", count: 64)) == nil)
        #expect(BlobRef(ref.description.uppercased().replacingOccurrences(of: "SHA256:", with: "sha256:")) == ref)
    }

    /// A store of format v7 gains the blob tables when it opens; one of v8 (made by this build's
    /// fixture tool) keeps its blobs, queued and part-fetched, and so does a salvage of it.
    @Test func storesOfEarlierFormatsTakeBlobsAndASalvageKeepsThem() throws {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = "\(root)/chronicle-blob-fixture-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fixtures = Dictionary(StoreFixture.all.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

        let old = try #require(fixtures["readitlater-v3-format-v7"])
        try old.load(into: directory + "/v7.chronicle")
        let migrated = try DeviceStore.open(at: directory + "/v7.chronicle")
        try migrated.performUpkeep()
        let photo = Self.file(8, bytes: BlobLimits.chunkBytes + 10)
        let ref = try migrated.addBlob(photo)
        #expect(try migrated.blob(ref) == photo && migrated.queuedBlobs().map(\.ref) == [ref])

        let current = try #require(fixtures["readitlater-v3-format-v8"])
        let path = directory + "/v8.chronicle"
        try current.load(into: path)
        func states(_ store: DeviceStore) throws -> [String] { try store.blobs().map { "\($0.state.rawValue) \($0.received)/\($0.length)" }.sorted() }
        let expected = ["fetching 1000/2000", "queued 2000/2000", "uploaded 2000/2000"]
        do {
            let store = try DeviceStore.open(at: path)
            try store.performUpkeep()
            #expect(try states(store) == expected)
            #expect(try store.queuedBlobs().count == 1)
        }
        let report = try DeviceStore.salvage(at: path)
        #expect(report.tables.contains { $0.name == "chronicle_blob_chunks" && $0.rowsCopied == 3 }, "\(report.tables.map(\.name))")
        let salvaged = try DeviceStore.open(at: path)
        try salvaged.performUpkeep()
        #expect(try states(salvaged) == expected)
        let queued = try #require(try salvaged.queuedBlobs().first)
        #expect(try salvaged.blob(queued.ref).map(BlobRef.of) == queued.ref, "its bytes came through whole")
    }

    /// An upload left unfinished past `MaintenancePolicy.abandonedUploadSeconds` is deleted by the
    /// maintenance sweep (complete files stay), and its device sends it again from the start.
    @Test func anAbandonedUploadIsSweptAndSentAgain() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.abandonedUploadSeconds = 0
        let h = try SyncHarness(.inMemory, maintenance: maintenance)
        let a = try h.device("A")
        let whole = try a.store.addBlob(Self.file(9, bytes: 10_000))
        await a.sync()
        let audio = Self.file(10, bytes: BlobLimits.chunkBytes * 2)
        let ref = try a.store.addBlob(audio)
        _ = try await a.transport.putBlob(ref, length: Int64(audio.count), offset: 0, bytes: Array(audio[..<BlobLimits.chunkBytes]))
        try await Task.sleep(nanoseconds: 5_000_000)
        #expect(h.service.sweepAbandonedUploads() == 1)
        #expect(try await a.transport.blobStatus(ref).received == 0)
        #expect(try await a.transport.blobStatus(whole).complete, "a complete file stays")
        let report = await a.sync()
        #expect(report.blobsUploaded == 1 && report.blobBytesSent == Int64(audio.count), "sent again from the start")
        var off = MaintenancePolicy()
        off.abandonedUploadSeconds = nil
        #expect(try SyncService(dataDirectory: h.service.dataDirectory, maintenance: off).sweepAbandonedUploads() == 0)
    }

    /// Files no row names any more are deleted once `unnamedBlobSeconds` have passed: one never
    /// named, one whose episode was deleted, one its episode's audio replaced. The files rows
    /// still name stay, and so does every file completed within the period.
    @Test func filesNoRowNamesAreCollected() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.unnamedBlobSeconds = 3_600
        let clock = ManualClock(startMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        let h = try SyncHarness(.inMemory, maintenance: maintenance, clock: clock)
        let a = try h.device("A")
        let b = try h.device("B")
        func add(_ seed: UInt64) throws -> BlobRef { try a.store.addBlob(Self.file(seed, bytes: 5_000 + Int(seed))) }
        let (kept, stray, deleted, replaced, replacing) = (try add(21), try add(22), try add(23), try add(24), try add(25))
        try a.store.write("episode.save", payload: ["title": .text("Kept"), "audio_ref": .text(kept.description)])
        let gone = try a.store.write("episode.save", payload: ["title": .text("Deleted"), "audio_ref": .text(deleted.description)]).entityID
        try a.store.write("episode.delete", entity: gone)
        let edited = try a.store.write("episode.save", payload: ["title": .text("Re-cut"), "audio_ref": .text(replaced.description)]).entityID
        try a.store.write("episode.update", entity: edited, payload: ["audio_ref": .text(replacing.description.uppercased())])
        #expect(await a.sync().blobsUploaded == 5)

        #expect(h.service.collectUnnamedBlobs() == (0, 0), "every file was completed within the hour")
        clock.advance(milliseconds: 2 * 3_600_000)
        let collected = h.service.collectUnnamedBlobs()
        #expect(collected == (3, Int64(5_022 + 5_023 + 5_024)))
        for ref in [stray, deleted, replaced] {
            #expect(try await a.transport.blobStatus(ref).length == nil, "\(ref) is gone")
        }
        for ref in [kept, replacing] {
            #expect(try await a.transport.blobStatus(ref).complete, "\(ref) is named")
        }
        #expect(h.service.collectUnnamedBlobs() == (0, 0))
        await b.sync()
        #expect(try await b.engine.fetchBlob(replacing).state == .fetched)
        do {
            _ = try await b.engine.fetchBlob(deleted)
            Issue.record("a collected file was fetched")
        } catch {
            #expect("\(error)".contains("blob_not_found"), "\(error)")
        }
        var keeps = maintenance
        keeps.unnamedBlobSeconds = nil
        #expect(try SyncService(dataDirectory: h.service.dataDirectory, maintenance: keeps, clock: clock).collectUnnamedBlobs() == (0, 0))
    }

    /// Deleted files leave pages free; a blobs file mostly free is rewritten smaller.
    @Test func aBlobsFileMostlyFreedIsRewrittenSmaller() throws {
        let directory = NSTemporaryDirectory() + "chronicle-blobs-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var files = ServerBlobFiles(dataDirectory: directory)
        let library = UUID()
        var refs: [String] = []
        for seed in 0..<4 {
            let bytes = Self.file(UInt64(50 + seed), bytes: 200_000)
            let ref = BlobRef.of(bytes)
            #expect(try files.put(library: library, blob: ref, length: Int64(bytes.count), offset: 0, bytes: bytes).complete)
            refs.append(ref.hex)
        }
        let path = ServerBlobFiles.path(of: library, in: directory)
        func size() throws -> Int64 { (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? 0 }
        try SalvageTests.Pages.checkpoint(path)
        let before = try size()
        #expect(try files.delete(library: library, blobs: Array(refs.prefix(3))) == 600_000)
        try files.giveSpaceBack(library: library)
        try SalvageTests.Pages.checkpoint(path)
        #expect(try size() >= before, "under 64 MiB free: left as it is")
        files.rewriteFreeBytesMin = 0
        try files.giveSpaceBack(library: library)
        let after = try size()
        #expect(after < before / 2, "\(after) of \(before)")
        #expect(try files.complete(library: library).map(\.blob) == ["sha256:" + refs[3]], "the file kept is whole")
        #expect(try files.range(library: library, blob: BlobRef(refs[3])!, offset: 0, count: 200_000).bytes == Self.file(53, bytes: 200_000))
    }

    /// What a push names between the projection's read and the deletion spares it: the ops
    /// confirmed after the read are handed over while pushes wait.
    @Test func opsConfirmedAfterTheReadSpareWhatTheyName() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let audio = try a.store.addBlob(Self.file(26, bytes: 3_000))
        await a.sync()
        let library = try h.library
        let (names, seq) = try library.blobNames(deletedBefore: nil)
        #expect(!names.contains(audio.hex))
        try a.store.write("episode.save", payload: ["title": .text("Late"), "audio_ref": .text(audio.description)])
        try a.store.write("article.save", payload: ["url": .text("https://example.com/a"), "title": .text("Other")])
        await a.sync()
        let namedSince = try library.whilePushesWait(namedAfter: seq) { $0 }
        #expect(namedSince == [audio.hex])
        #expect(try library.blobNames(deletedBefore: nil).names == [audio.hex])
    }

    /// A device deletes the files no row of its own names (`chronicle compact` does, for 30 days):
    /// queued, uploaded and fetched alike; the ones rows name stay.
    @Test func aDeviceDropsFilesNoRowNames() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let b = try h.device("B")
        let named = try a.store.addBlob(Self.file(27, bytes: 4_000))
        let episode = try a.store.write("episode.save", payload: ["title": .text("Named"), "audio_ref": .text(named.description)]).entityID
        let stray = try a.store.addBlob(Self.file(28, bytes: 4_001))
        await a.sync()
        await b.sync()
        #expect(try await b.engine.fetchBlob(named).state == .fetched)
        // A period of an hour: nothing is old enough; a negative one puts every horizon a minute ahead.
        let hour: Int64 = 3_600_000, aheadByAMinute: Int64 = -60_000
        #expect(try a.store.unnamedBlobs(unnamedFor: hour).isEmpty, "nothing is old enough")
        #expect(try a.store.unnamedBlobs(unnamedFor: aheadByAMinute).map(\.ref) == [stray])
        #expect(try a.store.dropUnnamedBlobs(unnamedFor: aheadByAMinute, givesSpaceBack: true) == (1, 4_001))
        #expect(try a.store.blobInfo(stray) == nil && a.store.blob(named) != nil)
        try b.store.write("episode.delete", entity: episode)
        #expect(try b.store.dropUnnamedBlobs(unnamedFor: hour) == (0, 0), "deleted within the period: still named")
        #expect(try b.store.dropUnnamedBlobs(unnamedFor: aheadByAMinute) == (0, 0), "the delete is pending: the confirmed row, which it may yet not replace, names it")
        await b.sync()
        #expect(try b.store.dropUnnamedBlobs(unnamedFor: aheadByAMinute) == (1, 4_000))
        #expect(try b.store.verify().passed)
    }

    /// The server restored from a backup taken before two files went up: the devices see another
    /// incarnation of the library, ask the server about every file they hold whole, and send the
    /// two it lost: one by the device that added it, one by a device that had fetched it (its
    /// author gone). A file the server kept is asked about and not sent.
    @Test func filesTheServerLostWithARestoreAreSentAgainByWhoeverHoldsThem() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A"), b = try h.device("B"), gone = try h.device("Gone")
        let kept = try a.store.addBlob(Self.file(41, bytes: 3_000))
        try a.store.write("episode.save", payload: ["title": .text("Kept"), "audio_ref": .text(kept.description)])
        await a.sync()
        let backup = h.directory + "/server-backup"
        _ = try ServerBackup.run(dataDirectory: h.directory + "/server", to: backup)
        let lostA = try a.store.addBlob(Self.file(42, bytes: 3_001))
        try a.store.write("episode.save", payload: ["title": .text("A's, lost"), "audio_ref": .text(lostA.description)])
        let lostGone = try gone.store.addBlob(Self.file(43, bytes: 3_002))
        try gone.store.write("episode.save", payload: ["title": .text("Gone's, lost"), "audio_ref": .text(lostGone.description)])
        await a.sync()
        await gone.sync()
        await b.sync()
        #expect(try await b.engine.fetchBlob(lostGone).state == .fetched)

        let restored = try SyncService(dataDirectory: backup)
        func engine(_ device: TestDevice) -> SyncEngine {
            SyncEngine(store: device.store, transport: InMemoryTransport(endpoint: restored, library: h.user.libraryID, token: device.token))
        }
        for ref in [lostA, lostGone] { #expect(try restored.blobStatusNow(library: h.user.libraryID, blob: ref, token: a.token).length == nil) }
        var sentA: Int64 = 0, sentB: Int64 = 0
        for _ in 0..<3 { sentA += await engine(a).syncOnce().blobBytesSent }
        for _ in 0..<3 { sentB += await engine(b).syncOnce().blobBytesSent }
        #expect(sentA == 3_001, "A sent its lost file, and only that one")
        #expect(sentB == 3_002, "B sent the file it had fetched")
        for ref in [kept, lostA, lostGone] {
            #expect(try restored.blobStatusNow(library: h.user.libraryID, blob: ref, token: a.token).complete, "\(ref)")
        }
        #expect(try a.store.blobUploadBacklog().count == 0 && b.store.blobUploadBacklog().count == 0)
        #expect(try b.store.blobInfo(lostGone)?.state == .uploaded)
    }

    /// A deleted library's files go with it.
    @Test func aDeletedLibrarysBlobsGoWithIt() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try a.store.addBlob(Self.file(7, bytes: 1_000))
        await a.sync()
        let file = ServerBlobFiles.path(of: h.user.libraryID, in: h.service.dataDirectory)
        #expect(FileManager.default.fileExists(atPath: file))
        try h.service.accounts.removeUser("ada", deletingLibrary: true)
        #expect(h.service.runLibraryDeletions() == [h.user.libraryID])
        #expect(!FileManager.default.fileExists(atPath: file))
    }
}
