@testable import ChronicleStore
import ChronicleCore
import Foundation
import Testing

/// A push answer may say that an own op was ordered inside the snapshot the store started from
/// (`confirmInSnapshot`); the log has the last word when it brings that op after the snapshot.
@Suite struct SnapshotClaimTests {
    /// A store that started from a snapshot at 6, and an own op in its queue.
    private func started() throws -> (device: Fixture, server: ServerLog, mine: Op) {
        let (device, server) = try Fixture.startedFromSnapshot(sourceSeed: 21, deviceSeed: 22)
        try device.save("https://e.com/mine", title: "Mine")
        return (device, server, try #require(try device.store.pendingOps().first))
    }

    @Test func anOpAnAnswerPlacedInsideTheSnapshotIsAppliedWhereTheLogBringsIt() throws {
        let (device, server, mine) = try started()
        // The answer's word: ordered at 3, inside the snapshot. The store leaves the op out.
        #expect(try device.store.confirmInSnapshot(mine.opID, serverSeq: 3))
        #expect(try device.store.pendingOps().isEmpty)
        #expect(try device.store.rows("article").count == 6)

        // The log brings it at 7: the answer was wrong, and the op is applied there.
        let result = try device.store.applyConfirmed([server.confirm(mine)])
        #expect(result.cursor == 7 && result.confirmedOwn == 1)
        #expect(try device.store.confirmedSeq(of: mine.opID) == 7)
        #expect(try device.store.rows("article").count == 7)
        #expect(try device.store.verify().passed)
    }

    @Test func anIdTheLogAlreadyHoldsIsStillAppliedAtMostOnce() throws {
        let (device, server, mine) = try started()
        _ = try device.store.applyConfirmed([server.confirm(mine)])   // seq 7, from the log
        let again = server.confirm(mine)                               // the same op at 8
        #expect(throws: ChronicleError.self) { try device.store.applyConfirmed([again]) }
        #expect(try device.store.confirmedSeq(of: mine.opID) == 7)

        // An op of another device whose id the store holds inside the snapshot: refused too.
        let (other, otherServer, theirs) = try started()
        #expect(try other.store.confirmInSnapshot(theirs.opID, serverSeq: 3))
        var stranger = otherServer.confirm(theirs)
        stranger.deviceID = UUID()
        #expect(throws: ChronicleError.self) { try other.store.applyConfirmed([stranger]) }
    }
}
