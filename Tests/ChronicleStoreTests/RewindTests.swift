import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// `DeviceStore.rewind(toAgreedSeq:)`: the server's log ends before this store's cursor (its
/// data directory restored from a backup). The store goes back to what the server holds, queues
/// its own ops the server lost again, and lets the rest go.
@Suite struct RewindTests {
    /// An op of this device, confirmed at the server's next seq.
    @discardableResult
    func confirmOwn(_ f: Fixture, _ server: ServerLog) throws -> Op {
        let op = try #require(try f.store.pendingOps().first)
        try f.store.applyConfirmed([server.confirm(op)])
        return op
    }

    /// A tag this device's other copy (the store before it was restored from a backup) wrote as
    /// its `deviceSeq`, confirmed at the server's next seq.
    func fromTheOtherCopy(_ f: Fixture, _ server: ServerLog, _ deviceSeq: Int64, tag: String, on article: UUID) -> Op {
        var op = server.op("article.tag", entity: article, from: f.store.deviceID, payload: ["tag": .text(tag)])
        op.deviceSeq = deviceSeq
        return op
    }

    @Test func ownOpsAfterTheHeadAreQueuedAgainAndOthersOpsGo() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let other = UUID()
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        let b = UUID()
        try f.store.applyConfirmed([server.op("article.save", entity: b, from: other,
                                              payload: ["url": .text("https://e.com/b"), "title": .text("B")])])  // seq 2
        // The server's backup holds everything up to here.
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("after-the-backup")])
        try confirmOwn(f, server)                                                                  // seq 3, own #2
        try f.store.applyConfirmed([server.op("article.update", entity: b, from: other, payload: ["title": .text("B renamed")])])  // seq 4
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.5)])        // own #3, queued
        let digestBefore = try f.store.digest()

        let report = try f.store.rewind(toAgreedSeq: 2)
        #expect(report == RewindReport(agreedSeq: 2, rewoundTo: 2, dropped: 2, requeued: 1))
        #expect(try f.store.cursor() == 2)
        #expect(try f.store.confirmedOps().map(\.serverSeq) == [1, 2])
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3], "own #2 is queued again, ahead of #3")
        #expect(try f.tags(a) == ["after-the-backup"], "a queued op shows, as ever")
        #expect(try f.field(b, "title")?.textValue == "B", "another device's op the server lost is gone")
        #expect(try f.store.digest() != digestBefore)
        #expect(try f.store.verify().passed)
        #expect(try f.store.unacknowledgedOps(limit: 10).map(\.deviceSeq) == [2, 3], "everything queued is pushed again")

        // The restored server takes #2 anew (at seq 3) and #3 after it.
        server.seq = 2
        try confirmOwn(f, server)
        try confirmOwn(f, server)
        #expect(try f.store.pendingOps().isEmpty)
        #expect(try f.store.confirmedOps().map(\.deviceSeq) == [1, 1, 2, 3])
        #expect(try f.store.verify().passed)

        // Nothing to go back to: a head at or past the cursor changes nothing.
        let digest = try f.store.digest()
        #expect(try f.store.rewind(toAgreedSeq: 9) == RewindReport(agreedSeq: 9, rewoundTo: 9, dropped: 0, requeued: 0))
        #expect(try f.store.digest() == digest && f.store.cursor() == 4)
        #expect((#expect(throws: ChronicleError.self) { try f.store.rewind(toAgreedSeq: -1) })?.code == .invalidValue)
    }

    /// The server asks for a number this store holds refused (`device_seq_gap` after it lost the
    /// refusal): the refused ops from there go back into the queue with their numbers, and the
    /// projection shows them on top again, as a replay does. A number the store holds confirmed,
    /// or one whose op is queued, is not a gap `closeOutboxGap` may close.
    @Test func aRefusalTheServerLostIsQueuedAgainAndAGapOfHeldOpsIsNotClosed() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        let tag = try f.store.write("article.tag", entity: a, payload: ["tag": .text("refused-then")])  // #2
        #expect(try f.store.reject(tag.opID, code: "entity_deleted", message: "refused", verdict: nil))
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.25)])        // #3, queued
        #expect(try f.tags(a).isEmpty)
        #expect(try f.store.closeOutboxGap(after: 1) == nil, "#2 is held, refused")
        #expect(try f.store.queueRefusedAgain(after: 2) == 0, "nothing refused at #3")

        #expect(try f.store.queueRefusedAgain(after: 1) == 1)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3])
        #expect(try f.tags(a) == ["refused-then"], "the queued op shows again")
        #expect(try f.store.verify().passed)
        #expect(try f.store.unacknowledgedOps(limit: 10).map(\.deviceSeq) == [2, 3])
        #expect(try f.store.closeOutboxGap(after: 0) == nil, "#1 is held, confirmed")
        // Acknowledged, and the pull that caught up with the head did not bring them: lost, sent again.
        try f.store.recordAcknowledged(through: 3)
        #expect(try f.store.forgetAcknowledgementsTheLogMissed() == 2)
        #expect(try f.store.unacknowledgedOps(limit: 10).map(\.deviceSeq) == [2, 3])
        #expect(try f.store.forgetAcknowledgementsTheLogMissed() == 0)
    }

    /// The server asks for #2, which is queued; this store holds #3 refused. The server holds
    /// nothing after #1, so it lost that refusal too: #3 is queued again with the ops around it
    /// (simulator seed 13705 of 400 steps: the refusal kept the queue from closing over numbers
    /// lost with the server, and the device stayed refused with `device_seq_gap`).
    @Test func refusalsAfterTheServersLastAreQueuedAgainWhereTheNumberItAsksForIsNotRefused() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.25)])        // #2, queued
        let tag = try f.store.write("article.tag", entity: a, payload: ["tag": .text("refused")])   // #3
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.5)])         // #4, queued
        #expect(try f.store.reject(tag.opID, code: "entity_deleted", message: "refused", verdict: nil))
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 4])
        #expect(try f.store.queueRefusedAgain(after: 3) == 0, "nothing refused after #3")

        #expect(try f.store.queueRefusedAgain(after: 1) == 1)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3, 4])
        #expect(try f.tags(a) == ["refused"], "the queued op shows again")
        #expect(try f.store.queueRefusedAgain(after: 1) == 0, "queued already")
        #expect(try f.store.verify().passed)
    }

    /// A refused op queued again, then numbered again after the server's last (`device_seq_reused`:
    /// the server holds this number from a request of another era that reached it late): its
    /// refusal record follows it to its new number. Refused there again, it leaves the queue and
    /// the record still accounts for its number (simulator seed 14310 of 400 steps: the record
    /// stayed at the old number, the number the server refused it under was accounted for by
    /// nothing, and `verify` failed once a rewind queued the ops around it again).
    @Test func aRefusedOpQueuedAgainTakesItsRecordAlongWhenTheQueueIsNumberedAgain() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        let tag = try f.store.write("article.tag", entity: a, payload: ["tag": .text("refused")])   // #2
        #expect(try f.store.reject(tag.opID, code: "entity_deleted", message: "refused", verdict: nil))
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.5)])         // #3, queued
        #expect(try f.store.queueRefusedAgain(after: 1) == 1)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3])

        // The server holds this device's #2 already (another op): the queue follows it.
        #expect(try f.store.renumberOutbox(from: 2, after: 2) == 2)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [3, 4])
        #expect(try f.store.notices(limit: 10).isEmpty, "queued again, it is no standing refusal")
        let records = try f.store.read { db in try db.query("SELECT device_seq FROM chronicle_rejected") { $0.int(0) } }
        #expect(records == [3], "the record follows the op")
        #expect(try f.store.verify().passed)

        // Refused again under its new number: the record accounts for it.
        #expect(try f.store.reject(tag.opID, code: "entity_deleted", message: "refused again", verdict: nil))
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [4])
        #expect(try f.store.notices(limit: 10).map(\.op.deviceSeq) == [3])
        #expect(try f.store.verify().passed, "#3 is accounted for by the refusal")
    }

    /// An own op confirmed under another number than the one it is queued with (a copy of this
    /// store numbered it again, and this one was restored from a backup older than that): its
    /// queued number is left without an op, and is given up, so `verify` still accounts for every
    /// number. When the server asks for that number, the queue behind it takes it, and nothing is
    /// counted as lost (the op is confirmed).
    @Test func anOwnOpConfirmedUnderAnotherNumberGivesUpItsQueuedOneAndTheQueueClosesOverIt() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("queued")])             // #2
        var moved = try f.store.write("article.tag", entity: a, payload: ["tag": .text("moved")])  // #3
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.5)])        // #4
        moved.deviceSeq = 2                                                                        // as the other copy numbered it
        try f.store.applyConfirmed([server.confirm(moved)])                                        // seq 2
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 4])
        #expect(try f.store.read { db in try DeviceStore.deviceSeqSkips(in: db) } == [[3, 3]])
        let verified = try f.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")

        #expect(try f.store.closeOutboxGap(after: 2) == 0, "#3 was given up, not lost")
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3])
        #expect(try f.store.read { db in try DeviceStore.deviceSeqSkips(in: db) } == [])
        #expect(try f.store.closeOutboxGap(after: 2) == nil, "the queue holds every number")
        #expect(try f.store.verify().passed)
        #expect(try f.tags(a) == ["moved", "queued"])
    }

    /// Seed 205 of 2,000 steps with app updates: a store restored from a backup pulled back its
    /// own ops numbered past its last write (the older copy had pushed them before the backup
    /// was replaced). Its next write took #3, a number it held confirmed; then the server was
    /// restored and lost both, and the rewind, queuing its own ops again, kept only one of the
    /// two #3s: an op the person wrote vanished. Now a confirmed own number past the last written
    /// is taken as used, so a write follows it; and a rewind moves an op queued under the number
    /// of an own op it queues again after it.
    @Test func ownOpsConfirmedPastTheLastNumberAreTakenAsUsed() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        // The other copy of this store (before its file was restored) wrote and pushed #2 and #3.
        try f.store.applyConfirmed([fromTheOtherCopy(f, server, 2, tag: "two", on: a)])                               // seq 2
        #expect(try f.store.status().lastDeviceSeq == 2)
        let written = try f.store.write("article.tag", entity: a, payload: ["tag": .text("written-after")])
        #expect(written.deviceSeq == 3, "the write follows the confirmed #2")
        #expect(try f.store.read { db in try DeviceStore.deviceSeqSkips(in: db) } == [[2, 2]])
        // The other copy's #3 arrives while this store's #3 is queued: the queued one stays (the
        // server refuses its number as used again, and the queue then moves after the server's last).
        try f.store.applyConfirmed([fromTheOtherCopy(f, server, 3, tag: "three", on: a)])                             // seq 3
        #expect(try f.store.pendingOps().map(\.opID) == [written.opID])
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [3])
        let verified = try f.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")

        // The server is restored to seq 1 before that: every own op after it is queued again, and
        // the queued #3 moves after them; none is lost.
        let report = try f.store.rewind(toAgreedSeq: 1)
        #expect(report.requeued == 2)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3, 4])
        #expect(Set(try f.store.pendingOps().map(\.opID)).contains(written.opID))
        #expect(try f.tags(a) == ["three", "two", "written-after"])
        #expect(try f.store.verify().passed)
    }

    /// Seed 16,382 of 400 steps: a pull that brings an own op under the number of a queued one
    /// must not renumber the queue there. The ops queued after it may already be numbered as the
    /// server asked (`device_seq_reused`) and answered; moved below their numbers, they counted
    /// as answered (under the acknowledged number) and were never pushed again.
    @Test func aPulledOwnOpUnderAQueuedNumberLowersNoQueuedNumber() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("two")])               // #2
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("three")])             // #3
        #expect(try f.store.renumberOutbox(from: 3, after: 9) == 1)                                // as the server asked: #3 → #10
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 10])
        try f.store.applyConfirmed([fromTheOtherCopy(f, server, 2, tag: "the-other-copy's", on: a)])  // seq 2, own #2 of the other copy
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 10], "no queued number goes down")
        #expect(try f.store.status().lastDeviceSeq == 10)
        #expect(try f.store.verify().passed)
    }

    /// A store can hold an op queued under the number of one of its own confirmed ops (written
    /// before it pulled that op; and, before 12-04, after it too). A rewind queues both: the
    /// queued one moves after it.
    @Test func aRewindQueuesAnOwnOpAndAnOpQueuedUnderItsNumberBoth() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        let other = fromTheOtherCopy(f, server, 2, tag: "the-other-copy's", on: a)
        try f.store.applyConfirmed([other])                                                        // seq 2, own #2
        // As a store of before 12-04 left it: the next write took #2 again.
        try f.store.writeTransaction { db in
            try LogTables.setMeta("last_device_seq", .integer(1), in: db)
            try db.execute("DELETE FROM chronicle_meta WHERE key = ?1", [.text(DeviceStore.deviceSeqSkipsKey)])
        }
        let written = try f.store.write("article.tag", entity: a, payload: ["tag": .text("written")])
        #expect(written.deviceSeq == 2)

        let report = try f.store.rewind(toAgreedSeq: 1)
        #expect(report.requeued == 1)
        #expect(try f.store.pendingOps().map(\.opID) == [other.opID, written.opID])
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3])
        #expect(try f.tags(a) == ["the-other-copy's", "written"])
        let verified = try f.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")
    }

    /// A refused op queued again sits ahead of this device's ops confirmed since; when those are
    /// sealed (a pull's pages are sealed on arrival), they still account for their numbers:
    /// `verify` took them for a gap in the outbox (simulator seed 12495).
    @Test func ownOpsConfirmedInSealedHistoryAccountForTheirNumbersBehindARefusalQueuedAgain() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        let tag = try f.store.write("article.tag", entity: a, payload: ["tag": .text("refused")])   // own #2
        #expect(try f.store.reject(tag.opID, code: "free_tier_cap", message: "Over the cap.", verdict: nil))
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("kept")])                // own #3
        try confirmOwn(f, server)                                                                  // seq 2
        var policy = CompactionPolicy()
        policy.keepOps = 0
        try f.store.compact(policy)
        #expect(try f.store.read { db in try LogTables.sealedUpTo(in: db) } == 2, "both ops are sealed")

        #expect(try f.store.queueRefusedAgain(after: 1) == 1)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2])
        let verified = try f.store.verify()
        #expect(verified.passed, "\(verified.checks.filter { !$0.passed }.map(\.detail))")
        #expect(try f.store.closeOutboxGap(after: 1) == nil, "#3 is held, confirmed and sealed")
    }

    /// An op the server refused after its backup: the restored server does not know its number
    /// and would wait for it before the ops after it. It is queued again with them; answered
    /// again, it keeps its first record and leaves one notice.
    @Test func opsRefusedAfterTheHeadAreQueuedAgainAndKeepTheirFirstRecord() throws {
        let f = try Fixture(seed: 3)
        let server = ServerLog(library: f.store.libraryID)
        let a = try f.save("https://e.com/a", title: "A")
        try confirmOwn(f, server)                                                                  // seq 1, own #1
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("refused")])             // own #2
        #expect(try f.store.reject(try #require(try f.store.pendingOps().first).opID, code: "free_tier_cap", message: "Over the cap.", verdict: nil))
        try f.store.write("article.tag", entity: a, payload: ["tag": .text("kept")])                // own #3
        try confirmOwn(f, server)                                                                  // seq 2
        try f.store.write("article.progress", entity: a, payload: ["progress": .real(0.25)])       // own #4, queued

        let report = try f.store.rewind(toAgreedSeq: 1)
        #expect(report == RewindReport(agreedSeq: 1, rewoundTo: 1, dropped: 1, requeued: 1, refusedRequeued: 1))
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 3, 4])
        #expect(try f.store.verify().passed, "the refused op queued again is counted once")
        #expect(try f.store.notices().isEmpty, "queued again, it waits for its answer: no notice meanwhile")

        // The restored server refuses #2 again: its first record stays, one notice.
        let refused = try #require(try f.store.pendingOps().first)
        #expect(try f.store.reject(refused.opID, code: "free_tier_cap", message: "Over the cap, again.", verdict: nil))
        #expect(try f.store.notices().map(\.message) == ["Over the cap."])
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [3, 4])
        #expect(try f.tags(a) == ["kept"])
        #expect(try f.store.verify().passed)

        // Another refused op queued again, which the restored server takes this time: its notice goes.
        let g = try Fixture(seed: 4)
        let other = ServerLog(library: g.store.libraryID)
        let b = try g.save("https://e.com/b", title: "B")
        try confirmOwn(g, other)                                                                   // seq 1
        try g.store.write("article.tag", entity: b, payload: ["tag": .text("taken-later")])        // own #2, refused
        #expect(try g.store.reject(try #require(try g.store.pendingOps().first).opID, code: "free_tier_cap", message: "Over.", verdict: nil))
        #expect(try g.store.notices().count == 1 && g.store.syncState().unseenNotices == 1)
        try g.store.write("article.tag", entity: b, payload: ["tag": .text("then")])               // own #3
        try confirmOwn(g, other)                                                                   // seq 2
        #expect(try g.store.rewind(toAgreedSeq: 1).refusedRequeued == 1)
        other.seq = 1
        try confirmOwn(g, other)                                                                   // #2 taken at seq 2
        try confirmOwn(g, other)                                                                   // #3 at seq 3
        #expect(try g.store.notices().isEmpty && g.store.syncState().unseenNotices == 0, "taken now: no refusal stands")
        #expect(try g.tags(b).sorted() == ["taken-later", "then"])
        #expect(try g.store.verify().passed)
    }

    @Test func aSealedSegmentSpanningTheHeadGoesWholeAndTheStateIsAReplayOfWhatStays() throws {
        let f = try Fixture(seed: 5)
        let server = ServerLog(library: f.store.libraryID)
        let other = UUID()
        // #1, refused long before: the ops kept below the point (sealed) come after it, so it stays refused.
        try f.save("https://e.com/refused", title: "Refused")
        #expect(try f.store.reject(try #require(try f.store.pendingOps().first).opID, code: "free_tier_cap", message: "Over.", verdict: nil))
        var own: [Int64] = []
        for i in 0..<10 {
            if i % 2 == 0 {
                try f.save("https://e.com/\(i)", title: "Own \(i)")
                own.append(try confirmOwn(f, server).deviceSeq)                     // seqs 1, 3, 5, 7, 9
            } else {
                try f.store.applyConfirmed([server.op("article.save", entity: UUID(), from: other,
                                                      payload: ["url": .text("https://e.com/o\(i)"), "title": .text("Other \(i)")])])
            }
        }
        var policy = CompactionPolicy()
        policy.keepOps = 2
        policy.segmentOpsMax = 4
        try f.store.compact(policy)
        #expect(try f.store.segments().map(\.firstSeq) == [1, 5])
        try f.save("https://e.com/queued", title: "Queued")

        // The server holds up to 6: the segment 5…8 spans it, so the store goes back to 4.
        let report = try f.store.rewind(toAgreedSeq: 6)
        #expect(report == RewindReport(agreedSeq: 6, rewoundTo: 4, dropped: 6, requeued: 3, refusedRequeued: 0))
        #expect(try f.store.segments().map(\.firstSeq) == [1])
        #expect(try f.store.snapshotSeqs().allSatisfy { $0 <= 4 })
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [4, 5, 6, 7], "own ops at seqs 5, 7 and 9, then the queued one")
        #expect(try f.store.verify().passed)
        #expect(try f.store.rebuild(fromGenesis: true).digest == (try f.store.digest()))
    }

    @Test func aStoreThatStartedFromASnapshotPastTheHeadStartsOverFromNothing() throws {
        let (device, server) = try Fixture.startedFromSnapshot(sourceSeed: 7, deviceSeed: 8)
        try device.save("https://e.com/mine", title: "Mine")
        try device.store.applyConfirmed([server.confirm(try #require(try device.store.pendingOps().first))])   // seq 7
        try device.save("https://e.com/queued", title: "Queued")

        let report = try device.store.rewind(toAgreedSeq: 3)
        #expect(report == RewindReport(agreedSeq: 3, rewoundTo: 0, dropped: 1, requeued: 1))
        #expect(try device.store.cursor() == 0 && device.store.historyBaseSeq() == 0)
        #expect(try device.store.snapshotSeqs().isEmpty)
        #expect(try device.store.pendingOps().map(\.deviceSeq) == [1, 2])
        #expect(try device.store.rows("article").count == 2, "only the queued ops show until the pull")
        #expect(try device.store.verify().passed)
    }
}
