import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import Foundation
import Testing
import ChronicleServerStore
import ChronicleTesting

/// The server's order kept in a real PostgreSQL server (started by the test script), shared by
/// several server processes, each with its replica.
@Suite("PostgreSQL server store", .serialized)
struct PostgresLibraryTests {
    @Test func pushesGetTheAnswersAServerWithItsOwnFileGives() throws {
        let database = try TestDatabase()
        let library = UUID()
        let clock = ManualClock()
        let server = try database.server("a", clock: clock)
        let shared = try server.library(library)
        let own = try ServerLibrary.openOrCreate(at: database.directory + "/own.sqlite", libraryID: library, schema: .readItLater, clock: clock)

        let a = try Writer(library: library, in: database.directory, seed: 1)
        let b = try Writer(library: library, in: database.directory, seed: 2)
        var batches: [(UUID, [Op])] = [(a.deviceID, try a.write(40)), (b.deviceID, try b.write(25, salt: 1)), (a.deviceID, try a.write(13, salt: 2))]
        // A repeat of a batch already answered, and a refused op with one accepted behind it.
        batches.append(batches[1])
        let more = try b.write(1, salt: 3)
        var refused = b.orphan(after: more[0], id: UUID())
        refused.deviceSeq = more[0].deviceSeq
        var behind = more[0]
        behind.deviceSeq += 1
        batches.append((b.deviceID, [refused, behind]))

        for (device, ops) in batches {
            let expected = try own.push(ops, from: device)
            let got = try shared.push(ops, from: device)
            #expect(got == expected)
        }
        let answers = try shared.push(batches[4].1, from: b.deviceID).results.map(\.outcome)
        guard case .rejected(let code, _) = answers[0], case .duplicate = answers[1] else {
            Issue.record("a repeat of the refused op and the one behind it: \(answers)")
            return
        }
        #expect(code == "unknown_entity" || !code.isEmpty)
        #expect(try shared.digest() == (try own.digest()))
        #expect(try server.head(library) == own.head)

        // What PostgreSQL holds is the log, op for op.
        let pg = try database.connection()
        let rows = try pg.execute("SELECT server_seq, op_id FROM chronicle_log WHERE library_id = $1 ORDER BY server_seq", [library.lowercased])
        let ops = try own.allOps()
        #expect(rows.count == ops.count)
        for (index, op) in ops.enumerated() {
            #expect(try rows.int(index, 0) == op.serverSeq! && rows.text(index, 1) == op.opID.lowercased)
        }
        #expect(try pg.execute("SELECT count(*) FROM chronicle_rejected_ops").int(0, 0) == 1)
    }

