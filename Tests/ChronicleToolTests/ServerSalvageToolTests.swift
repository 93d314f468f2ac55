import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// `chronicle server salvage`: refused while a server runs on the data directory (so is a second
/// server), and a library whose log cannot be read at all comes back whole from the device that
/// wrote it.
@Suite(.serialized) struct ServerSalvageToolTests {
    @Test func aLibraryWhoseLogIsUnreadableIsSalvagedAndTheDeviceGivesItsOpsBack() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        let server = try ServerProcess(data: data)
        defer { server.stop() }
        try t.signIn(server)
        try t.write(400, prefix: "before")
        try t.ok("sync")
        let library = try #require(try t.credentials["library"] as? String)

        // One server per data directory, and no salvage beside it.
        let second = try Tool.exec(Tool.binary, ["serve", "--data", data, "--port", "0"])
        #expect(second.status == 4 && second.stderr.contains("[data_directory_in_use]") && second.stderr.contains("chronicle serve"),
                "\(second.stderr)")
        let beside = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada"])
        #expect(beside.status == 4 && beside.stderr.contains("[data_directory_in_use]"), "\(beside.stderr)")

        // Verified beside the running server.
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "ada"])
        #expect(verified.status == 0 && verified.stdout.contains("ok   digest equals a replay of the log") && verified.stdout.contains("400 ops"),
                "\(verified.stdout)\(verified.stderr)")

        server.stop()
        let path = "\(data)/libraries/\(library).sqlite"
        try Tool.breakRootPage(of: "chronicle_log", in: path)
        let failed = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all", "--json"])
        #expect(failed.status == 1, "\(failed.stdout)\(failed.stderr)")
        let all = try failed.object()
        #expect((all["accounts"] as? [String: Any])?["passed"] as? Bool == true, "\(all)")
        let checks = try #require(all["libraries"] as? [[String: Any]]).first?["checks"] as? [[String: Any]] ?? []
        #expect(checks.contains { $0["passed"] as? Bool == false && ($0["detail"] as? String ?? "").contains("chronicle server salvage") }, "\(checks)")
        let dry = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--dry-run"])
        #expect(dry.status == 1 && dry.stdout.contains("History kept through seq 0 of 400") && dry.stdout.contains("dry run"),
                "\(dry.stdout)\(dry.stderr)")
        let salvaged = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--json"])
        #expect(salvaged.status == 1, "\(salvaged.stderr)")
        let report = try salvaged.object()
        #expect(report["head_before"] as? Int == 400 && report["head_kept"] as? Int == 0 && report["lost_nothing"] as? Bool == false)
        #expect(FileManager.default.fileExists(atPath: try #require(report["damaged_path"] as? String)))

        // The server again, at the same address: the device finds it holds nothing of what it had
        // and sends its 400 ops again, with two more written since.
        let restarted = try ServerProcess(data: data, port: server.port)
        defer { restarted.stop() }
        try t.write(2, prefix: "after")
        let back = try t.run(["sync"])
        #expect(back.status == 0, "\(back.stdout)\(back.stderr)")
        let other = try Tool()
        try other.signIn(restarted)
        try other.ok("sync")
        restarted.stop()
        let ops = try restarted.library(library).allOps()
        #expect(ops.count == 402 && Set(ops.map(\.opID)).count == 402, "every op the device wrote, once: \(ops.count)")
        #expect(ops.map(\.deviceSeq) == Array(1...402), "in the order it wrote them")
        let digest = try restarted.library(library).digest()
        #expect(try DeviceStore.open(at: t.store).digest() == digest && DeviceStore.open(at: other.store).digest() == digest)
        #expect(try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all"]).stdout.contains("All 1 libraries passed."))
        #expect(try Tool.exec(Tool.binary, ["server", "--help"]).stdout.contains("salvage keeps what can still be read"))
    }

    /// A files file none of whose chunks can be read: `server salvage NAME --files` keeps the
    /// files' rows it can check (none whole), and the phone that added the photo sends it again.
    @Test func aFilesFileWhoseChunksAreUnreadableIsSalvagedAndThePhoneSendsThemAgain() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        let server = try ServerProcess(data: data)
        defer { server.stop() }
        try t.signIn(server)
        let photo = t.directory.appendingPathComponent("site.jpg").path
        let bytes = Data((0..<2_500_000).map { UInt8(truncatingIfNeeded: $0 &* 7 >> 3) })
        try bytes.write(to: URL(fileURLWithPath: photo))
        let ref = try t.ok("blob", "add", photo).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try t.id("op", "episode.save", "--payload", "{\"title\":\"Site visit\",\"audio_ref\":\"\(ref)\"}")
        try t.ok("sync")
        let library = try #require(try t.credentials["library"] as? String)
        server.stop()

        let whole = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "ada"])
        #expect(whole.status == 0 && whole.stdout.contains("ok   files (blobs/\(library).sqlite) whole and matching their addresses: 1 file, 2500000 bytes"),
                "\(whole.stdout)\(whole.stderr)")
        try Tool.breakRootPage(of: "chronicle_blob_chunks", in: "\(data)/blobs/\(library).sqlite")
        let broken = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "ada"])
        #expect(broken.status == 1 && broken.stdout.contains("FAIL files") && broken.stdout.contains("salvage --data \(data) ada --files"),
                "\(broken.stdout)\(broken.stderr)")
        let dry = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--files", "--dry-run"])
        #expect(dry.status == 1 && dry.stdout.contains("dropped: 1") && dry.stdout.contains("dry run"), "\(dry.stdout)\(dry.stderr)")
        let salvaged = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "ada", "--files", "--json"])
        #expect(salvaged.status == 1, "\(salvaged.stderr)")
        let report = try salvaged.object()
        #expect(report["files_dropped"] as? Int == 1 && report["files_kept"] as? Int == 0, "\(report)")
        #expect(FileManager.default.fileExists(atPath: try #require(report["damaged_path"] as? String)))

        let restarted = try ServerProcess(data: data, port: server.port)
        defer { restarted.stop() }
        let back = try t.run(["sync"])
        #expect(back.status == 0 && back.stdout.contains("Uploaded 1 file"), "\(back.stdout)\(back.stderr)")
        let other = try Tool()
        try other.signIn(restarted)
        try other.ok("sync")
        let out = other.directory.appendingPathComponent("site.jpg").path
        try other.ok("blob", "get", ref, "--to", out)
        #expect(FileManager.default.contents(atPath: out) == bytes)
        #expect(try Tool.exec(Tool.binary, ["server", "--help"]).stdout.contains("salvage NAME --files"))
    }
}

