import ChronicleCore
import ChroniclePostgres
import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// `chronicle serve --postgres` processes sharing one PostgreSQL database (the order, users and
/// devices), on one data directory or none, with devices syncing through each, one server killed
/// and restarted on the way, and the account commands run against PostgreSQL.
@Suite(.serialized) struct PostgresToolTests {
    /// A database of its own on the test script's PostgreSQL server (`CHRONICLE_TEST_POSTGRES`).
    func database() throws -> (conninfo: String, drop: () -> Void) {
        guard let base = ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES"], !base.isEmpty else {
            throw ChronicleError(.usage, "CHRONICLE_TEST_POSTGRES is not set: run the tests with `bash Tools/scripts/test.sh`, which starts PostgreSQL.")
        }
        let name = "chronicle_tool_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        try PostgresConnection(base).execute("CREATE DATABASE \(name)")
        let conninfo = base.replacingOccurrences(of: #"dbname=\S+"#, with: "dbname=\(name)", options: .regularExpression)
        return (conninfo, { _ = try? PostgresConnection(base).execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }

    @Test func twoServersShareTheOrderAndOneIsKilledAndRestarted() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool(), b = try Tool()
        let data = a.directory.appendingPathComponent("server").path
        #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n").status == 0)
        let flags = ["--postgres", conninfo]
        var one = try ServerProcess(data: data, arguments: flags)
        let two = try ServerProcess(data: data, arguments: flags)
        try a.signIn(one)
        try b.signIn(two)
        for index in 0..<20 {
            try a.ok("save", "https://example.com/a/\(index)", "--title", "A \(index)")
            try b.ok("save", "https://example.com/b/\(index)", "--title", "B \(index)")
        }
        try a.ok("sync")
        try b.ok("sync")

        // Killed with no chance to clean up, and started again on its port: it finds its replicas again.
        one.kill9()
        one = try ServerProcess(data: data, port: one.port, arguments: flags)
        for index in 20..<30 { try a.ok("save", "https://example.com/a/\(index)") }
        try a.ok("sync")
        try b.ok("sync")
        try a.ok("sync")
        let digests = try [a, b].map { try DeviceStore.open(at: $0.store).digest() }
        #expect(digests[0] == digests[1])
        for tool in [a, b] { #expect(try DeviceStore.open(at: tool.store).pendingOps().isEmpty) }

        let pg = try PostgresConnection(conninfo)
        let rows = try pg.execute("SELECT count(*), count(DISTINCT op_id), min(server_seq), max(server_seq) FROM chronicle_log")
        #expect(try rows.int(0, 0) == 50 && rows.int(0, 1) == 50 && rows.int(0, 2) == 1 && rows.int(0, 3) == 50, "every op once, gap-free")
        let replicas = try FileManager.default.contentsOfDirectory(atPath: data + "/replicas").sorted()
        #expect(replicas == ["1", "2"], "each server its own replicas, found again after the restart: \(replicas)")

        // The data directory is PostgreSQL's now: a server without --postgres, and the commands that
        // work on library files, refuse it.
        one.stop()
        two.stop()
        let plain = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0"])
        #expect(plain.status != 0 && plain.stderr.contains("libraries_in_postgresql"), "\(plain.stderr)")
        let backup = try Tool.exec(Tool.binary, ["server", "backup", "--data", data, "--to", a.directory.appendingPathComponent("copy").path])
        #expect(backup.status != 0 && backup.stderr.contains("libraries_in_postgresql"), "\(backup.stderr)")
        let unreachable = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0", "--postgres", "host=127.0.0.1 port=1 dbname=none connect_timeout=2"])
        #expect(unreachable.status != 0 && unreachable.stderr.contains("Cannot use PostgreSQL"), "\(unreachable.stderr)")
    }

    /// A lone server's data directory moved with `server move-to-postgres`: refused while the lone
    /// server runs; then every library (one compacted, with history dropped past a horizon) and
    /// the accounts go in, and `serve --postgres` on the same directory and port serves them:
    /// devices sync on with their tokens and cursors, one pushing what it queued meanwhile, and a
    /// new device converges with them.
    @Test func aLoneServerMovesToPostgreSQLAndItsDevicesGoOn() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool(), b = try Tool()
        let data = a.directory.appendingPathComponent("lone").path
        for user in ["ada", "bob"] {
            #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, user], stdin: "password123\n").status == 0)
        }
        let lone = try ServerProcess(data: data)
        try a.signIn(lone)
        try b.signIn(lone, user: "bob")
        for index in 0..<30 { try a.ok("save", "https://example.com/a/\(index)", "--title", "A \(index)") }
        try a.ok("sync")
        for index in 0..<5 { try b.ok("save", "https://example.com/b/\(index)") }
        try b.ok("sync")
        let compacted = try Tool.exec(Tool.binary, ["server", "compact", "--data", data, "ada", "--keep-ops", "5", "--horizon-days", "0"])
        #expect(compacted.status == 0 && compacted.stdout.contains("history through seq"), "\(compacted.stdout) \(compacted.stderr)")
        for index in 30..<35 { try a.ok("save", "https://example.com/a/\(index)") }   // queued, not synced
        // A file on the lone server: it moves with the library.
        let photo = a.directory.appendingPathComponent("photo.bin").path
        let bytes = (0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try Data(bytes).write(to: URL(fileURLWithPath: photo))
        let added = try Tool.exec(Tool.binary, ["--store", b.store, "blob", "add", photo, "--type", "image/jpeg"])
        let ref = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(added.status == 0 && ref.hasPrefix("sha256:"), "\(added.stdout) \(added.stderr)")
        let uploaded = try Tool.exec(Tool.binary, ["--store", b.store, "sync"])
        #expect(uploaded.status == 0 && uploaded.stdout.contains("Uploaded 1 file"), "\(uploaded.stdout) \(uploaded.stderr)")

        let move = ["server", "move-to-postgres", "--data", data, "--postgres", conninfo]
        let busy = try Tool.exec(Tool.binary, move)
        #expect(busy.status != 0 && busy.stderr.contains("data_directory_in_use"), "\(busy.stderr)")
        lone.stop()
        let dry = try Tool.exec(Tool.binary, move + ["--dry-run"])
        #expect(dry.status == 0 && dry.stdout.contains("Would move 2 libraries and 2 users"), "\(dry.stdout) \(dry.stderr)")
        let moved = try Tool.exec(Tool.binary, move)
        #expect(moved.status == 0 && moved.stdout.contains("Moved 2 libraries, 2 users and 2 device registrations to PostgreSQL, with 1 file (1500000 bytes)")
                && moved.stdout.contains("digest matches") && !moved.stdout.contains("already"), "\(moved.stdout) \(moved.stderr)")
        let again = try Tool.exec(Tool.binary, move)
        #expect(again.status != 0 && again.stderr.contains("libraries_in_postgresql"), "\(again.stderr)")
        let plain = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0"])
        #expect(plain.status != 0 && plain.stderr.contains("libraries_in_postgresql"), "\(plain.stderr)")

        let shared = try ServerProcess(data: data, port: lone.port, arguments: ["--postgres", conninfo])
        defer { shared.stop() }
        try a.ok("sync")
        try b.ok("sync")
        #expect(try DeviceStore.open(at: a.store).pendingOps().isEmpty)
        let pg = try PostgresConnection(conninfo)
        #expect(try pg.execute("SELECT max(head) FROM chronicle_libraries").int(0, 0) == 35)
        let c = try Tool()
        try c.signIn(shared)
        try c.ok("sync")
        #expect(try DeviceStore.open(at: c.store).digest() == (try DeviceStore.open(at: a.store).digest()))
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--all", "--postgres", conninfo])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        let d = try Tool()
        try d.signIn(shared, user: "bob")
        let out = d.directory.appendingPathComponent("photo.out").path
        let fetched = try Tool.exec(Tool.binary, ["--store", d.store, "blob", "get", ref, "--to", out])
        #expect(fetched.status == 0 && fetched.stdout.contains("fetched from the server"), "\(fetched.stdout) \(fetched.stderr)")
        #expect(FileManager.default.contents(atPath: out) == Data(bytes), "the file came through PostgreSQL whole")
    }

    /// A move that meets a library file it cannot read stops there, naming the file, with the
    /// accounts not moved: the lone server's directory is still its own, and a second run after the
    /// file is put right finishes the move.
    @Test func aMoveStopsAtADamagedLibraryAndIsRunAgain() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool()
        let data = a.directory.appendingPathComponent("lone").path
        #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n").status == 0)
        let lone = try ServerProcess(data: data)
        try a.signIn(lone)
        try a.ok("save", "https://example.com/one")
        try a.ok("sync")
        lone.stop()
        let library = try #require(try FileManager.default.contentsOfDirectory(atPath: data + "/libraries").first { $0.hasSuffix(".sqlite") })
        let path = data + "/libraries/" + library
        // The file and its write-ahead log set aside, garbage in the file's place.
        let fm = FileManager.default
        for suffix in ["", "-wal", "-shm"] where fm.fileExists(atPath: path + suffix) { try fm.moveItem(atPath: path + suffix, toPath: path + suffix + ".kept") }
        try Data(repeating: 0x5A, count: 65_536).write(to: URL(fileURLWithPath: path))
        let move = ["server", "move-to-postgres", "--data", data, "--postgres", conninfo]
        let failed = try Tool.exec(Tool.binary, move)
        #expect(failed.status == 4 && failed.stderr.contains(path) && failed.stderr.contains("store_damaged")
                && failed.stderr.contains("run the move again"), "\(failed.stderr)")
        let pg = try PostgresConnection(conninfo)
        #expect(try pg.execute("SELECT count(*) FROM chronicle_users").int(0, 0) == 0)
        #expect(try Tool.exec(Tool.binary, ["server", "users", "--data", data]).status == 0, "the directory is still the lone server's")

