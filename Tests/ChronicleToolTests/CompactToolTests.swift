import ChronicleCore
import ChronicleStore
import Foundation
import Testing

/// `chronicle compact` as people run it: a dry run, the summary, and a process killed
/// after every step leaving a store that opens with the same digest.
@Suite(.serialized) struct CompactToolTests {
    /// A signed-in store with `count` confirmed ops (through a real server).
    func syncedStore(_ count: Int) throws -> (Tool, ServerProcess) {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        let server = try ServerProcess(data: data)
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        try t.signIn(server)
        try t.write(count, prefix: "compact")
        try t.ok("sync")
        return (t, server)
    }

    @Test func dryRunSummaryAndReadingAcrossSegments() throws {
        let (t, server) = try syncedStore(900)
        defer { server.stop() }
        // Synced, nothing pending: the snapshot would be read from the tables at the head.
        let atHead = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--dry-run")
        #expect(atHead.stdout.contains("Write a snapshot of the state at the head (seq 900 now), read from the tables as they are."), "\(atHead.stdout)")
        // One op written offline: it is replayed to the seal point instead.
        try t.write(1, prefix: "offline")
        let digest = try DeviceStore.open(at: t.store).digest()
        let dry = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--dry-run")
        #expect(dry.stdout.contains("Seal seqs 1…800 (800 ops) into 3 segments; 100 ops stay hot."))
        #expect(dry.stdout.contains("Write a snapshot of the state at seq 800."), "\(dry.stdout)")
        #expect(dry.stdout.contains("(dry run: nothing was changed)"))
        #expect(try DeviceStore.open(at: t.store).segments().isEmpty)
        let run = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--json")
        let report = try run.object()
        #expect(report["ops_sealed"] as? Int == 800 && report["segments_written"] as? Int == 3)
        #expect((report["compression_ratio"] as? Double ?? 0) > 2)
        // The snapshot would have made the store larger than it was: left out, and said so.
        #expect((report["snapshot_left_out_bytes"] as? Int ?? 0) > 0 && report["snapshot_seq"] is NSNull, "\(report)")
        #expect((report["file_bytes_after"] as? Int ?? .max) <= (report["file_bytes_before"] as? Int ?? 0))
        // Asked for, it is written, whatever it costs.
        let kept = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--keep-snapshot")
        #expect(kept.stdout.contains("Snapshot of the state at seq 800"), "\(kept.stdout)")
        #expect(try DeviceStore.open(at: t.store).digest() == digest)
        try t.ok("verify")
        let log = try t.ok("log", "--json").stdout
        #expect(log.contains("\"server_seq\":1,") || log.contains("\"server_seq\" : 1"), "the log command reads sealed segments")
        let genesis = try t.ok("rebuild", "--verify", "--from-genesis")
        #expect(genesis.stdout.contains("Verified") && genesis.stdout.contains("Rebuilt from 900 confirmed"), "\(genesis.stdout)")
        // By default from the snapshot at the seal point (read from its row as it decodes), then the 100 hot ops.
        let fromSnapshot = try t.ok("rebuild", "--verify")
        #expect(fromSnapshot.stdout.contains("Rebuilt from the snapshot at seq 800, then 100 confirmed and 1 pending ops"), "\(fromSnapshot.stdout)")
        let json = try t.run("rebuild", "--json").object()
        #expect(json["from_snapshot_seq"] as? Int == 800 && json["confirmed_ops"] as? Int == 100)
    }

    @Test func killedAfterEachStepTheStoreOpensWhole() throws {
        let (t, server) = try syncedStore(700)
        defer { server.stop() }
        let digest = try DeviceStore.open(at: t.store).digest()
        // Steps: 3 segments, the snapshot (kept, as asked), the VACUUM.
        for step in 1...5 {
            let copy = t.directory.appendingPathComponent("copy-\(step).chronicle").path
            try FileManager.default.copyItem(atPath: t.store, toPath: copy)
            if FileManager.default.fileExists(atPath: t.store + "-wal") {   // committed pages may still be in the WAL
                try FileManager.default.copyItem(atPath: t.store + "-wal", toPath: copy + "-wal")
            }
            let killed = try Tool.exec(Tool.binary, ["compact", "--keep-ops", "50", "--segment-ops", "250", "--keep-snapshot"],
                                       environment: ["CHRONICLE_STORE": copy, "CHRONICLE_COMPACT_STOP_AFTER_STEP": String(step)])
            #expect(killed.status == 137, "step \(step): \(killed.stderr)")
            let store = try DeviceStore.open(at: copy)
            #expect(try store.digest() == digest, "killed after step \(step)")
            #expect(try store.verify().passed, "killed after step \(step)")
            let finished = try Tool.exec(Tool.binary, ["compact", "--keep-ops", "50", "--segment-ops", "250"], environment: ["CHRONICLE_STORE": copy])
            #expect(finished.status == 0)
            #expect(try DeviceStore.open(at: copy).digest() == digest)
        }
    }