/// `chronicle server salvage --accounts`: a server.sqlite whose users cannot be read is answered
/// 503 (the devices keep what they hold), salvaged, and each library given back to its user with
/// `add-user --library`, its history whole; the devices sign in again and sync.
@Suite(.serialized) struct AccountsSalvageToolTests {
    @Test func usersLostAreGivenTheirLibrariesBackAndTheirDevicesSignInAgain() throws {
        let ada = try Tool(), bob = try Tool()
        let data = ada.directory.appendingPathComponent("server").path
        for name in ["ada", "bob"] {
            _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, name], stdin: "password123\n")
        }
        let server = try ServerProcess(data: data)
        try ada.signIn(server)
        try bob.signIn(server, user: "bob")
        try ada.write(30, prefix: "ada")
        try bob.write(12, prefix: "bob")
        try ada.ok("sync")
        try bob.ok("sync")
        server.stop()
        let libraries = [try #require(try ada.credentials["library"] as? String), try #require(try bob.credentials["library"] as? String)]
        try Tool.breakRootPage(of: "users", in: "\(data)/server.sqlite")

        let users = try Tool.exec(Tool.binary, ["server", "users", "--data", data])
        #expect(users.status == 4 && users.stderr.contains("[store_damaged]") && users.stderr.contains("server salvage --data \(data) --accounts"),
                "\(users.stderr)")
        let verified = try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all"])
        #expect(verified.status == 4 && verified.stderr.contains("server salvage --data \(data) --accounts"), "\(verified.stdout)\(verified.stderr)")
        let damaged = try ServerProcess(data: data, port: server.port)
        try ada.write(3, prefix: "waiting")
        let waiting = try ada.run(["sync"])
        #expect(waiting.status == 5 && waiting.stderr.contains("accounts_damaged"), "told to wait, not signed out: \(waiting.stdout)\(waiting.stderr)")
        let newcomer = try Tool()
        try newcomer.ok("init")
        let login = try newcomer.run(["login", "--server", damaged.url, "--user", "ada"], stdin: "password123\n")
        #expect(login.status != 0 && login.stderr.contains("accounts_damaged") && !login.stderr.contains("500"), "\(login.stderr)")
        let beside = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "--accounts"])
        #expect(beside.status == 4 && beside.stderr.contains("[data_directory_in_use]"), "\(beside.stderr)")
        damaged.stop()
        // The request log says which 503 it was.
        let logged = try String(contentsOfFile: damaged.logPath, encoding: .utf8).split(separator: "\n")
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(logged.contains { $0["event"] as? String == "request" && $0["status"] as? Int == 503 && $0["code"] as? String == "accounts_damaged" },
                "\(logged)")

        let salvaged = try Tool.exec(Tool.binary, ["server", "salvage", "--data", data, "--accounts", "--json"])
        #expect(salvaged.status == 1, "\(salvaged.stdout)\(salvaged.stderr)")
        let report = try salvaged.object()
        #expect(report["users_kept"] as? Int == 0 && report["devices_kept"] as? Int == 0 && report["rows_dropped"] as? Int == 2, "\(report)")
        let unowned = try #require(report["unowned_libraries"] as? [[String: Any]])
        #expect(Set(unowned.compactMap { $0["library_id"] as? String }) == Set(libraries))
        #expect(Set(unowned.compactMap { $0["former_user"] as? String }) == ["ada", "bob"])
        #expect(unowned.allSatisfy { $0["schema"] as? String == "readitlater" })

        // Given back: refused for the wrong schema or a library that has its user, then done.
        let adaLibrary = try #require(unowned.first { $0["former_user"] as? String == "ada" })
        let command = try #require(adaLibrary["give_back"] as? String)
        #expect(command == "chronicle server add-user --data \(data) ada --library \(libraries[0]) --schema readitlater")
        let wrong = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada", "--library", libraries[0], "--schema", "fieldservice"],
                                  stdin: "password123\n")
        #expect(wrong.status == 4 && wrong.stderr.contains("[schema_mismatch]"), "\(wrong.stderr)")
        for (name, library) in zip(["ada", "bob"], libraries) {
            let added = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, name, "--library", library], stdin: "password123\n")
            #expect(added.status == 0 && added.stdout.contains(library), "\(added.stderr)")
        }
        let taken = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "cy", "--library", libraries[1]], stdin: "password123\n")
        #expect(taken.status == 3 && taken.stderr.contains("already belongs to user bob"), "\(taken.stderr)")

        // The devices' registrations went with their users: each signs in again and syncs.
        let restarted = try ServerProcess(data: data, port: server.port)
        defer { restarted.stop() }
        let signedOut = try ada.run(["sync"])
        #expect(signedOut.status == 6, "\(signedOut.stdout)\(signedOut.stderr)")
        for (tool, name) in [(ada, "ada"), (bob, "bob")] {
            let login = try tool.run(["login", "--server", restarted.url, "--user", name], stdin: "password123\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        try ada.ok("sync")
        try bob.ok("sync")
        restarted.stop()
        #expect(try restarted.library(libraries[0]).allOps().count == 33 && restarted.library(libraries[1]).allOps().count == 12)
        #expect(try DeviceStore.open(at: ada.store).digest() == restarted.library(libraries[0]).digest())
        #expect(try DeviceStore.open(at: bob.store).digest() == restarted.library(libraries[1]).digest())
        #expect(try Tool.exec(Tool.binary, ["server", "verify", "--data", data, "--all"]).stdout.contains("All 2 libraries passed."))
    }
}
