import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import Foundation
import Testing
import ChronicleServerStore
import ChronicleTesting

/// Sealed history kept in PostgreSQL (format 3): segments a server's replica sealed take the
/// place of their ops' log rows there, and replicas are made and caught up from them.
@Suite("PostgreSQL sealed segments", .serialized)
struct PostgresSealingTests {
    /// Keep 200 ops hot, seal whole segments of 250.
    static func policy(segment: Int = 250, keep: Int64 = 200) -> CompactionPolicy {
        var policy = CompactionPolicy()
        policy.keepOps = keep
        policy.segmentOpsMax = segment
        policy.wholeSegmentsOnly = true
        policy.givesSpaceBack = false
        return policy
    }

    static func push(_ ops: [Op], to library: ServerLibrary, from device: UUID) throws -> [PushResult] {
        var results: [PushResult] = []
        for start in stride(from: 0, to: ops.count, by: 100) {
            results += try library.push(Array(ops[start..<min(start + 100, ops.count)]), from: device).results
        }
        return results
    }

    static func failed(_ checks: [VerifyCheck]) -> [String] {
        checks.filter { !$0.passed }.map { "\($0.name): \($0.detail)" }
    }

    @Test func sealedSegmentsTakeThePlaceOfTheOldestLogRowsAndReplicasAreMadeFromThem() throws {
        let database = try TestDatabase()
        let library = UUID()
        let writer = try Writer(library: library, in: database.directory, seed: 31)
        let a = try database.server("a")
        let onA = try a.library(library)
        let first = try writer.write(600)
        let firstResults = try Self.push(first, to: onA, from: writer.deviceID)
        // Server c has caught up to 600 before anything is sealed: it later catches up across the seal.
        let onC = try database.server("c").library(library)
        #expect(onC.localHead == 600)
        _ = try Self.push(try writer.write(600, salt: 1), to: onA, from: writer.deviceID)

        let report = try onA.compact(Self.policy())
        #expect(report.opsSealed == 1_000)
        let pg = try database.connection()
        let key = library.lowercased
        #expect(try pg.execute("SELECT sealed_through FROM chronicle_libraries WHERE library_id = $1", [key]).int(0, 0) == 1_000)
        #expect(try pg.execute("SELECT count(*), min(server_seq) FROM chronicle_log WHERE library_id = $1", [key]).int(0, 0) == 200)
        #expect(try pg.execute("SELECT min(server_seq) FROM chronicle_log WHERE library_id = $1", [key]).int(0, 0) == 1_001)
        let segments = try pg.execute("SELECT first_seq, last_seq, length(frame) FROM chronicle_segments WHERE library_id = $1 ORDER BY first_seq", [key])
        #expect(try (0..<segments.count).map { try segments.int($0, 0) } == [1, 251, 501, 751])
        // Each row holds the replica's frame as it is: an LZ4 frame.
        let frame = try pg.execute("SELECT frame FROM chronicle_segments WHERE library_id = $1 AND first_seq = 1", [key]).bytes(0, 0)
        #expect(Array(frame.prefix(4)) == [0x04, 0x22, 0x4D, 0x18])
        #expect(try onA.sealedSegments(after: 0, limit: 1).first?.frame == frame)
        #expect(Self.failed(try a.checks(of: library)).isEmpty)
        #expect(a.renderMetrics().contains("chronicle_postgres_segments_sealed_total 4\n"))
        #expect(a.renderMetrics().contains("chronicle_postgres_ops_sealed_total 1000\n"))

        // c was at 600: it reads the segments after it (as log rows: its log holds ops past its sealed
        // prefix), then the log.
        let page = try onC.pull(after: 600, limit: 10_000)
        #expect(page.ops.map(\.opID) == (try onA.allOps()).suffix(600).map(\.opID))
        #expect(try onC.digest() == (try onA.digest()))

        // A server with no replica makes it from the segments, kept sealed as they came, and the log.
        let b = try database.server("b")
        let onB = try b.library(library)
        #expect(onB.localHead == 1_200)
        #expect(try onB.sealedThrough() == 1_000)
        #expect(try onB.sealedSegments(after: 0, limit: 10).map(\.firstSeq) == [1, 251, 501, 751])
        #expect(try onB.allOps() == (try onA.allOps()))
        #expect(try onB.digest() == (try onA.digest()))

        // A repeat of the first batch, sealed now, is answered as it was, through any server.
        let repeated = try onC.push(Array(first.prefix(100)), from: writer.deviceID).results
        #expect(repeated.map(\.outcome.serverSeq) == firstResults.prefix(100).map(\.outcome.serverSeq))
        #expect(repeated.allSatisfy { if case .duplicate = $0.outcome { true } else { false } })

        // b seals the next segment after more pushes; a and c catch up across it.
        _ = try Self.push(try writer.write(300, salt: 2), to: onB, from: writer.deviceID)
        // What b sealed itself is handed over; what it was given is not handed back.
        #expect(try onB.compact(Self.policy()).opsSealed == 250)
        #expect(try pg.execute("SELECT sealed_through FROM chronicle_libraries WHERE library_id = $1", [key]).int(0, 0) == 1_250)
        #expect(b.renderMetrics().contains("chronicle_postgres_segments_sealed_total 1\n"))
        // a, caught up, seals the same segment on its replica: PostgreSQL has it already, nothing changes.
        try onA.catchUp()
        #expect(try onA.compact(Self.policy()).opsSealed == 250)
        #expect(a.renderMetrics().contains("chronicle_postgres_segments_sealed_total 4\n"))
        #expect(try onA.digest() == (try onB.digest()))
        try onC.catchUp()
        #expect(onC.localHead == 1_500)
        #expect(try onC.digest() == (try onB.digest()))
        #expect(Self.failed(try b.checks(of: library)).isEmpty)
    }

