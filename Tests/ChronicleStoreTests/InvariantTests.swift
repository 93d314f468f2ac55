import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing

/// The store enforces its invariants itself; a buggy caller (or a person with
/// the sqlite3 shell) cannot break them.
@Suite struct InvariantTests {
    func rawError(_ f: Fixture, _ sql: String) -> String? {
        do {
            let db = try Database(path: f.path)
            try db.execute(sql)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func confirmedLogIsAppendOnly() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        try f.store.applyConfirmed([server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://e.com")])])
        #expect(rawError(f, "UPDATE chronicle_log_blocks SET body = x'00'")?.contains("append-only") == true)
        #expect(rawError(f, "DELETE FROM chronicle_log_blocks")?.contains("append-only") == true)
        #expect(rawError(f, "INSERT INTO chronicle_log_blocks SELECT first_seq + 5, last_seq + 5, newest_time, filter, body FROM chronicle_log_blocks")?.contains("gap") == true)
        #expect(rawError(f, "INSERT INTO chronicle_op_ids SELECT op_id, server_seq + 1 FROM chronicle_op_ids")?.contains("UNIQUE") == true)
        #expect(try f.store.confirmedOps().count == 1)
    }

    @Test func confirmedBatchMustContinueTheLogWithoutGapOrRepeat() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let first = server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://e.com")])
        _ = server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://e.com")])  // seq 2 never delivered
        let third = server.op("article.save", entity: UUID(), from: UUID(), payload: ["url": .text("https://e.com")])
        #expect(throws: ChronicleError.self) { try f.store.applyConfirmed([first, third]) }
        #expect(try f.store.cursor() == 0, "a refused batch lands not at all")
        try f.store.applyConfirmed([first])
        var again = first
        again.serverSeq = 2
        let error = #expect(throws: ChronicleError.self) { try f.store.applyConfirmed([again]) }
        #expect(error?.code == .duplicateOp)
        var foreign = third
        foreign.serverSeq = 2
        foreign.libraryID = UUID()
        #expect((#expect(throws: ChronicleError.self) { try f.store.applyConfirmed([foreign]) })?.code == .wrongLibrary)
    }

    @Test func outboxIsGapFreeAndOpsLeaveOnlyWhenConfirmed() throws {
        let f = try Fixture()
        try f.save()
        try f.save()
        #expect(rawError(f, "DELETE FROM chronicle_outbox WHERE device_seq = 1")?.contains("only when the confirmed log reaches it") == true)
        #expect(rawError(f, "INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq) VALUES (5, 'x', 't', 1, 'e', '{}', 0, 0)")?.contains("gap") == true)
        #expect(rawError(f, "UPDATE chronicle_outbox SET payload = '{}'")?.contains("immutable") == true)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [1, 2])
    }

    /// A store restored from an older copy numbers its queued ops again after the server's last
    /// deviceSeq for it: each op keeps its id, content and order; the numbers in between are
    /// recorded as given up, so `verify` still accounts for every one; the queue stays immutable.
    @Test func renumberingTheOutboxKeepsEveryOpAndTheInvariants() throws {
        let f = try Fixture()
        let server = ServerLog(library: f.store.libraryID)
        let confirmed = try f.store.write("article.save", payload: ["url": .text("https://e.com/1")])
        try f.store.applyConfirmed([server.confirm(confirmed)])
        let kept = try f.store.write("article.save", payload: ["url": .text("https://e.com/2")])   // the server holds it (2)
        let id = try f.save("https://e.com/3", title: "Written after the restore")
        try f.store.write("article.tag", entity: id, payload: ["tag": .text("later")])
        try f.store.write("article.progress", entity: id, payload: ["progress": .real(0.5)])
        let before = try f.store.pendingOps()
        #expect(before.map(\.deviceSeq) == [2, 3, 4, 5])
        let digest = try f.store.digest()

        // The server holds this device's ops up to 9 and refused 3 as a number used again.
        #expect(try f.store.renumberOutbox(from: 3, after: 9) == 3)
        let after = try f.store.pendingOps()
        #expect(after.map(\.deviceSeq) == [2, 10, 11, 12])
        #expect(after.map(\.opID) == before.map(\.opID))
        #expect(zip(after, before).allSatisfy { $0.payload == $1.payload && $0.type == $1.type && $0.entityID == $1.entityID })
        #expect(after.first?.opID == kept.opID)
        #expect(try f.store.digest() == digest, "the rows show the same queued edits")
        #expect(try f.store.verify().passed, "the numbers 3…9 are accounted for")
        #expect(try f.store.unacknowledgedOps(limit: 10).map(\.deviceSeq) == [2, 10, 11, 12])

        // The next write follows the renumbered ops; the queue is immutable again.
        #expect(try f.store.write("article.tag", entity: id, payload: ["tag": .text("next")]).deviceSeq == 13)
        #expect(rawError(f, "UPDATE chronicle_outbox SET device_seq = 40 WHERE device_seq = 13")?.contains("immutable") == true)
        #expect(rawError(f, "INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq) VALUES (20, 'x', 't', 1, 'e', '{}', 0, 0)")?.contains("gap") == true)

        // A refusal of a renumbered op is accounted for as before.
        #expect(try f.store.reject(after[2].opID, code: "invalid_value", message: "no", verdict: nil))
        #expect(try f.store.verify().passed)

        // Nothing queued from the reused number on: the next write follows the server's last.
        let g = try Fixture(seed: 2)
        try g.save()
        #expect(try g.store.renumberOutbox(from: 2, after: 6) == 0)
        #expect(try g.store.write("article.save", payload: ["url": .text("https://e.com/x")]).deviceSeq == 7)
        #expect(try g.store.verify().passed)

        // Numbers that cannot come from a server are refused, and change nothing.
        #expect((#expect(throws: ChronicleError.self) { try f.store.renumberOutbox(from: 5, after: 4) })?.code == .invalidValue)
        #expect(try f.store.pendingOps().map(\.deviceSeq) == [2, 10, 12, 13])
    }

    @Test func verifyPassesOnAHealthyStoreAndCatchesATamperedProjection() throws {
        let f = try Fixture()
        let id = try f.save(title: "Hello")
        try f.store.write("article.tag", entity: id, payload: ["tag": .text("t")])
        #expect(try f.store.verify().passed)
        let db = try Database(path: f.path)
        try db.execute("UPDATE article SET title = 'Tampered'")
        let report = try f.store.verify()
        #expect(!report.passed)
        #expect(report.checks.first { $0.name.hasPrefix("digest") }?.passed == false)
        try f.store.rebuild()
        #expect(try f.store.verify().passed, "a rebuild repairs a projection from the log")
        #expect(try f.field(id, "title") == .text("Hello"))
    }
}