        for suffix in ["", "-wal", "-shm"] {
            try? fm.removeItem(atPath: path + suffix)
            if fm.fileExists(atPath: path + suffix + ".kept") { try fm.moveItem(atPath: path + suffix + ".kept", toPath: path + suffix) }
        }
        let moved = try Tool.exec(Tool.binary, move)
        #expect(moved.status == 0 && moved.stdout.contains("Moved 1 library, 1 users"), "\(moved.stdout) \(moved.stderr)")
    }

    /// `server backup --postgres` beside a running server writes a lone server's data directory:
    /// it verifies, a lone server on it (where the PostgreSQL server was) takes the devices back as
    /// a server restored from a backup (a new incarnation; one pushes what it wrote since), and
    /// `move-to-postgres` puts it into a new database, where it verifies again.
    @Test func aBackupOfPostgreSQLIsALoneServersDirectoryAndGoesBack() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let (target, dropTarget) = try database()
        defer { dropTarget() }
        let a = try Tool(), b = try Tool()
        let pg = ["--postgres", conninfo]
        for user in ["ada", "bob"] {
            #expect(try Tool.exec(Tool.binary, ["server", "add-user"] + pg + [user], stdin: "password123\n").status == 0)
        }
        let shared = try ServerProcess(data: a.directory.appendingPathComponent("replicas").path, arguments: pg, dataFlag: "--replicas")
        try a.signIn(shared)
        try b.signIn(shared, user: "bob")
        for index in 0..<40 { try a.ok("save", "https://example.com/a/\(index)", "--title", "A \(index)") }
        try a.ok("sync")
        try b.ok("save", "https://example.com/b")
        try b.ok("sync")
        #expect(try Tool.exec(Tool.binary, ["server", "compact", "ada", "--keep-ops", "10"] + pg).status == 0)
        let photo = a.directory.appendingPathComponent("photo.bin").path
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
        try Data(bytes).write(to: URL(fileURLWithPath: photo))
        let ref = try Tool.exec(Tool.binary, ["--store", a.store, "blob", "add", photo]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try a.ok("sync")

        let copy = a.directory.appendingPathComponent("backup").path
        let backup = try Tool.exec(Tool.binary, ["server", "backup", "--to", copy] + pg)
        #expect(backup.status == 0 && backup.stdout.contains("Backed up 2 users, 2 device registrations and 2 libraries with 1 file"), "\(backup.stdout) \(backup.stderr)")
        let again = try Tool.exec(Tool.binary, ["server", "backup", "--to", copy] + pg)
        #expect(again.status != 0 && again.stderr.contains("store_exists"), "\(again.stderr)")
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--data", copy, "--all"])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")

        // Written after the backup: lost by a server restored from it, and pushed again by the device.
        try a.ok("save", "https://example.com/a/after")
        try a.ok("sync")
        shared.stop()
        let lone = try ServerProcess(data: copy, port: shared.port)
        try a.ok("sync")
        try a.ok("sync")
        try b.ok("sync")
        #expect(try DeviceStore.open(at: a.store).pendingOps().isEmpty)
        let c = try Tool()
        try c.signIn(lone)
        try c.ok("sync")
        #expect(try DeviceStore.open(at: c.store).digest() == (try DeviceStore.open(at: a.store).digest()))
        let out = c.directory.appendingPathComponent("photo.out").path
        #expect(try Tool.exec(Tool.binary, ["--store", c.store, "blob", "get", ref, "--to", out]).status == 0)
        #expect(FileManager.default.contents(atPath: out) == Data(bytes), "the backup holds the file")
        lone.stop()

        let moved = try Tool.exec(Tool.binary, ["server", "move-to-postgres", "--data", copy, "--postgres", target])
        #expect(moved.status == 0 && moved.stdout.contains("Moved 2 libraries, 2 users") && moved.stdout.contains("with 1 file"), "\(moved.stdout) \(moved.stderr)")
        let there = try Tool.exec(Tool.binary, ["server", "verify", "--all", "--postgres", target])
        #expect(there.status == 0, "\(there.stdout) \(there.stderr)")
        #expect(try PostgresConnection(target).execute("SELECT count(*) FROM chronicle_blobs WHERE complete").int(0, 0) == 1)
    }

    /// Servers as on two machines: no directory in common, each with its replicas only
    /// (`--replicas`), users and devices in PostgreSQL, administered with `server … --postgres`.
    @Test func serversWithNothingInCommonButPostgreSQL() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool(), b = try Tool()
        let pg = ["--postgres", conninfo]
        #expect(try Tool.exec(Tool.binary, ["server", "add-user"] + pg + ["ada"], stdin: "password123\n").status == 0)
        let one = try ServerProcess(data: a.directory.appendingPathComponent("replicas").path, arguments: pg, dataFlag: "--replicas")
        let two = try ServerProcess(data: b.directory.appendingPathComponent("replicas").path,
                                    arguments: pg + ["--postgres-pool", "3", "--postgres-timeout", "20"], dataFlag: "--replicas")
        #expect(one.banner.contains("order and accounts in PostgreSQL"), "\(one.banner)")
        try a.signIn(one)
        try b.signIn(two)
        for index in 0..<10 {
            try a.ok("save", "https://example.com/a/\(index)")
            try b.ok("save", "https://example.com/b/\(index)")
        }
        try a.ok("sync")
        try b.ok("sync")
        try a.ok("sync")
        let before = try DeviceStore.open(at: a.store).digest()
        #expect(try DeviceStore.open(at: b.store).digest() == before)

        // A plan change is ordered in PostgreSQL like a push, and reaches devices on either server.
        let plan = try Tool.exec(Tool.binary, ["server", "set-plan", "ada", "premium"] + pg)
        #expect(plan.status == 0 && plan.stdout.contains("premium (seq 21)"), "\(plan.stdout) \(plan.stderr)")
        try a.ok("sync")
        try b.ok("sync")
        let after = try DeviceStore.open(at: a.store).digest()
        let afterB = try DeviceStore.open(at: b.store).digest()
        #expect(after != before && afterB == after)

        // verify: PostgreSQL's checks and a replay of the log, beside the running servers; then an op
        // taken out by hand (its guard trigger disabled first) fails it.
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--all"] + pg)
        #expect(verified.status == 0 && verified.stdout.contains("ok   the log in PostgreSQL runs on from its sealed segments to the head with no gap: 21 ops, head 21")
                && verified.stdout.contains("ok   digest equals a replay of the log"), "\(verified.stdout) \(verified.stderr)")
        let tamper = try PostgresConnection(conninfo)
        try tamper.execute("ALTER TABLE chronicle_log DISABLE TRIGGER chronicle_log_kept")
        try tamper.execute("DELETE FROM chronicle_log WHERE server_seq = 5")
        let broken = try Tool.exec(Tool.binary, ["server", "verify", "ada"] + pg)
        #expect(broken.status == 1 && broken.stdout.contains("FAIL the log in PostgreSQL runs on from its sealed segments to the head with no gap: 20 ops from seq 1 to 21, but the head is 21")
                && broken.stdout.contains("FAIL the guard triggers are in place: missing or disabled: chronicle_log_kept"), "\(broken.stdout) \(broken.stderr)")
        try tamper.execute("ALTER TABLE chronicle_log ENABLE TRIGGER chronicle_log_kept")

        let users = try Tool.exec(Tool.binary, ["server", "users", "--json"] + pg)
        #expect(users.status == 0 && users.stdout.contains("\"ada\""), "\(users.stdout) \(users.stderr)")
        let devices = try Tool.exec(Tool.binary, ["server", "devices", "ada", "--json"] + pg)
        #expect((try devices.json() as? [Any])?.count == 2, "\(devices.stdout) \(devices.stderr)")

        // A revocation through PostgreSQL signs the device out on the server it syncs with.
        let device = try DeviceStore.open(at: a.store).deviceID.lowercased
        #expect(try Tool.exec(Tool.binary, ["server", "revoke", device] + pg).status == 0)
        try a.ok("save", "https://example.com/a/after")
        var refused = try a.run("sync")
        let deadline = Date().addingTimeInterval(10)
        while refused.status == 0, Date() < deadline {   // the NOTIFY reaches the server within milliseconds
            Thread.sleep(forTimeInterval: 0.05)
            refused = try a.run("sync")
        }
        #expect(refused.status == 6, "\(refused.status) \(refused.stderr)")
        try b.ok("sync")

        // What works on library files is refused; a user removed with their library leaves PostgreSQL.
        let salvage = try Tool.exec(Tool.binary, ["server", "salvage", "ada"] + pg)
        #expect(salvage.status != 0 && salvage.stderr.contains("libraries_in_postgresql"), "\(salvage.stderr)")
        let both = try Tool.exec(Tool.binary, ["server", "users", "--data", a.directory.path] + pg)
        #expect(both.status == 2, "\(both.stderr)")
        let removed = try Tool.exec(Tool.binary, ["server", "remove-user", "ada", "--delete-library"] + pg)
        #expect(removed.status == 0 && removed.stdout.contains("deleted from PostgreSQL"), "\(removed.stdout) \(removed.stderr)")
        let check = try PostgresConnection(conninfo)
        #expect(try check.execute("SELECT count(*) FROM chronicle_libraries").int(0, 0) == 0)
        #expect(try check.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 0)
        #expect(try check.execute("SELECT count(*) FROM chronicle_registrations").int(0, 0) == 0)
        one.stop()
        two.stop()
    }

    /// A data directory's users (added with `server add-user --data`) move to PostgreSQL when
    /// `serve --postgres` first runs on it; the file is kept, and the account commands then ask for
    /// --postgres. A lone server's directory with libraries is refused: their history would not move.
    @Test func aDataDirectorysUsersMoveToPostgreSQLOnFirstStart() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool()
        let data = a.directory.appendingPathComponent("server").path
        #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n").status == 0)
        let server = try ServerProcess(data: data, arguments: ["--postgres", conninfo])
        #expect(server.banner.contains("moved 1 users and 0 devices"), "\(server.banner)")
        try a.signIn(server)
        try a.ok("save", "https://example.com/moved")
        try a.ok("sync")
        let listed = try Tool.exec(Tool.binary, ["server", "users", "--postgres", conninfo])
        #expect(listed.status == 0 && listed.stdout.contains("ada"), "\(listed.stderr)")
        let old = try Tool.exec(Tool.binary, ["server", "users", "--data", data])
        #expect(old.status != 0 && old.stderr.contains("libraries_in_postgresql") && old.stderr.contains("--postgres"), "\(old.stderr)")
        server.stop()

        let lone = a.directory.appendingPathComponent("lone").path
        #expect(try Tool.exec(Tool.binary, ["server", "add-user", "--data", lone, "bob"], stdin: "password123\n").status == 0)
        let plain = try ServerProcess(data: lone)
        let b = try Tool()
        try b.signIn(plain, user: "bob")
        try b.ok("save", "https://example.com/lone")
        try b.ok("sync")
        plain.stop()
        // Bounded: a serve that did not refuse would run until killed.
        let errors = a.directory.appendingPathComponent("refused.log")
        let refused = try ChildProcess(Tool.binary.path, ["serve", "--data", lone, "--port", "0", "--postgres", conninfo], stderr: .file(errors.path))
        let status = waitForExit(refused, seconds: 30)
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        #expect(status != nil && status != 0 && stderr.contains("libraries_in_postgresql"), "\(String(describing: status)) \(stderr)")
    }

    /// A user removed from PostgreSQL leaves their library there, owned by no one; it is given back
    /// to a new user (`add-user --library`), whose device syncs on with its history, and then
    /// deleted (`delete-library`).
    @Test func aLibraryIsGivenBackAndThenDeletedThroughPostgreSQL() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool()
        let pg = ["--postgres", conninfo]
        #expect(try Tool.exec(Tool.binary, ["server", "add-user"] + pg + ["ada"], stdin: "password123\n").status == 0)
        let server = try ServerProcess(data: a.directory.appendingPathComponent("replicas").path, arguments: pg, dataFlag: "--replicas")
        defer { server.stop() }
        try a.signIn(server)
        try a.ok("save", "https://example.com/kept", "--title", "Kept")
        try a.ok("sync")
        let library = try #require(try a.credentials["library"] as? String)

        let removed = try Tool.exec(Tool.binary, ["server", "remove-user", "ada"] + pg)
        #expect(removed.status == 0 && removed.stdout.contains("stays in PostgreSQL"), "\(removed.stdout) \(removed.stderr)")
        let listed = try Tool.exec(Tool.binary, ["server", "users", "--json"] + pg)
        let rows = try #require(try listed.json() as? [[String: Any]], "\(listed.stdout) \(listed.stderr)")
        #expect(rows.count == 1 && rows[0]["library_id"] as? String == library && rows[0]["user"] is NSNull, "\(rows)")
        let wrongSchema = try Tool.exec(Tool.binary, ["server", "add-user", "bea", "--library", library, "--schema", "fieldservice"] + pg, stdin: "password456\n")
        #expect(wrongSchema.status == 4 && wrongSchema.stderr.contains("schema_mismatch"), "\(wrongSchema.stderr)")
        let unknown = try Tool.exec(Tool.binary, ["server", "add-user", "bea", "--library", UUID().lowercased] + pg, stdin: "password456\n")
        #expect(unknown.status == 3 && unknown.stderr.contains("PostgreSQL has no library"), "\(unknown.stderr)")
        let given = try Tool.exec(Tool.binary, ["server", "add-user", "bea", "--library", library] + pg, stdin: "password456\n")
        #expect(given.status == 0, "\(given.stderr)")

        // The device signs in as its new owner and syncs on with the history it has.
        let login = try a.run(["login", "--server", server.url, "--user", "bea"], stdin: "password456\n")
        #expect(login.status == 0, "\(login.stderr)")
        try a.ok("save", "https://example.com/after")
        try a.ok("sync")
        let check = try PostgresConnection(conninfo)
        #expect(try check.execute("SELECT count(*) FROM chronicle_log WHERE library_id = $1", [library]).int(0, 0) == 2)

        let owned = try Tool.exec(Tool.binary, ["server", "delete-library", library] + pg)
        #expect(owned.status == 3 && owned.stderr.contains("belongs to user bea"), "\(owned.stderr)")
        #expect(try Tool.exec(Tool.binary, ["server", "remove-user", "bea"] + pg).status == 0)
        let deleted = try Tool.exec(Tool.binary, ["server", "delete-library", library] + pg)
        #expect(deleted.status == 0 && deleted.stdout.contains("deleted from PostgreSQL"), "\(deleted.stdout) \(deleted.stderr)")
        #expect(try check.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 0)
        let again = try Tool.exec(Tool.binary, ["server", "delete-library", library] + pg)
        #expect(again.status == 3 && again.stderr.contains("PostgreSQL has no library"), "\(again.stderr)")
        let empty = try Tool.exec(Tool.binary, ["server", "users", "--json"] + pg)
        #expect((try empty.json() as? [Any])?.isEmpty == true, "\(empty.stdout)")
    }

    /// Servers compact their replicas on their own and hand the sealed segments over to PostgreSQL,
    /// where they take the place of the oldest log rows; a server started later with no replica
    /// makes one from them, and a new device pulls the whole history through it.
    @Test func serversSealIntoPostgreSQLAndANewServerStartsFromTheSegments() throws {
        let (conninfo, drop) = try database()
        defer { drop() }
        let a = try Tool(), c = try Tool()
        let pg = ["--postgres", conninfo]
        #expect(try Tool.exec(Tool.binary, ["server", "add-user"] + pg + ["ada"], stdin: "password123\n").status == 0)
        let compacting = pg + ["--compact-keep-ops", "5", "--compact-segment-ops", "10", "--compact-snapshot-ops", "10", "--compact-every", "0.1"]
        let one = try ServerProcess(data: a.directory.appendingPathComponent("replicas").path, arguments: compacting, dataFlag: "--replicas")
        try a.signIn(one)
        for index in 0..<36 { try a.ok("save", "https://example.com/a/\(index)") }
        try a.ok("sync")

        // 36 ops, 5 kept hot: three whole segments of 10 are sealed and handed over.
        let database = try PostgresConnection(conninfo)
        var sealed: Int64 = 0
        for _ in 0..<200 where sealed < 30 {
            sealed = try database.execute("SELECT coalesce(max(sealed_through), 0) FROM chronicle_libraries").int(0, 0)
            if sealed < 30 { Thread.sleep(forTimeInterval: 0.05) }
        }
        #expect(sealed == 30, "\((try? String(contentsOfFile: one.logPath, encoding: .utf8)) ?? "")")
        #expect(try database.execute("SELECT count(*), min(server_seq) FROM chronicle_log").int(0, 0) == 6)
        #expect(try database.execute("SELECT count(*) FROM chronicle_segments").int(0, 0) == 3)

        // (A retention horizon is taken with --postgres too; nothing here is old enough to drop.)
        let two = try ServerProcess(data: c.directory.appendingPathComponent("replicas").path, arguments: pg + ["--horizon-days", "30"],
                                    dataFlag: "--replicas")
        try c.signIn(two)
        try c.ok("sync")
        #expect(try DeviceStore.open(at: c.store).digest() == (try DeviceStore.open(at: a.store).digest()))
        let log = try c.run(["log", "--json"])
        #expect(log.status == 0 && log.stdout.components(separatedBy: "article.save").count - 1 == 36, "\(log.stdout.prefix(400))")

        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--all"] + pg)
        #expect(verified.status == 0 && verified.stdout.contains("ok   the sealed segments in PostgreSQL run on from where history begins, chained and readable: 3 segments through seq 30")
                && verified.stdout.contains("ok   the log in PostgreSQL runs on from its sealed segments to the head with no gap: 6 ops after seq 30, head 36"),
                "\(verified.stdout) \(verified.stderr)")

        // An operator seals the rest now, beside the running servers; devices go on syncing.
        let compacted = try Tool.exec(Tool.binary, ["server", "compact", "ada", "--keep-ops", "0"] + pg)
        #expect(compacted.status == 0 && compacted.stdout.contains("Sealed 6 ops of ada's library in PostgreSQL: its segments reach seq 36 of 36."),
                "\(compacted.stdout) \(compacted.stderr)")
        #expect(try database.execute("SELECT count(*) FROM chronicle_log").int(0, 0) == 0)
        try a.ok("save", "https://example.com/a/after")
        try a.ok("sync")
        try c.ok("sync")
        #expect(try DeviceStore.open(at: c.store).digest() == (try DeviceStore.open(at: a.store).digest()))
        #expect(try Tool.exec(Tool.binary, ["server", "verify", "ada"] + pg).status == 0)
    }
}