    /// `chronicle serve` compacts a library that took pushes on its own, says so in its log,
    /// and a device that signs in afterwards still gets every op.
    @Test func theServerCompactsOnItsOwnAndANewDeviceStillGetsEverything() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        let server = try ServerProcess(data: data, arguments: ["--compact-keep-ops", "100", "--compact-segment-ops", "250",
                                                                     "--compact-snapshot-ops", "400", "--compact-every", "0.05"])
        defer { server.stop() }
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", data, "ada"], stdin: "password123\n")
        try t.signIn(server)
        try t.write(620, prefix: "auto")
        try t.ok("sync")
        // 520 ops lie past the 100 kept hot once the sync is done (the pushes came in pages, so a pass
        // may have sealed part of them already): two whole segments end up sealed, with a snapshot of the
        // head when the last pass ran (600 ops in at least); none when a pass sealed only the first
        // (250 ops past no snapshot, fewer than 400).
        func compactions() -> [[String: Any]] {
            let text = (try? String(contentsOfFile: server.logPath, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            }.filter { $0["event"] as? String == "compact" }
        }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && compactions().reduce(0, { $0 + ($1["sealed"] as? Int ?? 0) }) < 500 { usleep(50_000) }
        let done = compactions()
        #expect(done.reduce(0, { $0 + ($1["sealed"] as? Int ?? 0) }) == 500, "\(done)")
        #expect(done.reduce(0, { $0 + ($1["segments"] as? Int ?? 0) }) == 2, "\(done)")
        #expect(done.allSatisfy { $0["auto"] as? Bool == true }, "\(done)")
        #expect((600...620).contains(done.last?["snapshot_seq"] as? Int ?? 0), "\(done)")
        #expect(done.dropLast().allSatisfy { $0["snapshot_seq"] is NSNull }, "\(done)")

        // Not necessarily the first line: a data directory made by the test 0755 is narrowed (and logged) first.
        let listening = try #require(try String(contentsOfFile: server.logPath, encoding: .utf8).split(separator: "\n")
            .first { $0.contains("\"event\":\"listening\"") })
        #expect(listening.contains("\"event\":\"listening\"") && listening.contains("\"compact_keep_ops\":100")
                && listening.contains("\"compact_segment_ops\":250")
                && listening.contains("\"compact_snapshot_ops\":400") && listening.contains("\"horizon_ms\":null"), "\(listening)")

        let other = try Tool()
        try other.signIn(server)
        try other.ok("sync")
        #expect(try DeviceStore.open(at: other.store).digest() == DeviceStore.open(at: t.store).digest())
        #expect(try DeviceStore.open(at: other.store).cursor() == 620)
        try other.ok("verify")
    }

    /// `chronicle server compact --all` compacts every library (while the server runs), each
    /// answered on its own; a device that signs in afterwards still gets every op.
    @Test func serverCompactAllDoesEveryLibrary() throws {
        let (ada, server) = try syncedStore(300)
        defer { server.stop() }
        _ = try Tool.exec(Tool.binary, ["server", "add-user", "--data", server.data, "bob"], stdin: "password456\n")
        let bob = try Tool()
        try bob.ok("init")
        let login = try bob.run(["login", "--server", server.url, "--user", "bob"], stdin: "password456\n")
        #expect(login.status == 0, "\(login.stderr)")
        try bob.write(120, prefix: "bob")
        try bob.ok("sync")

        let run = try Tool.exec(Tool.binary, ["server", "compact", "--data", server.data, "--all", "--keep-ops", "20", "--json"])
        #expect(run.status == 0, "\(run.stderr)")
        let parsed = try run.json()
        let reports = try #require(parsed as? [[String: Any]], "\(run.stdout)")
        var sealed: [String: Int] = [:]
        for report in reports { sealed[report["user"] as? String ?? "?"] = report["ops_sealed"] as? Int ?? -1 }
        #expect(sealed == ["ada": 280, "bob": 100])

        let text = try Tool.exec(Tool.binary, ["server", "compact", "--data", server.data, "--all"])
        #expect(text.status == 0 && text.stdout.contains("Sealed 0 ops of ada's library"), "\(text.stdout) \(text.stderr)")
        #expect(try Tool.exec(Tool.binary, ["server", "compact", "--data", server.data]).status == 2, "a user name or --all")

        let other = try Tool()
        try other.signIn(server)
        try other.ok("sync")
        #expect(try DeviceStore.open(at: other.store).digest() == DeviceStore.open(at: ada.store).digest())
        try other.ok("verify")
    }

    /// A SIGTERM sent the moment the "listening" line appears stops the server: it used to land
    /// before the handlers existed and was ignored, leaving the server running (seen in CI).
    @Test func aStopRightAfterTheListeningLineStopsTheServer() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        for round in 0..<10 {
            let server = try ServerProcess(data: data, arguments: round % 2 == 0 ? ["--no-compact"] : [])
            server.process.terminate()
            #expect(waitForExit(server.process, seconds: 15) == 0, "round \(round): the server did not stop on SIGTERM")
        }
    }

    @Test func serveRefusesBadCompactionOptionsWithASentence() throws {
        let t = try Tool()
        let data = t.directory.appendingPathComponent("server").path
        for (arguments, message) in [(["--compact-keep-ops", "many"], "--compact-keep-ops takes a whole number"),
                                     (["--compact-keep-days", "0"], "--compact-keep-days takes a whole number from 1"),
                                     (["--horizon-days", "-1"], "--horizon-days takes a whole number from 1"),
                                     (["--compact-every", "never"], "--compact-every takes seconds"),
                                     (["--compact-segment-ops", "20000"], "--compact-segment-ops takes a whole number from 1 to 10000"),
                                     (["--compact-snapshot-ops", "0"], "--compact-snapshot-ops takes a whole number from 1"),
                                     (["--compact-every"], "--compact-every needs a value"),
                                     (["--body-memory-mb", "8"], "--body-memory-mb takes 16 to 65536"),
                                     (["--body-memory-mb", "lots"], "--body-memory-mb takes 16 to 65536"),
                                     (["--open-libraries", "0"], "--open-libraries takes 1 to 1000000"),
                                     (["--fetch-articles", "--fetch-ca-file", "/nonexistent/ca.pem"], "--fetch-ca-file: /nonexistent/ca.pem is not a readable file")] {
            let result = try t.run(["serve", "--data", data, "--port", "0"] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        let off = try ServerProcess(data: data, arguments: ["--no-compact"])
        off.stop()
        let offLog = try String(contentsOfFile: off.logPath, encoding: .utf8)
        #expect(offLog.contains("\"compact\":\"off\""), "\(offLog)")
        let help = try t.ok("serve", "--help")
        #expect(help.stdout.contains("--horizon-days D") && help.stdout.contains("--no-compact")
                && help.stdout.contains("--compact-snapshot-ops"))
        // The request caps, with the server's defaults.
        #expect(help.stdout.contains("a body over 16 MiB\n(413 body_too_large), more than 1,000 ops in a push"), "\(help.stdout)")
        #expect(help.stdout.contains("--body-memory-mb (default\n256, at least the body cap)") && help.stdout.contains("503 server_busy"), "\(help.stdout)")
        // A budget the server takes: it starts and answers.
        let roomy = try ServerProcess(data: data, arguments: ["--no-compact", "--body-memory-mb", "16", "--open-libraries", "7"])
        roomy.stop()
        // The first line says how many libraries it keeps open, and the limit of open files it raised.
        let roomyLog = try String(contentsOfFile: roomy.logPath, encoding: .utf8)
        #expect(roomyLog.contains("\"open_libraries_max\":7") && roomyLog.contains("\"open_files_max\":"), "\(roomyLog)")
        #expect(help.stdout.contains("--open-libraries"))
        #expect(help.stdout.contains("[--fetch-ca-file PEM]") && help.stdout.contains("(rebinding)"), "\(help.stdout)")
    }
}