    /// A replica whose segments end elsewhere than PostgreSQL's has PostgreSQL seal its own rows
    /// up to where the replica has sealed; PostgreSQL's guards keep the log whole and the segments
    /// as they are; a segment that does not hold what the log holds is refused.
    @Test func segmentsThatDoNotLineUpAreSealedFromTheLogAndTheGuardsHold() throws {
        let database = try TestDatabase()
        let library = UUID()
        let writer = try Writer(library: library, in: database.directory, seed: 32)
        let d = try database.server("d")
        let onD = try d.library(library)
        _ = try Self.push(try writer.write(500), to: onD, from: writer.deviceID)
        let e = try database.server("e")
        let onE = try e.library(library)
        #expect(try onD.compact(Self.policy(segment: 300, keep: 0)).opsSealed == 300)
        // e seals 1…200 and 201…400: PostgreSQL, sealed through 300, seals 301…400 from its own rows.
        #expect(try onE.compact(Self.policy(segment: 200, keep: 0)).opsSealed == 400)
        let pg = try database.connection()
        let key = library.lowercased
        #expect(try pg.execute("SELECT sealed_through FROM chronicle_libraries WHERE library_id = $1", [key]).int(0, 0) == 400)
        let segments = try pg.execute("SELECT first_seq, last_seq FROM chronicle_segments ORDER BY first_seq")
        #expect(try (0..<segments.count).map { "\(try segments.int($0, 0))…\(try segments.int($0, 1))" } == ["1…300", "301…400"])
        #expect(e.renderMetrics().contains("chronicle_postgres_segments_sealed_total 1\n"))
        #expect(Self.failed(try e.checks(of: library)).isEmpty)
        #expect(try database.server("g").library(library).allOps() == (try onD.allOps()))

        // An op no segment holds cannot leave the log; a segment is never changed or removed; one
        // that leaves a gap, or is not chained to the last, is refused.
        #expect(throws: PostgresError.self) { try pg.execute("DELETE FROM chronicle_log WHERE server_seq = 401") }
        #expect(throws: PostgresError.self) { try pg.execute("UPDATE chronicle_segments SET digest = 'x'") }
        #expect(throws: PostgresError.self) { try pg.execute("DELETE FROM chronicle_segments") }
        let digest = try pg.execute("SELECT sealed_digest FROM chronicle_libraries").string(0, 0)
        for (first, previous) in [(402, digest), (401, "not the last digest")] {
            #expect(throws: PostgresError.self) {
                try pg.execute("""
                    INSERT INTO chronicle_segments(library_id, first_seq, last_seq, op_count, frame, digest, previous_digest, body_bytes, created_at)
                    VALUES ($1, $2, 410, $3, '\\x00', 'd', $4, 1, 0)
                    """, [key, String(first), String(411 - first), previous])
            }
        }
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 100)

        // A segment that does not hold what the log holds is refused with nothing changed: here the
        // log's op at 401 is altered behind the guard, so f's segment 401…500 (f's replica was made
        // from PostgreSQL's segments and log before) no longer matches it.
        let f = try database.server("f")
        let onF = try f.library(library)
        #expect(try onF.sealedThrough() == 400)
        try pg.execute("ALTER TABLE chronicle_log DISABLE TRIGGER USER")
        try pg.execute("UPDATE chronicle_log SET payload = '{\"tag\":\"altered\"}' WHERE server_seq = 401")
        try pg.execute("ALTER TABLE chronicle_log ENABLE TRIGGER USER")
        #expect(throws: ChronicleError.self) { try onF.compact(Self.policy(segment: 100, keep: 0)) }
        #expect(try pg.execute("SELECT sealed_through FROM chronicle_libraries WHERE library_id = $1", [key]).int(0, 0) == 400)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 100)
    }

    /// Sealing takes a lock of its own, not the library's row: a push through another server goes
    /// on while a segment's rows are leaving the log (here the sealer's transaction is held just
    /// after its DELETE, by a trigger that waits for a lock the test holds), and the seal lands
    /// once let go, with both replicas whole.
    @Test func pushesGoOnWhileASegmentIsSealed() throws {
        let database = try TestDatabase()
        let library = UUID()
        let writer = try Writer(library: library, in: database.directory, seed: 37)
        let a = try database.server("a")
        let onA = try a.library(library)
        _ = try Self.push(try writer.write(600), to: onA, from: writer.deviceID)
        let onB = try database.server("b").library(library)
        #expect(onB.localHead == 600)
        let second = try writer.write(100, salt: 1)

        let pg = try database.connection()
        let gate = 0x7E57
        try pg.execute("""
            CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_advisory_lock(\(gate)); PERFORM pg_advisory_unlock(\(gate)); RETURN NULL; END $$
            """)
        try pg.execute("CREATE TRIGGER test_pause AFTER DELETE ON chronicle_log FOR EACH STATEMENT EXECUTE FUNCTION test_pause()")
        let holder = try database.connection()
        try holder.execute("SELECT pg_advisory_lock(\(gate))")
        var held = true
        defer { if held { _ = try? holder.execute("SELECT pg_advisory_unlock(\(gate))") } }

        let sealing = Locked<Swift.Result<CompactionReport, any Error>?>(nil)
        let sealer = Thread { let result = Swift.Result { try onA.compact(Self.policy()) }; sealing.withLock { $0 = result } }
        sealer.start()
        // Until the sealer waits at the pause: its segment is in, its rows deleted, nothing committed.
        let deadline = Date().addingTimeInterval(60)
        while try pg.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = \(gate)").int(0, 0) == 0 {
            guard Date() < deadline, sealing.withLock({ $0 == nil }) else {
                Issue.record("the sealer did not reach the pause: \(String(describing: sealing.withLock { $0 }))")
                return
            }
            usleep(10_000)
        }
        // A push holding the library's row lock would wait here for the seal's commit (until the
        // statement timeout): it is answered while the seal is still open.
        let results = try onB.push(second, from: writer.deviceID).results
        #expect(results.count == 100 && results.allSatisfy { if case .accepted = $0.outcome { true } else { false } })
        #expect(sealing.withLock { $0 == nil })
        #expect(try pg.execute("SELECT sealed_through, head FROM chronicle_libraries").int(0, 0) == 0)

        try holder.execute("SELECT pg_advisory_unlock(\(gate))")
        held = false
        while sealing.withLock({ $0 == nil }) { usleep(10_000) }
        let report = try sealing.withLock { $0! }.get()
        #expect(report.opsSealed == 250)
        let row = try pg.execute("SELECT sealed_through, head FROM chronicle_libraries")
        #expect(try row.int(0, 0) == 250 && row.int(0, 1) == 700)
        #expect(try pg.execute("SELECT count(*), min(server_seq) FROM chronicle_log").int(0, 0) == 450)
        try onA.catchUp()
        #expect(onA.localHead == 700)
        #expect(try onA.digest() == (try onB.digest()))
        #expect(Self.failed(try a.checks(of: library)).isEmpty)
    }

    /// History past the retention horizon leaves PostgreSQL too, behind the snapshot there, with its
    /// op ids kept; replicas made afterwards start from that snapshot, and devices whose cursor is
    /// older are told to start from it (410).
    @Test func historyPastTheHorizonIsDroppedBehindASnapshotAndReplicasStartThere() throws {
        let database = try TestDatabase()
        let library = UUID()
        let clock = ManualClock()
        let writer = try Writer(library: library, in: database.directory, seed: 34)
        let a = try database.server("a", clock: clock)
        let onA = try a.library(library)
        let old = try writer.write(600)
        let oldResults = try Self.push(old, to: onA, from: writer.deviceID)
        do {
            // A server whose replica stops at 300, and is opened again only after history was dropped.
            _ = try database.server("d", clock: clock).library(library)
        }
        clock.advance(milliseconds: 3 * 86_400_000)
        _ = try Self.push(try writer.write(300, salt: 1), to: onA, from: writer.deviceID)
        let onC = try database.server("c", clock: clock).library(library)   // at the head: it goes on across the drop

        var policy = Self.policy(segment: 100, keep: 100)
        policy.horizonMilliseconds = 86_400_000
        let report = try onA.compact(policy)
        #expect(report.opsSealed == 800 && report.historyDroppedThrough == 600)
        let pg = try database.connection()
        let key = library.lowercased
        let row = try pg.execute("SELECT sealed_through, history_base, history_dropped_at IS NOT NULL FROM chronicle_libraries WHERE library_id = $1", [key])
        #expect(try row.int(0, 0) == 800 && row.int(0, 1) == 600 && row.text(0, 2) == "t", "\(row.text(0, 0) ?? "") \(row.text(0, 1) ?? "") \(report)")
        #expect(try pg.execute("SELECT min(first_seq), count(*) FROM chronicle_segments").int(0, 0) == 601)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_segments").int(0, 0) == 2)
        #expect(try pg.execute("SELECT count(*), min(server_seq), max(server_seq) FROM chronicle_dropped_ops").int(0, 0) == 600)
        #expect(try pg.execute("SELECT seq FROM chronicle_snapshots").int(0, 0) == 600)
        let checks = try a.checks(of: library)
        #expect(Self.failed(checks).isEmpty)
        #expect(checks.contains { $0.detail.contains("history begins after seq 600") })
        #expect(a.renderMetrics().contains("chronicle_postgres_ops_dropped_total 600\n"))

        // A new replica starts from the snapshot, with the ids of the ops before it.
        let b = try database.server("b", clock: clock)
        let onB = try b.library(library)
        #expect(onB.localHead == 900)
        #expect(try onB.historyBase() == 600)
        #expect(try onB.digest() == (try onA.digest()))
        #expect(try onB.allOps() == (try onA.allOps()))
        do {
            _ = try onB.pull(after: 10, limit: 100)
            Issue.record("a cursor before the horizon must be told to start from the snapshot")
        } catch let error as ProtocolError {
            #expect(error.status == 410 && error.code == .cursorTooOld)
        }
        let repeated = try onB.push(Array(old.prefix(100)), from: writer.deviceID).results
        #expect(repeated.map(\.outcome) == oldResults.prefix(100).map { PushOutcome.duplicate(serverSeq: $0.outcome.serverSeq!) })
        // The replica that stopped at 300 is made anew from the snapshot; the one at the head goes on.
        let onD = try database.server("d", clock: clock).library(library)
        #expect(onD.localHead == 900)
        #expect(try onD.digest() == (try onA.digest()))
        _ = try Self.push(try writer.write(10, salt: 2), to: onC, from: writer.deviceID)
        #expect(try onB.pull(after: 900, limit: 100).ops.count == 10)
        #expect(try onC.digest() == (try onB.digest()))

        // The snapshot history begins at, and the ids kept, cannot be taken away; history_base moves
        // only forward, and only to a snapshot.
        #expect(throws: PostgresError.self) { try pg.execute("DELETE FROM chronicle_snapshots") }
        #expect(throws: PostgresError.self) { try pg.execute("DELETE FROM chronicle_dropped_ops WHERE server_seq = 1") }
        #expect(throws: PostgresError.self) { try pg.execute("UPDATE chronicle_libraries SET history_base = 500") }
        #expect(throws: PostgresError.self) { try pg.execute("UPDATE chronicle_libraries SET history_base = 700") }
        #expect(Self.failed(try b.checks(of: library)).isEmpty)
    }

    /// A replica that dropped every segment it sealed (all of them past the horizon) before any
    /// reached PostgreSQL: PostgreSQL seals its own rows up to there, and drops them too.
    @Test func historyDroppedWholeOnTheReplicaIsDroppedInPostgreSQL() throws {
        let database = try TestDatabase()
        let library = UUID()
        let clock = ManualClock()
        let writer = try Writer(library: library, in: database.directory, seed: 35)
        let a = try database.server("a", clock: clock)
        let onA = try a.library(library)
        _ = try Self.push(try writer.write(450), to: onA, from: writer.deviceID)
        clock.advance(milliseconds: 3 * 86_400_000)
        _ = try Self.push(try writer.write(50, salt: 1), to: onA, from: writer.deviceID)
        var policy = Self.policy(segment: 150, keep: 50)
        policy.horizonMilliseconds = 86_400_000
        let report = try onA.compact(policy)
        #expect(report.opsSealed == 450 && report.historyDroppedThrough == 450)
        #expect(try onA.sealedSegments(after: 0, limit: 10).isEmpty)
        let pg = try database.connection()
        let row = try pg.execute("SELECT sealed_through, history_base FROM chronicle_libraries")
        #expect(try row.int(0, 0) == 450 && row.int(0, 1) == 450)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_segments").int(0, 0) == 0)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 50)
        #expect(Self.failed(try a.checks(of: library)).isEmpty)
        let onB = try database.server("b", clock: clock).library(library)
        #expect(onB.localHead == 500)
        #expect(try onB.digest() == (try onA.digest()))
    }

    /// A replica left open and unused on one server while another dropped history past the
    /// horizon beyond its head cannot catch up: its request is answered 503 with a Retry-After,
    /// and the server makes it anew from the snapshot once nothing holds it.
    @Test func aReplicaLeftBehindTheHorizonIsMadeAnew() async throws {
        let database = try TestDatabase()
        let library = UUID()
        let clock = ManualClock()
        let writer = try Writer(library: library, in: database.directory, seed: 36)
        let accounts = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo, listening: false))
        _ = try accounts.addUser("ada", password: "correct horse battery staple", schema: .readItLater, libraryID: library)
        let token = try accounts.registerDevice(user: "ada", password: "correct horse battery staple", deviceID: UUID()).token
        let onA = try database.server("a", clock: clock).library(library)
        _ = try Self.push(try writer.write(300), to: onA, from: writer.deviceID)
        let service = try SyncService(dataDirectory: database.directory + "/service", maintenance: .off, clock: clock,
                                      shared: try database.server("s", clock: clock), accounts: accounts)
        #expect(try await service.pull(library: library, after: 0, limit: 1_000, waitMilliseconds: 0, token: token).head == 300)

        _ = try Self.push(try writer.write(300, salt: 1), to: onA, from: writer.deviceID)
        clock.advance(milliseconds: 3 * 86_400_000)
        _ = try Self.push(try writer.write(300, salt: 2), to: onA, from: writer.deviceID)
        var policy = Self.policy(segment: 100, keep: 100)
        policy.horizonMilliseconds = 86_400_000
        #expect(try onA.compact(policy).historyDroppedThrough == 600)

        do {
            _ = try await service.pull(library: library, after: 300, limit: 1_000, waitMilliseconds: 0, token: token)
            Issue.record("a replica behind the horizon cannot answer")
        } catch {
            #expect(error.status == 503 && error.code == .replicaBehindHorizon && error.retryAfterSeconds == 1, "\(error)")
        }
        let page = try await service.pull(library: library, after: 600, limit: 1_000, waitMilliseconds: 0, token: token)
        #expect(page.head == 900 && page.segment.ops.first?.serverSeq == 601)
        #expect(try service.library(library).historyBase() == 600)
        #expect(try service.library(library).digest() == (try onA.digest()))
    }

    /// A format-2 database (no sealed segments) gains them, and blobs, when this build opens it,
    /// with its libraries whole, and they seal from then on.
    @Test func aFormat2DatabaseIsUpgradedInPlace() throws {
        let database = try TestDatabase()
        let library = UUID()
        let writer = try Writer(library: library, in: database.directory, seed: 33)
        let digest: String
        do {
            let onA = try database.server("a").library(library)
            _ = try Self.push(try writer.write(300), to: onA, from: writer.deviceID)
            digest = try onA.digest()
        }
        // Back to format 2, as a v2 build left it.
        let pg = try database.connection()
        for statement in [
            "DROP TABLE chronicle_segments, chronicle_snapshots, chronicle_dropped_ops, chronicle_blob_chunks, chronicle_blobs",
            "DROP FUNCTION chronicle_segments_follow()",
            "DROP FUNCTION chronicle_history_kept()",
            "DROP TRIGGER chronicle_history_base ON chronicle_libraries",
            "DROP FUNCTION chronicle_history_base()",
            "ALTER TABLE chronicle_libraries DROP COLUMN sealed_through, DROP COLUMN sealed_digest, DROP COLUMN history_base, DROP COLUMN history_dropped_at",
            "DROP TRIGGER chronicle_log_kept ON chronicle_log",
            "DROP TRIGGER chronicle_log_unchanged ON chronicle_log",
            "DROP FUNCTION chronicle_log_leaves()",
            "CREATE TRIGGER chronicle_log_kept BEFORE UPDATE OR DELETE ON chronicle_log FOR EACH ROW EXECUTE FUNCTION chronicle_kept('a confirmed op')",
            "UPDATE chronicle_meta SET value = '2' WHERE key = 'format_version'",
        ] { try pg.execute(statement) }

        let b = try database.server("b")
        #expect(try pg.execute("SELECT value FROM chronicle_meta WHERE key = 'format_version'").text(0, 0) == "4")
        #expect(try pg.execute("SELECT to_regclass('chronicle_blob_chunks') IS NOT NULL").text(0, 0) == "t", "and blobs (format 4)")
        let onB = try b.library(library)
        #expect(try onB.digest() == digest)
        #expect(try onB.compact(Self.policy(segment: 100, keep: 50)).opsSealed == 200)
        #expect(try pg.execute("SELECT sealed_through FROM chronicle_libraries").int(0, 0) == 200)
        #expect(Self.failed(try b.checks(of: library)).isEmpty)
        #expect(try database.server("c").library(library).digest() == digest)
    }
}
