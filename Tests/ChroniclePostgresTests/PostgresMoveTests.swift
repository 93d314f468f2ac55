import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import Foundation
import Testing
import ChronicleServerStore
import ChronicleTesting

/// A lone server's library file moved into PostgreSQL (`PostgresServerStore.importLibrary`, what
/// `chronicle server move-to-postgres` runs for each library): servers there go on from it as if
/// they had written it.
@Suite("A lone server's library moved into PostgreSQL", .serialized)
struct PostgresMoveTests {
    /// A file with history dropped past the horizon, sealed segments after it, a log after them, a
    /// refusal and a device's place goes in whole: the replicas made from PostgreSQL hold its state
    /// under its incarnation, repeats of its ops (dropped, sealed or logged) are answered with their
    /// seqs, its refusal is given again, and new pushes continue its seqs. A second import changes
    /// nothing; another history under the same id is refused with nothing written.
    @Test func aLibraryFileGoesInWholeAndServersGoOnFromIt() throws {
        let database = try TestDatabase()
        let library = UUID()
        let clock = ManualClock()
        let writer = try Writer(library: library, in: database.directory, seed: 41)
        let lone = try ServerLibrary.openOrCreate(at: database.directory + "/lone.sqlite", libraryID: library, schema: .readItLater, clock: clock)
        let old = try writer.write(400)
        _ = try PostgresSealingTests.push(old, to: lone, from: writer.deviceID)
        clock.advance(milliseconds: 3 * 86_400_000)
        let recent = try writer.write(400, salt: 1)
        _ = try PostgresSealingTests.push(recent, to: lone, from: writer.deviceID)
        let orphan = writer.orphan(after: recent.last!, id: UUID())
        guard case .rejected(let code, let message) = try lone.push([orphan], from: writer.deviceID).results[0].outcome else {
            Issue.record("the orphan was not refused")
            return
        }
        var policy = PostgresSealingTests.policy(segment: 100, keep: 150)
        policy.horizonMilliseconds = 86_400_000
        let report = try lone.compact(policy)
        #expect(report.historyDroppedThrough == 400)
        #expect(try lone.sealedThrough() == 600)
        #expect(try lone.historyBase() == 400)
        #expect(lone.localHead == 800)

        let a = try database.server("a", clock: clock)
        var progress: [(Int64, Int64)] = []
        let outcome = try a.importLibrary(lone) { done, total in progress.append((done, total)) }
        #expect(outcome == .copied(ops: 400, droppedOpIDs: 400))
        #expect(progress.first?.0 == 0 && progress.last?.0 == 400 && progress.allSatisfy { $0.1 == 400 })
        #expect(progress.map(\.0) == progress.map(\.0).sorted())
        #expect(try a.importLibrary(lone) == .alreadyThere)
        #expect(PostgresSealingTests.failed(try a.checks(of: library)).isEmpty)
        let pg = try database.connection()
        let row = try pg.execute("SELECT head, sealed_through, history_base, incarnation FROM chronicle_libraries")
        #expect(try row.int(0, 0) == 800 && row.int(0, 1) == 600 && row.int(0, 2) == 400)
        #expect(try row.string(0, 3) == lone.incarnation.lowercased)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_segments").int(0, 0) == 2)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 200)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_dropped_ops").int(0, 0) == 400)

        let onA = try a.library(library)
        #expect(onA.incarnation == lone.incarnation)
        #expect(onA.localHead == 800)
        #expect(try onA.historyBase() == 400)
        #expect(try onA.digest() == (try lone.digest()))
        // Repeats: an op past the horizon, one sealed, one logged, and the refused one.
        let repeats = try onA.push([old[7], recent[150], recent[350], orphan], from: writer.deviceID).results.map(\.outcome)
        #expect(repeats == [.duplicate(serverSeq: 8), .duplicate(serverSeq: 551), .duplicate(serverSeq: 751), .rejected(code: code, message: message)])
        // The device's place came along: a new op under a number already answered is refused whole.
        var reused = recent[399]
        reused.opID = UUID()
        #expect(throws: ProtocolError.self) { try onA.push([reused], from: writer.deviceID) }
        // Another device's pushes go on from the file's head, and a second server sees the same.
        let other = try Writer(library: library, in: database.directory, seed: 42)
        let results = try PostgresSealingTests.push(try other.write(50), to: onA, from: other.deviceID)
        #expect(results.compactMap { if case .accepted(let seq) = $0.outcome { seq } else { nil } } == Array(Int64(801)...850))
        let onB = try database.server("b", clock: clock).library(library)
        #expect(onB.localHead == 850)
        #expect(try onB.digest() == (try onA.digest()))

        // Another history under the same id: refused, nothing written.
        let stranger = try ServerLibrary.openOrCreate(at: database.directory + "/stranger.sqlite", libraryID: library, schema: .readItLater, clock: clock)
        let third = try Writer(library: library, in: database.directory, seed: 43)
        _ = try PostgresSealingTests.push(try third.write(10), to: stranger, from: third.deviceID)
        do {
            _ = try a.importLibrary(stranger)
            Issue.record("another history under the same id was taken")
        } catch let error as ChronicleError {
            #expect(error.code == .storeExists, "\(error)")
        }
        #expect(try pg.execute("SELECT head FROM chronicle_libraries").int(0, 0) == 850)
    }

    /// A file whose history was never compacted (all of it in the log), and an empty one.
    @Test func aLogOnlyLibraryAndAnEmptyOneGoIn() throws {
        let database = try TestDatabase()
        let (full, empty) = (UUID(), UUID())
        let writer = try Writer(library: full, in: database.directory, seed: 44)
        let lone = try ServerLibrary.openOrCreate(at: database.directory + "/full.sqlite", libraryID: full, schema: .readItLater)
        _ = try PostgresSealingTests.push(try writer.write(120), to: lone, from: writer.deviceID)
        let blank = try ServerLibrary.openOrCreate(at: database.directory + "/empty.sqlite", libraryID: empty, schema: .readItLater)
        let a = try database.server("a")
        #expect(try a.importLibrary(lone) == .copied(ops: 120, droppedOpIDs: 0))
        #expect(try a.importLibrary(blank) == .copied(ops: 0, droppedOpIDs: 0))
        for (id, file) in [(full, lone), (empty, blank)] {
            #expect(PostgresSealingTests.failed(try a.checks(of: id)).isEmpty)
            let replica = try database.server("b").library(id)
            #expect(replica.localHead == file.localHead)
            #expect(try replica.digest() == (try file.digest()))
        }
    }
}
