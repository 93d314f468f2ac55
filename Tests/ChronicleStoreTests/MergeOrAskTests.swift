import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// `mergeOrAsk` (field-service job notes): sequential edits act as lww; a concurrent
/// edit wins by server order and the value it replaced is kept as a conflict record,
/// which a later sequential edit settles. Decided from the log alone, so every replay agrees.
@Suite struct MergeOrAskTests {
    let phone = UUID(), tablet = UUID()

    @Test func concurrentEditsKeepTheReplacedValueAndASequentialEditSettlesIt() throws {
        let f = try Fixture(schema: .fieldService)
        let server = ServerLog(library: f.store.libraryID)
        let job = UUID()
        var batch = [server.op("job.create", entity: job, from: phone, payload: ["title": .text("Fix the boiler"), "notes": .text("start")])]
        // Both devices saw seq 1; the phone's edit lands first, the tablet's second: concurrent.
        var phoneEdit = server.op("job.update", entity: job, from: phone, payload: ["notes": .text("phone: valve replaced")])
        phoneEdit.baseSeq = 1
        var tabletEdit = server.op("job.update", entity: job, from: tablet, payload: ["notes": .text("tablet: needs a new pump")])
        tabletEdit.baseSeq = 1
        batch += [phoneEdit, tabletEdit]
        try f.store.applyConfirmed(batch)

        #expect(try f.field(job, "notes") == .text("tablet: needs a new pump"), "the later op in server order wins")
        let open = try f.store.conflicts()
        #expect(open.count == 1)
        #expect(open.first?.replaced == .text("phone: valve replaced") && open.first?.kept == .text("tablet: needs a new pump"))
        #expect(open.first?.replacedSeq == 2 && open.first?.winningSeq == 3)

        // The same device editing twice before it synced is sequential, not a conflict.
        var again = server.op("job.update", entity: job, from: tablet, payload: ["notes": .text("tablet: pump ordered")])
        again.baseSeq = 1
        try f.store.applyConfirmed([again])
        #expect(try f.store.conflicts().count == 1)

        // A device that has seen seq 4 edits: sequential; it settles the open conflict.
        var settle = server.op("job.update", entity: job, from: phone, payload: ["notes": .text("merged: valve replaced, pump ordered")])
        settle.baseSeq = 4
        try f.store.applyConfirmed([settle])
        #expect(try f.store.conflicts().isEmpty)
        #expect(try f.store.conflicts(includeResolved: true).first?.resolvedSeq == 5)
        #expect(try f.store.verify().passed, "a replay from the log gives the same conflicts")

        let audit = try f.store.audit(job)
        let tabletEffect = audit.entries.first { $0.op.opID == tabletEdit.opID }?.effects.first { $0.field == "notes" }
        #expect(tabletEffect?.detail.contains("merge-or-ask: concurrent with seq 2") == true, "\(tabletEffect?.detail ?? "")")
    }

    @Test func aPendingLocalEditShowsUntilTheServerDecides() throws {
        let f = try Fixture(schema: .fieldService)
        let server = ServerLog(library: f.store.libraryID)
        let job = UUID()
        try f.store.applyConfirmed([server.op("job.create", entity: job, from: phone, payload: ["title": .text("Roof"), "notes": .text("start")])])
        try f.store.write("job.update", entity: job, payload: ["notes": .text("mine, offline")])
        var other = server.op("job.update", entity: job, from: tablet, payload: ["notes": .text("theirs")])
        other.baseSeq = 1
        try f.store.applyConfirmed([other])
        #expect(try f.field(job, "notes") == .text("mine, offline"), "the pending edit stays on top")
        #expect(try f.store.conflicts().isEmpty, "no conflict until the server orders the pending edit")
        // The server orders it after the tablet's: concurrent (its baseSeq is 1), so it wins and keeps "theirs".
        try f.store.applyConfirmed([server.confirm(try f.store.pendingOps()[0])])
        #expect(try f.field(job, "notes") == .text("mine, offline"))
        #expect(try f.store.conflicts().map(\.replaced) == [.text("theirs")])
        try f.store.resolve(try f.store.conflicts()[0], with: .text("mine and theirs"))
        try f.store.applyConfirmed([server.confirm(try f.store.pendingOps()[0])])
        #expect(try f.store.conflicts().isEmpty)
        #expect(try f.store.verify().passed)
    }
}
