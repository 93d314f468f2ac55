import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// `chronicle server backup`: a copy of a running server's data directory that another
/// server starts on, holding every op synced before it; and the refusals around it.
@Suite(.serialized) struct ServerBackupToolTests {
    @Test func aBackupTakenWhileTheServerRunsServesEveryOpSyncedBeforeIt() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        let server = try ServerProcess(data: data)
        defer { server.stop() }
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        try t.signIn(server)
        try t.write(300, prefix: "before")
        // A file synced before the backup: the backup holds it.
        let photo = t.directory.appendingPathComponent("photo.bin").path
        let bytes = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 10) }
        try Data(bytes).write(to: URL(fileURLWithPath: photo))
        let ref = try t.run(["blob", "add", photo]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try t.ok("sync")
        let digestAtBackup = try DeviceStore.open(at: t.store).digest()

        // A sync running while the backup is taken: the server goes on answering.
        try t.write(200, prefix: "during")
        let during = try t.startSync()
        let backupDirectory = t.directory.appendingPathComponent("backup").path
        let backup = try Tool.exec(Tool.binary, ["server", "backup", "--data", data, "--to", backupDirectory, "--json"])
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(waitForExit(during, seconds: 60) == 0)
        let report = try backup.object()
        #expect(report["libraries"] as? Int == 1 && report["blob_files"] as? Int == 1 && (report["bytes"] as? Int ?? 0) > 0)
        let names = try FileManager.default.contentsOfDirectory(atPath: backupDirectory + "/libraries")
        #expect(names.count == 1 && names.allSatisfy { $0.hasSuffix(".sqlite") }, "no partial files: \(names)")
        try t.write(50, prefix: "after")
        try t.ok("sync")

        // A second server on the copy: a device signing in there gets the library as of the backup
        // (the 300 ops synced before it, and those of the sync running alongside that it caught).
        let (restored, other) = try restore(server, from: backupDirectory)
        defer { restored.stop() }
        try other.ok("sync")
        let copy = try DeviceStore.open(at: other.store)
        let cursor = try copy.cursor()
        #expect(cursor >= 300 && cursor <= 500, "cursor \(cursor)")
        if cursor == 300 { #expect(try copy.digest() == digestAtBackup) }
        try other.ok("verify")
        let out = other.directory.appendingPathComponent("photo.out").path
        #expect(try other.run(["blob", "get", ref, "--to", out]).status == 0)
        #expect(FileManager.default.contents(atPath: out) == Data(bytes), "the backup holds the file")

        // The first device synced past the backup (550 ops, all its own) and queued five more.
        // Against the restored server (same address) it goes back to what that server holds and
        // sends its own ops the server lost again: nothing it wrote is lost.
        try t.write(5, prefix: "queued")
        let back = try t.run(["sync"])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(back.stdout.contains("The server no longer holds what this store had from it after seq \(cursor)"), "\(back.stdout)")
        let ops = try expectLevel(t, other, restored)
        #expect(ops.count == 555 && Set(ops.map(\.opID)).count == 555, "every op the device wrote, once: \(ops.count)")
        #expect(ops.map(\.deviceSeq) == Array(1...555), "in the order it wrote them")
    }

    /// Stops `server` and starts one on the backup at `directory`, at the same address, with a
    /// new device signed in to it.
    func restore(_ server: ServerProcess, from directory: String) throws -> (ServerProcess, Tool) {
        server.stop()
        let restored = try ServerProcess(data: directory, port: server.port)
        let other = try Tool()
        try other.signIn(restored)
        return (restored, other)
    }

    /// After `device` came back to `restored`: it verifies, `other` syncs, and both end on the
    /// server's digest with nothing queued. Returns the server's log (with the server stopped).
    func expectLevel(_ device: Tool, _ other: Tool, _ restored: ServerProcess,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> [Op] {
        try device.ok("verify")
        try other.ok("sync")
        restored.stop()
        let library = try restored.library(try #require(try device.credentials["library"] as? String))
        for store in [device.store, other.store] {
            let opened = try DeviceStore.open(at: store)
            #expect(try opened.pendingOps().isEmpty, sourceLocation: sourceLocation)
            #expect(try opened.digest() == library.digest(), sourceLocation: sourceLocation)
        }
        return try library.allOps()
    }

    /// Which history is sealed when the device comes back (compacted, keeping no op hot).
    enum Sealed: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case neither, server, both
        var testDescription: String { rawValue }
    }

    /// The restored server took other ops past the first device's cursor before it came back:
    /// its cursor is no longer ahead, but the op the server holds there is another one. The device
    /// finds where the two agree, goes back there and sends its own ops again. Where the restored
    /// server's history is sealed, the op at the device's cursor is found among its sealed op ids;
    /// where the device's is too, the device reads its side of the comparison from its segments.
    @Test(arguments: Sealed.allCases) func aDeviceBehindARestoredServerThatMovedOnFindsWhereTheyAgree(sealed: Sealed) throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        let server = try ServerProcess(data: data)
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        try t.signIn(server)
        try t.write(20, prefix: "before")
        try t.ok("sync")
        let backupDirectory = t.directory.appendingPathComponent("backup").path
        #expect(try Tool.exec(Tool.binary, ["server", "backup", "--data", data, "--to", backupDirectory]).status == 0)
        try t.write(10, prefix: "after")
        try t.ok("sync")
        if sealed == .both { try t.ok("compact", "--keep-ops", "0") }
        let (restored, other) = try restore(server, from: backupDirectory)
        defer { restored.stop() }
        try other.write(15, prefix: "other")
        try other.ok("sync")                        // the restored server's head: 35, past t's cursor 30
        if sealed != .neither {
            let compacted = try Tool.exec(Tool.binary, ["server", "compact", "--data", backupDirectory, "ada", "--keep-ops", "0", "--json"])
            #expect(compacted.status == 0, "\(compacted.stderr)")
        }
        try t.write(2, prefix: "queued")
        let back = try t.run(["sync"])
        #expect(back.status == 0, "\(back.stderr)")
        // A sealed device's one segment (seqs 1-30) spans the point where the two agree: it goes whole.
        let wentBack = sealed == .both ? "went back to seq 0, let go of 30 ops" : "went back to seq 20, let go of 10 ops"
        #expect(back.stdout.contains("after seq 20 (its data restored from a backup): this store \(wentBack)"), "\(back.stdout)")
        let ops = try expectLevel(t, other, restored)
        let mine = try DeviceStore.open(at: t.store).deviceID
        #expect(ops.count == 47 && Set(ops.map(\.opID)).count == 47, "\(ops.count) ops")
        #expect(ops.filter { $0.deviceID == mine }.map(\.deviceSeq) == Array(1...32), "every op t wrote, once, in its order")
    }

    @Test func aBackupNeverWritesOverAnythingAndSaysWhy() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        let taken = t.directory.appendingPathComponent("taken").path
        try FileManager.default.createDirectory(atPath: taken, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: taken + "/notes.txt"))
        let cases: [([String], Int32, String)] = [
            (["--data", data, "--to", taken], 4, "already exists and is not empty"),
            (["--data", t.directory.appendingPathComponent("nothing").path, "--to", taken + "-2"], 4, "is not a Chronicle server's data directory"),
            (["--data", data, "--to", data + "/inside"], 2, "must go outside the data directory"),
            (["--data", data], 2, "--to DEST is required"),
        ]
        for (arguments, status, message) in cases {
            let result = try Tool.exec(Tool.binary, ["server", "backup"] + arguments)
            #expect(result.status == status, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        #expect(try String(contentsOfFile: taken + "/notes.txt", encoding: .utf8) == "keep me")
        #expect(try FileManager.default.contentsOfDirectory(atPath: taken) == ["notes.txt"])
        // An empty directory is fine.
        let empty = t.directory.appendingPathComponent("empty").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let ok = try Tool.exec(Tool.binary, ["server", "backup", "--data", data, "--to", empty])
        #expect(ok.status == 0 && ok.stdout.contains("Backed up server.sqlite"), "\(ok.stderr)")
    }
}
