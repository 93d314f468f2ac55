import ChronicleCore
import ChroniclePostgres
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing

/// Blobs kept in PostgreSQL (server format v4): an upload begun through one server goes on
/// through another, and either serves it.
@Suite("Blobs in PostgreSQL", .serialized)
struct PostgresBlobTests {
    static func file(_ seed: UInt64, bytes: Int) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<bytes).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    @Test func anUploadBegunThroughOneServerGoesOnThroughTheOther() async throws {
        let pair = try SharedServersTests.Pair()
        let a = try pair.device(0), aElsewhere = try pair.device(1), b = try pair.device(1)
        let audio = Self.file(21, bytes: BlobLimits.chunkBytes * 5 / 2)
        let ref = try a.store.addBlob(audio, mediaType: "audio/mpeg")
        // Through server one: the first chunk; then the device's connection moves to server two.
        let first = try await a.transport.putBlob(ref, length: Int64(audio.count), offset: 0, bytes: Array(audio[..<BlobLimits.chunkBytes]))
        #expect(first.received == Int64(BlobLimits.chunkBytes) && !first.complete)
        #expect(try await aElsewhere.transport.blobStatus(ref).received == Int64(BlobLimits.chunkBytes), "server two sees what server one took")
        let engine = SyncEngine(store: a.store, transport: aElsewhere.transport)
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced && report.blobsUploaded == 1)
        #expect(report.blobBytesSent == Int64(audio.count - BlobLimits.chunkBytes), "only the rest went")

        try await b.engine.fetchBlob(ref)
        #expect(try b.store.blob(ref) == audio)
        let range = try await a.transport.blobRange(ref, offset: Int64(BlobLimits.chunkBytes) - 3, count: 6)
        #expect(range.bytes == Array(audio[(BlobLimits.chunkBytes - 3)..<(BlobLimits.chunkBytes + 3)]))

        // Wrong bytes are refused and discarded here too.
        let liar = BlobRef.of([1, 2, 3])
        do {
            _ = try await a.transport.putBlob(liar, length: 3, offset: 0, bytes: [3, 2, 1])
            Issue.record("bytes that do not hash to their address were kept")
        } catch {
            guard case .terminal(let refusal) = error else { Issue.record("\(error)"); return }
            #expect(refusal.code == .blobDigestMismatch)
        }
        #expect(try await a.transport.blobStatus(liar).received == 0)

        // An upload begun and left: swept where the servers keep their files.
        let left = BlobRef.of([7, 7, 7, 7])
        _ = try await b.transport.putBlob(left, length: 4, offset: 0, bytes: [7, 7])
        try await Task.sleep(nanoseconds: 5_000_000)
        #expect(try pair.servers[1].service.blobs.dropAbandonedUploads(before: Int64(Date().timeIntervalSince1970 * 1000)) == 1)
        #expect(try await a.transport.blobStatus(left).received == 0)
        #expect(try await a.transport.blobStatus(ref).complete, "a complete file stays")
        let pg = try pair.database.connection()
        #expect(try pg.execute("SELECT value FROM chronicle_meta WHERE key = 'format_version'").string(0, 0) == "4")
        #expect(try pg.execute("SELECT count(*) FROM chronicle_blob_chunks").int(0, 0) == 2, "a row per chunk taken")
        // The library deleted: its blobs go with it.
        try pair.servers[0].service.accounts.removeUser("ada", deletingLibrary: true)
        #expect(pair.servers[0].service.runLibraryDeletions() == [pair.user.libraryID])
        #expect(try pg.execute("SELECT count(*) FROM chronicle_blobs").int(0, 0) == 0)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_blob_chunks").int(0, 0) == 0)
    }

    /// Files no row names are deleted from PostgreSQL by whichever server looks, reading the
    /// library's ops that the other server ordered.
    @Test func filesNoRowNamesAreCollectedByEitherServer() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.unnamedBlobSeconds = 0
        let pair = try SharedServersTests.Pair(maintenance: maintenance)
        let a = try pair.device(0)
        let named = try a.store.addBlob(Self.file(31, bytes: 2_000))
        let stray = try a.store.addBlob(Self.file(32, bytes: 2_001))
        try a.store.write("episode.save", payload: ["title": .text("Named"), "audio_ref": .text(named.description)])
        #expect(await a.engine.syncOnce().blobsUploaded == 2)
        try await Task.sleep(nanoseconds: 5_000_000)
        #expect(pair.servers[1].service.collectUnnamedBlobs() == (1, 2_001))
        #expect(try await a.transport.blobStatus(stray).length == nil)
        #expect(try await a.transport.blobStatus(named).complete)
        let pg = try pair.database.connection()
        #expect(try pg.execute("SELECT count(*) FROM chronicle_blobs").int(0, 0) == 1)
    }

    /// The files collection's last look and its delete, with two servers: while server one reads
    /// the ops confirmed since its look at the projection and deletes, a push through server two
    /// that names a file waits for it (the library's row in PostgreSQL), then lands, and the next
    /// collection keeps the file.
    @Test func aPushThroughTheOtherServerWaitsWhileOneServerDeletes() async throws {
        var maintenance = MaintenancePolicy()
        maintenance.unnamedBlobSeconds = 0
        let pair = try SharedServersTests.Pair(maintenance: maintenance)
        let a = try pair.device(0), b = try pair.device(1)
        let file = try a.store.addBlob(Self.file(33, bytes: 1_500))
        #expect(await a.engine.syncOnce().blobsUploaded == 1)
        #expect(await b.engine.syncOnce().outcome == .synced)
        let library = try pair.servers[0].service.library(pair.user.libraryID)
        let (names, seq) = try library.blobNames(deletedBefore: nil)
        #expect(!names.contains(file.hex))
        _ = try b.store.write("episode.save", payload: ["title": .text("Late"), "audio_ref": .text(file.description)])
        let landed = Locked(false)
        let (push, landedWhileDeleting) = try library.whilePushesWait(namedAfter: seq) { namedSince in
            #expect(!namedSince.contains(file.hex))
            let push = Task {
                let report = await b.engine.syncOnce()
                landed.withLock { $0 = true }
                return report.outcome
            }
            // Long enough for the push to land, were it not held: it takes milliseconds.
            Thread.sleep(forTimeInterval: 0.5)
            return (push, landed.withLock { $0 })
        }
        #expect(!landedWhileDeleting, "a push through the other server landed while this one was deleting")
        #expect(await push.value == .synced)
        try await Task.sleep(nanoseconds: 5_000_000)
        #expect(pair.servers[0].service.collectUnnamedBlobs() == (0, 0))
        #expect(try await a.transport.blobStatus(file).complete)
    }
}
