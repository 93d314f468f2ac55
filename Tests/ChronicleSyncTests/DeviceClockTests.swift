import ChronicleCore
import ChronicleServer
import ChronicleStore
@testable import ChronicleSync
import ChronicleTesting
import Foundation
import Testing

/// A device's clock decides nothing (`Schemas/store/device-v9.md`, "Times in the projection"):
/// not how long a deleted row's files are kept, on the server or on a device, nor where a row
/// sorts in every device's "newest first". Real server, real SQLite stores; the clocks are
/// simulated: the server's is true time, the devices' are years ahead or behind it.
@Suite struct DeviceClockTests {
    static let day: Int64 = 86_400_000
    static let years: Int64 = 3 * 365 * day

    /// True time, the server's clock on it, and a harness whose server keeps unnamed files 30 days.
    struct World {
        let time = SimulatedTime()
        let server: SimulatedClock
        let h: SyncHarness

        init() throws {
            server = SimulatedClock(time: time)
            var maintenance = MaintenancePolicy()
            maintenance.unnamedBlobSeconds = 30 * 86_400
            h = try SyncHarness(.inMemory, maintenance: maintenance, clock: server)
        }

        func device(_ name: String, offset: Int64 = 0) throws -> TestDevice {
            try h.device(name, clock: SimulatedClock(time: time, offsetMilliseconds: offset))
        }

        func advance(days: Int64) { time.advance(milliseconds: days * DeviceClockTests.day) }

        /// The server's time of the confirmed op `opID`.
        func serverTime(of opID: UUID) throws -> Int64? {
            try h.library.allOps().first { $0.opID == opID }?.serverTime
        }
    }

    /// The episode of issue 56: deleted on a device whose clock is years behind, the server's
    /// collection runs a day later, and the episode is restored within the period: the other
    /// devices still download its audio, and the file goes only once the period has passed.
    @Test func aDeleteByAClockYearsBehindKeepsTheFileOnTheServerForThePeriod() async throws {
        let w = try World()
        let uploader = try w.device("uploader")
        let behind = try w.device("behind", offset: -Self.years)
        let other = try w.device("other")
        let audio = try uploader.store.addBlob(BlobSyncTests.file(56, bytes: 5_000))
        let episode = try uploader.store.write("episode.save", payload: ["title": .text("Clocks"), "audio_ref": .text(audio.description)]).entityID
        await uploader.sync()
        await behind.sync()
        w.advance(days: 40)   // the file was completed long ago: only the row's delete can keep it

        let delete = try behind.store.write("episode.delete", entity: episode)
        await behind.sync()
        let deletedAt = try w.serverTime(of: delete.opID)
        #expect(deletedAt == w.server.nowMilliseconds())
        #expect(try behind.store.row(episode)?["deleted_at"]?.integerValue == deletedAt, "the server's time, not the device's years ago")
        await other.sync()
        #expect(try other.store.row(episode)?["deleted_at"]?.integerValue == deletedAt)

        w.advance(days: 1)
        #expect(w.h.service.collectUnnamedBlobs() == (0, 0), "deleted a day ago by the server's clock")
        try behind.store.write("episode.restore", entity: episode)
        await behind.sync()
        await other.sync()
        #expect(try await other.engine.fetchBlob(audio).state == .fetched, "the restored episode's audio is still there")
        try w.h.expectConverged()

        // Deleted again and left for the period: now it goes.
        try behind.store.write("episode.delete", entity: episode)
        await behind.sync()
        w.advance(days: 31)
        #expect(w.h.service.collectUnnamedBlobs() == (1, 5_000))
    }

