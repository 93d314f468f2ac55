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
        let digest = try DeviceStore.open(at: t.store).digest()
        let dry = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--dry-run")
        #expect(dry.stdout.contains("Seal seqs 1…800 (800 ops) into 3 segments; 100 ops stay hot."))
        #expect(dry.stdout.contains("(dry run: nothing was changed)"))
        #expect(try DeviceStore.open(at: t.store).segments().isEmpty)
        let run = try t.ok("compact", "--keep-ops", "100", "--segment-ops", "300", "--json")
        let report = try run.object()
        #expect(report["ops_sealed"] as? Int == 800 && report["segments_written"] as? Int == 3)
        #expect((report["compression_ratio"] as? Double ?? 0) > 2)
        #expect(try DeviceStore.open(at: t.store).digest() == digest)
        try t.ok("verify")
        let log = try t.ok("log", "--json").stdout
        #expect(log.contains("\"server_seq\":1,") || log.contains("\"server_seq\" : 1"), "the log command reads sealed segments")
        let genesis = try t.ok("rebuild", "--verify", "--from-genesis")
        #expect(genesis.stdout.contains("Verified"))
        try t.ok("rebuild", "--verify")
    }

    @Test func killedAfterEachStepTheStoreOpensWhole() throws {
        let (t, server) = try syncedStore(700)
        defer { server.stop() }
        let digest = try DeviceStore.open(at: t.store).digest()
        // Steps: 3 segments, the snapshot, the VACUUM.
        for step in 1...5 {
            let copy = t.directory.appendingPathComponent("copy-\(step).chronicle").path
            try FileManager.default.copyItem(atPath: t.store, toPath: copy)
            if FileManager.default.fileExists(atPath: t.store + "-wal") {   // committed pages may still be in the WAL
                try FileManager.default.copyItem(atPath: t.store + "-wal", toPath: copy + "-wal")
            }
            let killed = try Tool.exec(Tool.binary, ["compact", "--keep-ops", "50", "--segment-ops", "250"],
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
}
