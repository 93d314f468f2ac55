import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing

/// Field-service job notes are merge-or-ask: two technicians edit them offline; both
/// reconnect; the later push wins on every device, the replaced notes are kept as a
/// conflict, sync never blocks, and one technician's choice settles it everywhere.
@Suite struct MergeOrAskSyncTests {
    @Test(arguments: TransportKind.allCases)
    func concurrentNotesEditsBecomeAConflictThatOneDeviceSettles(kind: TransportKind) async throws {
        let h = try SyncHarness(kind, schema: .fieldService)
        let a = try h.device("A")
        let b = try h.device("B")
        let job = try a.store.write("job.create", payload: ["title": .text("Boiler service"), "notes": .text("Bring the manual")]).entityID
        await a.sync()
        await b.sync()

        // Both offline: each writes notes without seeing the other's.
        try a.store.write("job.update", entity: job, payload: ["notes": .text("A: replaced the valve")])
        try b.store.write("job.update", entity: job, payload: ["notes": .text("B: pump is noisy")])
        await a.sync()
        #expect(try b.store.row(job)?["notes"] == .text("B: pump is noisy"), "B sees its own edit while it waits")
        await b.sync()
        await a.sync()

        for device in [a, b] {
            #expect(try device.store.row(job)?["notes"] == .text("B: pump is noisy"), "server order decides: B pushed last")
            let open = try device.store.conflicts()
            #expect(open.count == 1)
            #expect(open.first?.replaced == .text("A: replaced the valve"))
        }
        try h.expectConverged()

        // A settles it; once the server orders that edit, the conflict is settled everywhere.
        try a.store.resolve(try a.store.conflicts()[0], with: .text("A: replaced the valve. B: pump is noisy."))
        await a.sync()
        await b.sync()
        for device in [a, b] {
            #expect(try device.store.conflicts().isEmpty)
            #expect(try device.store.row(job)?["notes"] == .text("A: replaced the valve. B: pump is noisy."))
        }
        try h.expectConverged()
    }
}
