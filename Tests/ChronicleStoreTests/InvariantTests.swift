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
        #expect(rawError(f, "UPDATE chronicle_log SET payload = '{}'")?.contains("append-only") == true)
        #expect(rawError(f, "DELETE FROM chronicle_log")?.contains("append-only") == true)
        #expect(rawError(f, "INSERT INTO chronicle_log SELECT server_seq + 5, 'x', device_id, device_seq, type, version, entity_id, payload, device_time, base_seq, server_time FROM chronicle_log")?.contains("gap") == true)
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