    /// `chronicle compact` on a device: a file held 40 days, whose row another device (years
    /// behind) deleted a day ago, stays on a device whose own clock is years ahead, and on the
    /// one behind; it goes once the delete is older than the period by the server's clock.
    @Test func compactOnADeviceMeasuresADeleteByTheServersTime() async throws {
        let w = try World()
        let uploader = try w.device("uploader")
        let behind = try w.device("behind", offset: -Self.years)
        let ahead = try w.device("ahead", offset: Self.years)
        let audio = try uploader.store.addBlob(BlobSyncTests.file(57, bytes: 6_000))
        let episode = try uploader.store.write("episode.save", payload: ["title": .text("Skew"), "audio_ref": .text(audio.description)]).entityID
        await uploader.sync()
        for device in [behind, ahead] {
            await device.sync()
            #expect(try await device.engine.fetchBlob(audio).state == .fetched)
        }
        w.advance(days: 40)
        try behind.store.write("episode.delete", entity: episode)
        #expect(try behind.store.dropUnnamedBlobs(unnamedFor: 30 * Self.day) == (0, 0), "a queued delete decides nothing")
        await behind.sync()
        await ahead.sync()
        w.advance(days: 1)
        for device in [behind, ahead, uploader] {
            await device.sync()
            #expect(try device.store.dropUnnamedBlobs(unnamedFor: 30 * Self.day) == (0, 0), "\(device.name): deleted a day ago")
        }
        try behind.store.write("episode.restore", entity: episode)
        await behind.sync()
        await ahead.sync()
        #expect(try ahead.store.blobInfo(audio)?.isHeld == true)

        try ahead.store.write("episode.delete", entity: episode)
        await ahead.sync()
        w.advance(days: 31)
        for device in [behind, ahead] {
            await device.sync()
            #expect(try device.store.dropUnnamedBlobs(unnamedFor: 30 * Self.day) == (0, 0),
                    "\(device.name): the newest server time it holds is the delete's own")
        }
        try uploader.store.write("article.save", payload: ["url": .text("https://example.com/later"), "title": .text("Later")])
        await uploader.sync()
        for device in [behind, ahead] {
            await device.sync()
            #expect(try device.store.dropUnnamedBlobs(unnamedFor: 30 * Self.day) == (1, 6_000), "\(device.name): deleted 31 days ago by the server's clock")
        }
    }

    /// A device years ahead compacting with a horizon drops no history the server's clock calls recent.
    @Test func aHorizonOnADeviceYearsAheadDropsNothingRecent() async throws {
        let w = try World()
        let ahead = try w.device("ahead", offset: Self.years)
        for n in 0..<5 { try ahead.save("Article \(n)") }
        await ahead.sync()
        var policy = CompactionPolicy()
        policy.keepOps = 0
        policy.segmentOpsMax = 2
        policy.horizonMilliseconds = 30 * Self.day
        #expect(try ahead.store.compactionPlan(policy).dropThrough == nil, "every op is recent by the server's clock")
        w.advance(days: 31)
        let writer = try w.device("writer")
        try writer.save("Later")
        await writer.sync()
        await ahead.sync()
        #expect(try ahead.store.compactionPlan(policy).dropThrough != nil, "31 days old by the server's clock")
    }

    /// `created_at`: a clock years ahead does not pin a row to the top of everyone's "newest
    /// first" (it is bounded by the server's time of the op once confirmed); a clock years behind
    /// keeps its earlier time. Queued, a row shows its author's clock, on its author alone. Every
    /// device, the server and a rebuild agree.
    @Test func createdAtIsNeverLaterThanTheServersTimeOfTheOp() async throws {
        let w = try World()
        let ahead = try w.device("ahead", offset: Self.years)
        let behind = try w.device("behind", offset: -Self.years)
        let honest = try w.device("honest")

        let early = try ahead.save("From the future")
        #expect(try ahead.store.row(early)?["created_at"]?.integerValue == w.time.nowMilliseconds + Self.years, "queued: its author's clock")
        await ahead.sync()
        let confirmedAt = w.server.nowMilliseconds()
        #expect(try ahead.store.row(early)?["created_at"]?.integerValue == confirmedAt, "confirmed: the server's time")
        w.advance(days: 1)
        let old = try behind.save("From the past")
        let behindAt = w.time.nowMilliseconds - Self.years
        await behind.sync()
        #expect(try behind.store.row(old)?["created_at"]?.integerValue == behindAt, "earlier than the server's time: kept")
        w.advance(days: 1)
        let latest = try honest.save("Now")
        await honest.sync()
        for device in [ahead, behind, honest] {
            await device.sync()
            #expect(try device.store.rows("article").map(\.id) == [latest, early, old].map(\.lowercased), "\(device.name): newest first")
            #expect(try device.store.row(early)?["created_at"]?.integerValue == confirmedAt)
        }
        try w.h.expectConverged()
        for device in [ahead, behind, honest] {
            #expect(try device.store.verify().passed)
            _ = try device.store.rebuild()
        }
        try w.h.expectConverged()
    }
}