    @Test func twoServersSharingTheDatabaseGiveOneOrderWithoutGaps() throws {
        let database = try TestDatabase()
        let library = UUID()
        let servers = [try database.server("a"), try database.server("b")]
        let writers = try (0..<6).map { try Writer(library: library, in: database.directory, seed: UInt64(10 + $0)) }
        let batches = try writers.map { writer in try (0..<5).map { round in try writer.write(20, salt: round) } }
        let devices = writers.map(\.deviceID)
        let answers = Locked<[UUID: [PushResult]]>([:])
        let failures = Locked<[String]>([])
        // Each device pushes its batches in order, alternating servers; devices run at once.
        // One replica per server, as a server keeps it.
        let replicas = try servers.map { try $0.library(library) }
        DispatchQueue.concurrentPerform(iterations: devices.count) { index in
            do {
                for (round, batch) in batches[index].enumerated() {
                    let library = replicas[(index + round) % 2]
                    let response = try library.push(batch, from: devices[index])
                    answers.withLock { $0[devices[index], default: []] += response.results }
                }
            } catch {
                failures.withLock { $0.append("device \(index): \(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        let total = writers.count * 5 * 20
        var seqs: [Int64] = []
        for results in answers.withLock({ $0 }).values {
            for result in results {
                guard case .accepted(let seq) = result.outcome else { Issue.record("not accepted: \(result)"); continue }
                seqs.append(seq)
            }
        }
        #expect(seqs.sorted() == (1...Int64(total)).map { $0 }, "every op accepted once, under one gap-free order")

        // Both replicas, caught up, hold the same log and state.
        let (first, second) = (replicas[0], replicas[1])
        try first.catchUp()
        try second.catchUp()
        let log = try first.allOps()
        #expect(log.count == total)
        #expect(log.map(\.opID) == (try second.allOps()).map(\.opID))
        #expect(try first.digest() == (try second.digest()))
        for writer in writers {
            let own = log.filter { $0.deviceID == writer.deviceID }.map(\.deviceSeq)
            #expect(own == own.sorted(), "a device's ops in the order it wrote them")
        }

        // A repeat through the other server is answered with the original serverSeqs, and nothing is added.
        let repeated = try second.push(batches[0][0], from: writers[0].deviceID)
        let original = answers.withLock { $0[writers[0].deviceID]! }.prefix(20)
        #expect(repeated.results.map(\.outcome) == original.map {
            guard case .accepted(let seq) = $0.outcome else { return $0.outcome }
            return .duplicate(serverSeq: seq)
        })
        #expect(try servers[0].head(library) == Int64(total))
    }

    @Test func aRefusalIsRepeatedByTheOtherServer() throws {
        let database = try TestDatabase()
        let library = UUID()
        let (a, b) = (try database.server("a"), try database.server("b"))
        let writer = try Writer(library: library, in: database.directory, seed: 3)
        let ops = try writer.write(3)
        let orphan = writer.orphan(after: ops[2], id: UUID())
        let onB = try b.library(library)
        let first = try a.library(library).push(ops + [orphan], from: writer.deviceID)
        guard case .rejected(let code, let message) = first.results[3].outcome else {
            Issue.record("the orphan was not refused: \(first.results[3])")
            return
        }
        let again = try onB.push([orphan], from: writer.deviceID)
        #expect(again.results.map(\.outcome) == [.rejected(code: code, message: message)])
        // The other server's replica learned the device's sequence: a new op under a number already
        // answered is refused whole there too.
        var reused = ops[2]
        reused.opID = UUID()
        #expect(throws: ProtocolError.self) { try onB.push([reused], from: writer.deviceID) }
    }

    @Test func aReplicaIsMadeAnewFromTheLogWhenMissingOrFromAnotherHistory() throws {
        let database = try TestDatabase()
        let library = UUID()
        let writer = try Writer(library: library, in: database.directory, seed: 4)
        var digest = ""
        do {
            let replica = try database.server("a").library(library)
            _ = try replica.push(try writer.write(30), from: writer.deviceID)
            digest = try replica.digest()
        }
        // A new process with the same directory reuses its replica; one with none makes it from the log.
        let again = try database.server("a").library(library)
        #expect(try again.digest() == digest && again.localHead == 30)
        let fresh = try database.server("c").library(library)
        #expect(try fresh.digest() == digest && fresh.localHead == 30)

        // A replica from another history (here: another library's file under this one's name, ahead of
        // PostgreSQL) is not trusted: it is made anew.
        let other = try TestDatabase()
        let elsewhere = try other.server("x").library(library)
        let stranger = try Writer(library: library, in: other.directory, seed: 40)
        _ = try elsewhere.push(try stranger.write(50, salt: 9), from: stranger.deviceID)
        try FileManager.default.createDirectory(atPath: database.directory + "/d", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: elsewhere.path, toPath: database.directory + "/d/\(library.lowercased).sqlite")
        let remade = try database.server("d").library(library)
        #expect(remade.localHead == 30)
        #expect(try remade.digest() == digest)
        #expect(remade.incarnation == again.incarnation)
    }

    /// A database that stalls (here: another server's transaction holding the library's row lock
    /// and never ending) holds a push no longer than the statement timeout: 503 with a Retry-After,
    /// nothing written, and the same push goes in once the lock is let go.
    @Test func aPushStuckOnALockIsAnswered503AtTheStatementTimeout() throws {
        let database = try TestDatabase()
        let library = UUID()
        let server = try PostgresServerStore(conninfo: database.conninfo, cacheDirectory: database.directory + "/a", schema: .readItLater,
                                             poolSize: 2, statementTimeoutMilliseconds: 300)
        let shared = try server.library(library)
        let writer = try Writer(library: library, in: database.directory, seed: 9)
        let batch = try writer.write(4)
        let holder = try database.connection()
        try holder.execute("BEGIN")
        try holder.execute("SELECT 1 FROM chronicle_libraries WHERE library_id = $1 FOR UPDATE", [library.lowercased])
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            _ = try shared.push(batch, from: writer.deviceID)
            Issue.record("a push waiting on a held lock was answered")
        } catch {
            #expect(error.status == 503 && error.code == ProtocolError.Code.serverStoreUnavailable && error.retryAfterSeconds != nil, "\(error)")
        }
        let waited = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        #expect(waited < 10, "held \(waited) s")
        try holder.execute("ROLLBACK")
        #expect(try holder.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 0, "nothing was written")
        let response = try shared.push(batch, from: writer.deviceID)
        #expect(response.results.allSatisfy { if case .accepted = $0.outcome { true } else { false } })
        #expect(response.head == 4)
    }

    @Test func aServerThatLostItsConnectionAnswers503AndThenRecovers() throws {
        let database = try TestDatabase()
        let library = UUID()
        let server = try database.server("a")
        let shared = try server.library(library)
        let writer = try Writer(library: library, in: database.directory, seed: 5)
        _ = try shared.push(try writer.write(4), from: writer.deviceID)
        // Every connection the server holds is ended from outside, as a restart of PostgreSQL would.
        let admin = try database.connection()
        try admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        let batch = try writer.write(4, salt: 1)
        do {
            _ = try shared.push(batch, from: writer.deviceID)
            Issue.record("a push over a lost connection was answered")
        } catch {
            #expect(error.status == 503 && error.code == ProtocolError.Code.serverStoreUnavailable, "\(error)")
            #expect(error.retryAfterSeconds != nil)
        }
        #expect(try admin.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 4, "nothing was written")
        let response = try shared.push(batch, from: writer.deviceID)
        #expect(response.results.allSatisfy { if case .accepted = $0.outcome { true } else { false } })
        #expect(response.head == 8)
        // A read over a lost connection is a 503 too (never a 500), and the next one is answered.
        try admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        #expect {
            _ = try shared.pull(after: 0, limit: 100)
        } throws: { error in
            (error as? ProtocolError).map { $0.status == 503 && $0.code == ProtocolError.Code.serverStoreUnavailable } ?? false
        }
        #expect(try shared.pull(after: 0, limit: 100).ops.count == 8)
        // Both 503s are counted for /metrics, and the writes that went in.
        let metrics = server.renderMetrics()
        #expect(metrics.contains("chronicle_postgres_unavailable_total 2\n") && metrics.contains("chronicle_postgres_writes_total 2\n"), "\(metrics)")
    }

