import ChronicleCore
import ChronicleStore
import ChronicleTesting
import Foundation
import Testing

/// Sync between real processes over real HTTP on loopback: `chronicle serve` and
/// `chronicle` devices, with servers and devices killed mid-sync.
@Suite(.serialized) struct ToolSyncTests {
    let password = "password123"

    func server(_ tool: Tool, environment: [String: String] = [:], fault503Rate: Double? = nil) throws -> ServerProcess {
        let data = tool.directory.appendingPathComponent("server").path
        let server = try ServerProcess(data: data, environment: environment, fault503Rate: fault503Rate)
        let added = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: password + "\n")
        #expect(added.status == 0 || added.stderr.contains("already exists"), "\(added.stderr)")
        return server
    }

    /// Digests of every store and the server's, with the server stopped.
    func expectConverged(_ server: ServerProcess, _ devices: [Tool], expectedOps: Int? = nil,
                         sourceLocation: SourceLocation = #_sourceLocation) throws {
        server.stop()
        let libraryID = try #require(try devices[0].credentials["library"] as? String)
        let library = try server.library(libraryID)
        let ops = try library.allOps()
        #expect(Set(ops.map(\.opID)).count == ops.count, "no op applied twice", sourceLocation: sourceLocation)
        if let expectedOps { #expect(ops.count == expectedOps, "no op lost", sourceLocation: sourceLocation) }
        let serverDigest = try library.digest()
        for device in devices {
            let store = try DeviceStore.open(at: device.store)
            #expect(try store.pendingOps().isEmpty, sourceLocation: sourceLocation)
            #expect(try store.digest() == serverDigest, sourceLocation: sourceLocation)
            #expect(try store.replayDigest() == serverDigest, sourceLocation: sourceLocation)
        }
    }

    /// A store restored from a backup (its credentials with it) while the original went on
    /// syncing: `chronicle sync` numbers its unsent changes after the server's and says so;
    /// nothing either copy wrote is lost or refused.
    @Test func aStoreRestoredFromABackupSyncsWithoutLosingAChange() throws {
        let a = try Tool(), restored = try Tool()
        let server = try server(a)
        try a.signIn(server)
        let id = try a.id("save", "https://example.com/backup", "--title", "Before the backup")
        try a.ok("sync")
        try Database(path: a.store).execute("VACUUM INTO '\(restored.store)'")
        try FileManager.default.copyItem(atPath: a.store + ".credentials", toPath: restored.store + ".credentials")
        try a.ok("tag", id, "original")
        try a.ok("note", id, "Written on the original")
        try a.ok("sync")

        try restored.ok("tag", id, "restored")
        let synced = try restored.ok("sync")
        #expect(synced.stdout.contains("Synced: pushed 1, pulled 3; 1 unsent change numbered again after the server's"), "\(synced.stdout)")
        #expect(try restored.ok("notices").stdout.contains("No new notices."))
        try a.ok("sync")
        let shown = try a.ok("show", id).stdout
        #expect(shown.contains("restored") && shown.contains("original") && shown.contains("Written on the original"))
        try restored.ok("verify")
        try expectConverged(server, [a, restored], expectedOps: 4)
    }

    /// `chronicle sync` over a store with a broken page says the store is damaged (exit 4), not
    /// that the server refused; salvaged, it syncs and converges.
    @Test func aSyncOverABrokenPageSaysSoAndTheSalvagedStoreSyncs() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)
        var ids: [String] = []
        for i in 0..<40 { ids.append(try a.id("save", "https://example.com/\(i)", "--title", "Article \(i)")) }
        try a.ok("sync")
        try b.ok("sync")
        for id in ids.prefix(20) { try b.ok("tag", id, "from-b") }
        try b.ok("sync")

        try a.breakRootPage(of: "chronicle_log_blocks")

        let synced = try a.run("sync")
        #expect(synced.status == 4, "\(synced.stdout) \(synced.stderr)")
        #expect(synced.stderr.contains("[store_damaged]") && !synced.stderr.contains("[server_refused]"), "\(synced.stderr)")
        let salvaged = try a.run("salvage")
        #expect(salvaged.status == 1, "the log's history was cut: \(salvaged.stdout) \(salvaged.stderr)")
        #expect(salvaged.stdout.contains("`chronicle sync` pulls the rest from the server again"), "\(salvaged.stdout)")
        try a.ok("sync")
        try a.ok("verify")
        try expectConverged(server, [a, b], expectedOps: 60)
    }

    @Test func twoDevicesSignInSyncAndTellTheTruthWhenOffline() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)

        // The token is kept 0600 and never printed.
        let attributes = try FileManager.default.attributesOfItem(atPath: a.store + ".credentials")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let token = try #require(try a.credentials["token"] as? String)
        let status = try a.ok("status")
        #expect(!status.stdout.contains(token) && !status.stderr.contains(token))
        #expect(status.stdout.hasPrefix("Never synced") || status.stdout.contains("Never synced."))

        let id = try a.id("save", "https://example.com/airplane", "--title", "Airplane mode")
        try a.ok("tag", id, "travel")
        let synced = try a.ok("sync")
        #expect(synced.stdout.contains("Synced: pushed 2, pulled 2."))
        try b.ok("sync")
        let listed = try b.ok("list", "--json")
        #expect(listed.stdout.contains("Airplane mode") && listed.stdout.contains("travel"))
        #expect(try b.ok("status").stdout.hasPrefix("Up to date. Last synced"))

        // The server goes away: the write still works, and status says so plainly.
        server.stop()
        try a.ok("note", id, "Written in a tunnel")
        let offline = try a.run(["sync"], environment: ["CHRONICLE_SYNC_RETRIES": "0"])
        #expect(offline.status == 5, "\(offline.stderr)")
        #expect(offline.stderr.contains("[offline]"))
        let line = try a.ok("status").stdout
        #expect(line.hasPrefix("Offline — 1 change saved on this device; it will sync when you reconnect. Last synced "), "\(line)")

        // Back online on the same port.
        let again = try ServerProcess(data: server.data, port: server.port)
        try a.ok("sync")
        try b.ok("sync")
        #expect(try b.ok("show", id).stdout.contains("Written in a tunnel"))
        let wrong = try Tool()
        try wrong.ok("init")
        let refused = try wrong.run(["login", "--server", again.url, "--user", "ada"], stdin: "not the password\n")
        #expect(refused.status == 6 && refused.stderr.contains("bad_credentials"))
        try expectConverged(again, [a, b], expectedOps: 3)
    }

    /// A photo taken offline: `blob add` keeps it and prints its address, the op naming it syncs
    /// first and the file after it, the other device gets it with `blob get`; bad requests are
    /// refused with their codes and exit codes.
    @Test func aPhotoTakenOfflineReachesTheOtherDeviceWithTheBlobCommands() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        defer { server.stop() }
        try a.signIn(server)
        try b.signIn(server)
        let photo = a.directory.appendingPathComponent("job-17.jpg").path
        let bytes = (0..<5_000_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        try Data(bytes).write(to: URL(fileURLWithPath: photo))

        let added = try a.ok("blob", "add", photo, "--type", "image/jpeg")
        let ref = added.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(ref.hasPrefix("sha256:") && ref.count == 71 && added.stderr.contains("queued to upload"), "\(added.stdout) \(added.stderr)")
        let id = try a.id("op", "episode.save", "--payload", "{\"title\":\"Recorded on site\",\"audio_ref\":\"\(ref)\"}")
        #expect(try a.ok("status").stdout.contains("1 file (5 MB) waiting to upload"))
        let listed = try a.ok("blob", "list", "--json").json() as? [[String: Any]]
        #expect(listed?.first?["state"] as? String == "queued" && listed?.first?["media_type"] as? String == "image/jpeg")
        let synced = try a.ok("sync")
        #expect(synced.stdout.contains("pushed 1") && synced.stdout.contains("Uploaded 1 file"), "\(synced.stdout)")
        #expect(try a.ok("blob", "list").stdout.contains("uploaded"))
        #expect(!(try a.ok("status").stdout.contains("waiting to upload")))

        try b.ok("sync")
        #expect(try b.ok("show", id).stdout.contains(ref))
        let out = b.directory.appendingPathComponent("from-a.jpg").path
        let got = try b.ok("blob", "get", ref, "--to", out)
        #expect(got.stdout.contains("fetched from the server"), "\(got.stdout)")
        #expect(FileManager.default.contents(atPath: out) == Data(bytes))
        #expect(try b.ok("blob", "get", ref, "--to", out).stdout.contains("fetched") == false, "held here the second time")
        #expect(try b.ok("verify").stdout.contains("files (blobs) whole"))

        let bad = try b.run(["blob", "get", "sha256:1234", "--to", out])
        #expect(bad.status == 3 && bad.stderr.contains("invalid_value"), "\(bad.stderr)")
        let noTarget = try b.run(["blob", "get", ref])
        #expect(noTarget.status == 2 && noTarget.stderr.contains("--to"), "\(noTarget.stderr)")
        let missing = try b.run(["blob", "add", b.directory.appendingPathComponent("nope.jpg").path])
        #expect(missing.status == 3 && missing.stderr.contains("file_unreadable"), "\(missing.stderr)")
        let unknown = try b.run(["blob", "get", "sha256:" + String(repeating: "ab", count: 32), "--to", out])
        #expect(unknown.status == 6 && unknown.stderr.contains("blob_not_found"), "\(unknown.stderr)")
        let alone = try Tool()
        try alone.ok("init")
        let notSignedIn = try alone.run(["blob", "get", ref, "--to", out])
        #expect(notSignedIn.status == 3 && notSignedIn.stderr.contains("blob_not_held"), "\(notSignedIn.stderr)")

        // A file added on B and never named: `compact` deletes it once it has been unnamed for
        // --unnamed-file-days (its row made older here), and keeps the photo the episode names.
        let scrap = b.directory.appendingPathComponent("scrap.bin").path
        try Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: URL(fileURLWithPath: scrap))
        let scrapRef = try b.ok("blob", "add", scrap).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try b.ok("compact", "--dry-run").stdout.contains("Delete") == false, "added today")
        try Database(path: b.store).execute("UPDATE chronicle_blobs SET added_at = added_at - 2 * 86400000")
        let dry = try b.ok("compact", "--dry-run", "--unnamed-file-days", "1").stdout
        #expect(dry.contains("Delete 1 file (10 KB) no row has named for 1 days."), "\(dry)")
        #expect(try b.ok("compact", "--unnamed-file-days", "0").stdout.contains("Deleted") == false, "0 keeps them")
        #expect(try b.ok("compact", "--unnamed-file-days", "1").stdout.contains("Deleted 1 file (10 KB)"))
        let left = try b.ok("blob", "list").stdout
        #expect(left.contains(ref) && !left.contains(scrapRef), "\(left)")
        let badDays = try b.run(["compact", "--unnamed-file-days", "soon"])
        #expect(badDays.status == 2 && badDays.stderr.contains("--unnamed-file-days"), "\(badDays.stderr)")
    }

    /// The operator, beside the running server: lists ada's devices, revokes a lost phone (its
    /// next sync is refused and says to sign in again; it keeps its change), changes the password
    /// (the old one no longer signs in), and the phone signs in again and sends what it kept.
    @Test func theOperatorRevokesALostPhoneAndChangesThePassword() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)
        try a.ok("sync")
        let data = server.data
        func admin(_ arguments: [String], stdin: String? = nil) throws -> ToolResult {
            try Tool.exec(Tool.binary, ["server"] + arguments, stdin: stdin)
        }
        let deviceA = try DeviceStore.open(at: a.store).deviceID.lowercased
        let listed = try admin(["devices", "--data", data, "ada", "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        let devices = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(devices.count == 2 && devices.contains { $0["device_id"] as? String == deviceA }, "\(listed.stdout)")
        #expect(try admin(["devices", "--data", data, "ada"]).stdout.contains(deviceA))

        let revoked = try admin(["revoke", "--data", data, deviceA])
        #expect(revoked.status == 0 && revoked.stdout.contains("Revoked device \(deviceA) of ada"), "\(revoked.stdout)\(revoked.stderr)")
        let id = try a.id("save", "https://example.com/lost-phone", "--title", "Saved on the lost phone")
        let refused = try a.run(["sync"])
        #expect(refused.status != 0 && refused.stderr.contains("unauthorized") && refused.stderr.contains("chronicle login"), "\(refused.stderr)")
        #expect(try a.ok("status").stdout.contains("1 change"))
        try b.ok("sync")

        let unknown = try admin(["revoke", "--data", data, deviceA])
        #expect(unknown.status == 3 && unknown.stderr.contains("No device \(deviceA) is registered"), "\(unknown.stderr)")
        let bad = try admin(["revoke", "--data", data, "not-an-id"])
        #expect(bad.status == 2 && bad.stderr.contains("revoke takes a device id"), "\(bad.stderr)")

        let changed = try admin(["passwd", "--data", data, "ada"], stdin: "a new long password\n")
        #expect(changed.status == 0 && changed.stdout.contains("Changed ada's password"), "\(changed.stderr)")
        let old = try a.run(["login", "--server", server.url, "--user", "ada"], stdin: password + "\n")
        #expect(old.status == 6 && old.stderr.contains("bad_credentials"), "\(old.stderr)")
        let login = try a.run(["login", "--server", server.url, "--user", "ada"], stdin: "a new long password\n")
        #expect(login.status == 0, "\(login.stderr)")
        try a.ok("sync")
        try b.ok("sync")
        #expect(try b.ok("show", id).stdout.contains("Saved on the lost phone"))

        // --all signs every device out; --revoke-devices with a new password does the same.
        let all = try admin(["passwd", "--data", data, "ada", "--revoke-devices"], stdin: "yet another password\n")
        #expect(all.status == 0 && all.stdout.contains("Revoked 2 devices"), "\(all.stdout)")
        #expect(try b.run(["sync"]).status != 0)
        #expect(try admin(["revoke", "--data", data, "--all", "ada"]).stdout.contains("had no device signed in"))
        #expect(try admin(["devices", "--data", data, "nobody"]).status == 3)
        try expectConverged(server, [a, b], expectedOps: 1)
    }

    /// The operator removes bob beside the running server: his device is refused at once, his
    /// password signs in no more, his library stays on disk owned by no one until the operator
    /// deletes it. ada, removed with her library, leaves nothing behind: the running server deletes
    /// the file. With the server stopped, the command deletes it itself.
    @Test func theOperatorRemovesUsersAndDeletesTheirLibrariesBesideARunningServer() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        let data = server.data
        func admin(_ arguments: [String], stdin: String? = nil) throws -> ToolResult {
            try Tool.exec(Tool.binary, ["server"] + arguments, stdin: stdin)
        }
        func exists(_ library: String) -> Bool { FileManager.default.fileExists(atPath: "\(data)/libraries/\(library).sqlite") }
        #expect(try admin(["add-user", "--data", data, "bob"], stdin: "bob's password\n").status == 0)
        try a.signIn(server)
        try b.signIn(server, user: "bob", password: "bob's password")
        try a.ok("save", "https://example.com/ada", "--title", "Ada's")
        try b.ok("save", "https://example.com/bob", "--title", "Bob's")
        try a.ok("sync")
        try b.ok("sync")
        let bobsLibrary = try #require(try b.credentials["library"] as? String)
        let adasLibrary = try #require(try a.credentials["library"] as? String)

        let removed = try admin(["remove-user", "--data", data, "bob"])
        #expect(removed.status == 0 && removed.stdout.contains("Removed user bob: 1 device signed out")
                && removed.stdout.contains("--library \(bobsLibrary)") && removed.stdout.contains("delete-library"), "\(removed.stdout)\(removed.stderr)")
        let refused = try b.run(["sync"])
        #expect(refused.status != 0 && refused.stderr.contains("unauthorized"), "\(refused.stderr)")
        let login = try b.run(["login", "--server", server.url, "--user", "bob"], stdin: "bob's password\n")
        #expect(login.status == 6 && login.stderr.contains("bad_credentials"), "\(login.stderr)")
        let users = try admin(["users", "--data", data]).stdout
        #expect(users.contains("(no one)") && users.contains(bobsLibrary) && users.contains("ada"), "\(users)")
        #expect(exists(bobsLibrary))

        // Beside the running server, which has both libraries open: it deletes the files.
        let owned = try admin(["delete-library", "--data", data, adasLibrary])
        #expect(owned.status != 0 && owned.stderr.contains("belongs to user ada") && exists(adasLibrary), "\(owned.stderr)")
        let bobsGone = try admin(["delete-library", "--data", data, bobsLibrary])
        #expect(bobsGone.status == 0 && bobsGone.stdout.contains("The running server deleted library \(bobsLibrary)"), "\(bobsGone.stdout)\(bobsGone.stderr)")
        #expect(!exists(bobsLibrary))
        try a.ok("save", "https://example.com/ada/2", "--title", "Ada's second")
        try a.ok("sync")
        let adasGone = try admin(["remove-user", "--data", data, "ada", "--delete-library"])
        #expect(adasGone.status == 0 && adasGone.stdout.contains("the running server deleted library \(adasLibrary)"), "\(adasGone.stdout)\(adasGone.stderr)")
        #expect(!exists(adasLibrary))
        #expect(!FileManager.default.fileExists(atPath: "\(data)/libraries/\(adasLibrary).sqlite-wal"))
        let adaRefused = try a.run(["sync"])
        #expect(adaRefused.status != 0 && adaRefused.stderr.contains("unauthorized"), "\(adaRefused.stderr)")
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        #expect(log.contains("\"library_deleted\"") && log.contains(adasLibrary), "the server logs each deletion")
        // The server goes on serving everyone else.
        #expect(try admin(["add-user", "--data", data, "carl"], stdin: "carl's password\n").status == 0)
        let carl = try Tool()
        try carl.signIn(server, user: "carl", password: "carl's password")
        try carl.ok("save", "https://example.com/carl", "--title", "Carl's")
        try carl.ok("sync")
        let carlsLibrary = try #require(try carl.credentials["library"] as? String)

        // With the server stopped, the command deletes the file itself.
        server.stop()
        let gone = try admin(["remove-user", "--data", data, "carl", "--delete-library"])
        #expect(gone.status == 0 && gone.stdout.contains("library \(carlsLibrary) deleted"), "\(gone.stdout)\(gone.stderr)")
        #expect(!exists(carlsLibrary))
        #expect(try admin(["remove-user", "--data", data, "nobody"]).status == 3)
        #expect(try admin(["delete-library", "--data", data, "not-an-id"]).status == 2)
        #expect(try admin(["delete-library", "--data", data, bobsLibrary]).stderr.contains("There is no library"))
        let left = try admin(["users", "--data", data, "--json"]).stdout
        #expect(!left.contains(bobsLibrary) && !left.contains(adasLibrary) && !left.contains(carlsLibrary), "\(left)")
    }

    @Test func serverKilledMidSyncAndRestartedLosesNothing() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)
        try a.write(1500, prefix: "kill-server")
        let library = try #require(try a.credentials["library"] as? String)
        let sync = try a.startSync(environment: ["CHRONICLE_PUSH_BATCH": "25", "CHRONICLE_SYNC_RETRIES": "40"])
        server.waitForCommitted(library, atLeast: 100)   // the push is under way
        server.kill9()
        usleep(300_000)
        let restarted = try ServerProcess(data: server.data, port: server.port)
        let status = waitForExit(sync, seconds: 120)
        #expect(status == 0, "sync after the server came back: \(String(describing: status))")
        try a.ok("sync")
        try b.ok("sync")
        try expectConverged(restarted, [a, b], expectedOps: 1500)
    }

    @Test func deviceKilledMidPushAndRestartedLosesNothing() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)
        try a.write(1500, prefix: "kill-device")
        let library = try #require(try a.credentials["library"] as? String)
        for reached in [100, 700] {
            let sync = try a.startSync(environment: ["CHRONICLE_PUSH_BATCH": "25"])
            server.waitForCommitted(library, atLeast: reached)   // killed mid-push
            sync.signal(SIGKILL)
            sync.wait()
        }
        try a.ok("verify")
        try a.ok("sync")
        try b.ok("sync")
        try expectConverged(server, [a, b], expectedOps: 1500)
    }

    @Test func aServerAnswering503AtRandomStillConverges() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a, fault503Rate: 0.3)
        try a.signIn(server)
        try b.signIn(server)
        try a.write(300, prefix: "flaky-a")
        try b.write(300, prefix: "flaky-b")
        let environment = ["CHRONICLE_PUSH_BATCH": "20", "CHRONICLE_SYNC_RETRIES": "200"]
        for tool in [a, b, a, b] {
            let result = try tool.run(["sync"], environment: environment)
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        }
        try expectConverged(server, [a, b], expectedOps: 600)
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        #expect(log.components(separatedBy: #""status":503"#).count > 5, "the server answered 503s")
    }

    @Test func watchKeepsADeviceCurrentAndTheServerLogsOneJSONObjectALine() throws {
        let a = try Tool(), b = try Tool()
        let server = try server(a)
        try a.signIn(server)
        try b.signIn(server)
        let watch = try ChildProcess(Tool.binary.path, ["sync", "--watch"],
                                     environment: ProcessInfo.processInfo.environment.merging(["CHRONICLE_STORE": b.store]) { $1 })
        let id = try a.id("save", "https://example.com/watched", "--title", "Seen without asking")
        try a.ok("sync")
        let deadline = Date().addingTimeInterval(120)   // a hang detector, not a timing test
        var seen = false
        while !seen && Date() < deadline {
            seen = (try? b.run("show", id).status) == 0
            if !seen { usleep(50_000) }
        }
        #expect(seen, "sync --watch pulled A's article")
        watch.terminate()
        #expect(waitForExit(watch, seconds: 30) == 0, "SIGTERM stops --watch cleanly")

        server.stop()
        let lines = try String(contentsOfFile: server.logPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 4)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["event"] is String && object?["ts"] != nil, "not a JSON log line: \(line)")
        }
        #expect(lines.contains { $0.contains(#""event":"push""#) })
    }

    @Test func demoRunsTheAirplaneTestAndEndsConverged() throws {
        let result = try Tool.exec(Tool.binary, ["demo"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Offline — "))
        #expect(result.stdout.contains("All equal: no conflict dialogs, nothing lost, nothing applied twice."))
        #expect(result.stdout.contains("1 file (3 MB) waiting to upload") && result.stdout.contains("Uploaded 1 file"), "\(result.stdout)")
        #expect(result.stdout.contains("byte for byte the phone's"), "\(result.stdout)")
        // The server read the saved pages: a title taken from the page, and word counts on both devices.
        #expect(result.stdout.contains("· Write-Ahead Logging [databases, wal] (30 words, read 80%)"), "\(result.stdout)")
        #expect(result.stdout.contains("· Offline-first, explained [sync] (26 words)"), "\(result.stdout)")
    }
}
