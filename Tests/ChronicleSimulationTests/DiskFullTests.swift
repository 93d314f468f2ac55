import ChronicleCore
import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// A full disk: writes fail with `disk_full`, nothing half-written, `verify()` passes, and
/// once there is room again everything carries on.
@Suite struct DiskFullTests {
    @Test("A write on a full disk fails with disk_full and leaves the store intact")
    func writeOnFullDisk() throws {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let path = "\(root)/chronicle-diskfull-\(UUID().lowercased).chronicle"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let time = SimulatedTime()
        let ids = SimulatedIDGenerator(random: SimulationRandom(seed: 1))
        let store = try DeviceStore.create(at: path, schema: .readItLater, clock: SimulatedClock(time: time), ids: ids)
        let first = try store.write("article.save", payload: ["url": .text("https://example.com/a"), "title": .text("before")])
        try store.limitFileSize(pages: try store.pageCount())

        var refusal: ChronicleError?
        var written = 1
        for index in 0..<2_000 {
            do {
                try store.write("article.save", payload: ["url": .text("https://example.com/\(index)"),
                                                          "title": .text(String(repeating: "full disk \(index) ", count: 60))])
                written += 1
            } catch let error as ChronicleError {
                refusal = error
                break
            }
        }
        let error = try #require(refusal, "the capped store never filled up")
        #expect(error.code == .diskFull)
        #expect(error.message.contains("disk is full"))
        #expect(try store.status().lastDeviceSeq == Int64(written), "the refused write took no deviceSeq")
        #expect(try store.pendingOps().count == written)
        let report = try store.verify()
        #expect(report.passed, "\(report.checks.filter { !$0.passed }.map { "\($0.name): \($0.detail)" })")

        // Edits of existing rows may still fit; either way nothing is corrupted.
        _ = try? store.write("article.tag", entity: first.entityID, payload: ["tag": .text("still here")])
        #expect(try store.verify().passed)

        try store.limitFileSize(pages: nil)
        let after = try store.write("article.save", payload: ["url": .text("https://example.com/after"), "title": .text("room again")])
        #expect(after.deviceSeq == (try store.status().lastDeviceSeq))
        #expect(try store.verify().passed)
        #expect(try store.digest() == (try store.replayDigest()))
    }

    @Test("Devices whose disks fill up mid-run still converge once freed")
    func diskFullUnderSimulation() async throws {
        let report = try #require(await SimulationSeeds.run(Simulator(seed: 31337, devices: 3, steps: 120,
                                                                        faults: FaultPlan.none.forcing(.diskFull, rate: 0.2),
                                                                        tolerating: SimulationSeeds.tolerated)))
        #expect(report.faults[.diskFull, default: 0] >= 3)
        #expect(report.writesRefused > 0, "some writes met a full disk: \(report)")
    }
}