    @Test func aDatabaseOfANewerFormatIsRefusedUntouched() throws {
        let database = try TestDatabase()
        _ = try database.server("a")
        let pg = try database.connection()
        try pg.execute("UPDATE chronicle_meta SET value = '99' WHERE key = 'format_version'")
        #expect {
            _ = try database.server("b")
        } throws: { error in
            (error as? ChronicleError)?.code == .futureStoreVersion
        }
        #expect(try pg.execute("SELECT value FROM chronicle_meta WHERE key = 'format_version'").text(0, 0) == "99")
    }

    @Test func confirmedOpsCannotBeChangedInPostgreSQL() throws {
        let database = try TestDatabase()
        let library = UUID()
        let shared = try database.server("a").library(library)
        let writer = try Writer(library: library, in: database.directory, seed: 6)
        _ = try shared.push(try writer.write(2), from: writer.deviceID)
        let pg = try database.connection()
        #expect(throws: PostgresError.self) { try pg.execute("UPDATE chronicle_log SET payload = '{}'") }
        #expect(throws: PostgresError.self) { try pg.execute("DELETE FROM chronicle_log") }
        #expect(try pg.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 2)
    }

    /// A pinned connection: what runs inside `withPinnedConnection` on its thread borrows the same
    /// connection (a pool of one does not wait for itself), a nested transaction is a savepoint of
    /// the one around it (its rollback keeps what came before), and the outer commit decides.
    @Test func aPinnedConnectionIsLentAgainToItsOwnThreadAndNestsAsASavepoint() throws {
        let database = try TestDatabase()
        let pool = PostgresPool(database.conninfo, size: 1)
        try pool.withConnection { _ = try $0.execute("CREATE TABLE pinned (n int)") }
        struct Refused: Error {}
        try pool.withPinnedConnection { pinned in
            try pinned.transaction { pg in
                try pg.execute("INSERT INTO pinned VALUES (1)")
                try pool.withConnection { inner in
                    #expect(inner === pinned)
                    try inner.transaction { _ = try $0.execute("INSERT INTO pinned VALUES (2)") }
                    #expect(throws: Refused.self) {
                        try inner.transaction { pg in
                            try pg.execute("INSERT INTO pinned VALUES (3)")
                            throw Refused()
                        }
                    }
                }
            }
        }
        #expect(try database.connection().execute("SELECT string_agg(n::text, ',' ORDER BY n) FROM pinned").text(0, 0) == "1,2")
        #expect(throws: Refused.self) {
            try pool.withPinnedConnection { pinned in
                try pinned.transaction { pg in
                    try pool.withConnection { try $0.transaction { _ = try $0.execute("INSERT INTO pinned VALUES (4)") } }
                    throw Refused()
                }
            }
        }
        #expect(try database.connection().execute("SELECT count(*) FROM pinned").int(0, 0) == 2)
        #expect(pool.usage.open == 1)
    }
}
