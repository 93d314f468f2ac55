import CSQLite
import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import ChronicleTesting
import Foundation
import ChronicleServerStore

/// Measurement 3 of the lifecycle: a new device onto an N-op library, end to end over
/// loopback HTTP against a real `SyncServer`. The server's library is filled with
/// `ServerLibrary.importConfirmed` (the fast path; the ops are already ordered) and
/// compacted with `ServerLibrary.compact` (keepOps 10,000), which writes the snapshot. Then,
/// each in a fresh child process (so its peak RSS, `VmHWM`, is its own):
///
/// - the device with the engine's default configuration: its first pull page advertises
///   the snapshot, so it downloads it, starts the store from it, and pulls the tail;
/// - the baseline, the same device with `snapshotStartOpsMin` = Int64.max: it pulls and
///   folds the whole log (bulk catch-up; the server reads its sealed segments).
///
/// Both must end with the server's state digest.
extension LifecycleBenchmark {
    struct BootstrapResult {
        var ops: Int
        var importSeconds: Double
        var server: CompactionReport
        /// The server's snapshot step alone (from the last segment's commit to the snapshot's).
        var serverSnapshotSeconds: Double
        /// This process's resident memory just before that step and its peak during it (KiB;
        /// the peak is reset before the step, so it is the step's own).
        var serverSnapshotRSSBefore: Int
        var serverSnapshotPeak: Int
        /// Eight clients downloading the snapshot at once (`curl`, each limited to 20 MB/s).
        var downloads: SnapshotDownloads
        var serverDigest: String
        var snapshotSeq: Int64
        var snapshotFrameBytes: Int64
        /// The engine's default: the server's start image of the snapshot, taken whole.
        var fromSnapshot: DeviceRun
        /// The same device with `startImages` off: the store built from the snapshot's frame.
        var fromFrame: DeviceRun
        /// The start image the server built after compacting (`ServerLibrary.buildStartImage`).
        var image: StartImageInfo
        var fullLog: DeviceRun
        /// Raw SQLite on the store the snapshot start made (`LifecycleBenchmark+Floors.swift`).
        var floor: SnapshotFloor

        var speedup: Double { fullLog.seconds / fromSnapshot.seconds }
    }

    /// What one child device did (its JSON answer).
    struct DeviceRun {
        var seconds: Double
        var peakKilobytes: Int
        var startKilobytes: Int
        var pulled: Int
        var outcome: String
        var bootstrappedAt: Int64?
        var digest: String
        /// `SyncTransport.snapshot()`: the HTTP download, LZ4 decompression and decoding.
        var snapshotCallSeconds: Double
        /// `DeviceStore.bootstrap(from:tail:)`: the longest pause between calls after the snapshot's arrival.
        var storeBootstrapSeconds: Double
        /// The pull calls that fetched the tail folded into the bootstrap, and their time.
        var tailPulls: Int
        var tailPullSeconds: Double
        var pulls: Int
        /// The pull calls' durations, summed (they overlap the folding of the page before).
        var pullCallSeconds: Double
        /// The first pull call (from seq 0): for the snapshot device, the page it drops on seeing the snapshot advertised.
        var firstPullSeconds: Double
        /// VmHWM before and after the snapshot call, VmRSS after it (KiB; 0 without a snapshot).
        var snapshotHWMBefore: Int
        var snapshotHWMAfter: Int
        var snapshotRSSAfter: Int
        var storeBytes: Int64
        var startedFromImage: Bool
        /// `SyncTransport.startImage`: the image's HTTP download into a temporary file.
        var imageCallSeconds: Double

        init(_ object: [String: Any]) throws {
            func number(_ key: String) throws -> NSNumber {
                guard let value = object[key] as? NSNumber else { throw BenchError("the bootstrap child printed no '\(key)': \(object)") }
                return value
            }
            seconds = try number("seconds").doubleValue
            peakKilobytes = try number("vmhwm_kb").intValue
            startKilobytes = try number("start_vmhwm_kb").intValue
            pulled = try number("pulled").intValue
            outcome = object["outcome"] as? String ?? "?"
            bootstrappedAt = (object["bootstrapped_at"] as? NSNumber)?.int64Value
            digest = object["digest"] as? String ?? ""
            snapshotCallSeconds = try number("snapshot_call_seconds").doubleValue
            storeBootstrapSeconds = try number("store_bootstrap_seconds").doubleValue
            tailPulls = try number("tail_pulls").intValue
            tailPullSeconds = try number("tail_pull_seconds").doubleValue
            pulls = try number("pulls").intValue
            pullCallSeconds = try number("pull_call_seconds").doubleValue
            firstPullSeconds = try number("first_pull_seconds").doubleValue
            snapshotHWMBefore = try number("snapshot_hwm_before_kb").intValue
            snapshotHWMAfter = try number("snapshot_hwm_after_kb").intValue
            snapshotRSSAfter = try number("snapshot_rss_after_kb").intValue
            storeBytes = try number("store_bytes").int64Value
            startedFromImage = try number("started_from_image").boolValue
            imageCallSeconds = try number("image_call_seconds").doubleValue
        }
    }

    func measureBootstrap() throws -> BootstrapResult {
        let rig = try SyncRig(directory: directory + "/lifecycle-server")
        defer { rig.stop() }
        var ids = SplitMix64(seed: seed ^ 0xB007)
        let libraryID = try rig.addLibrary("reader", libraryID: ids.uuid())
        let library = try rig.service.library(libraryID)

        progress("lifecycle bootstrap: importing \(formatCount(Double(ops))) ops into the server's library (importConfirmed, 10,000 a batch)…")
        var workload = ConfirmedWorkload(seed: seed, total: ops, libraryID: libraryID, vocabulary: vocabulary)
        var importNanoseconds: UInt64 = 0
        var throttle = Throttle()
        while !workload.isDone {
            let batch = workload.nextBatch(10_000)
            let t0 = nowNanoseconds()
            try library.importConfirmed(batch)
            importNanoseconds += nowNanoseconds() - t0
            if throttle.ready() { progress("lifecycle bootstrap: \(formatCount(Double(workload.produced)))/\(formatCount(Double(ops))) ops on the server") }
        }
        guard library.head == Int64(ops) else { throw BenchError("lifecycle bootstrap: the server library holds \(library.head) ops; expected \(ops)") }

        progress("lifecycle bootstrap: compacting the server's library (keepOps \(formatCount(Double(Self.keepOps))))…")
        var policy = CompactionPolicy()
        policy.keepOps = Self.keepOps
        var stepEnds: [(String, UInt64)] = [("start", nowNanoseconds())]
        var memory = (before: 0, peak: 0)
        let server = try library.compact(policy, afterStep: { _, what in
            stepEnds.append((what, nowNanoseconds()))
            if what.hasPrefix("wrote the snapshot") {
                memory.peak = procStatusKilobytes("VmHWM") ?? 0
            } else if what.hasPrefix("sealed") {
                memory.before = resetPeakMemory()   // the next step's peak is its own
            }
        })
        let snapshotStep = stepEnds.indices.dropFirst().first { stepEnds[$0].0.hasPrefix("wrote the snapshot") }
        let serverSnapshotSeconds = snapshotStep.map { Double(stepEnds[$0].1 - stepEnds[$0 - 1].1) / 1e9 } ?? 0
        guard let (snapshotSeq, frame) = try library.latestSnapshot() else { throw BenchError("lifecycle bootstrap: the server wrote no snapshot") }
        let serverDigest = try library.digest()
        progress("lifecycle bootstrap: the server builds the snapshot's start image (ServerLibrary.buildStartImage)…")
        guard let image = try library.buildStartImage(progress: { progress("lifecycle bootstrap: start image: \($0)…") }) else {
            throw BenchError("lifecycle bootstrap: the server built no start image")
        }

        let engineDefault = SyncEngine.Configuration().snapshotStartOpsMin
        progress("lifecycle bootstrap: a fresh device from the snapshot at seq \(formatCount(Double(snapshotSeq))), its start image (child process)…")
        let fromSnapshot = try runDevice(rig, libraryID: libraryID, deviceID: ids.uuid(), name: "from-image", snapshotStartOpsMin: engineDefault)
        progress("lifecycle bootstrap: \(formatFixed(fromSnapshot.seconds, 2)) s, peak \(fromSnapshot.peakKilobytes / 1024) MB; a fresh device from the snapshot's frame (start images off, child process)…")
        var floor: SnapshotFloor?
        let fromFrame = try runDevice(rig, libraryID: libraryID, deviceID: ids.uuid(), name: "from-snapshot", snapshotStartOpsMin: engineDefault,
                                      startImages: false) { path in
            progress("lifecycle bootstrap: the snapshot start's floor: raw SQLite copying the store it made, and rebuilding its search indexes…")
            floor = try snapshotFloor(startedStore: path)
        }
        progress("lifecycle bootstrap: \(formatFixed(fromFrame.seconds, 2)) s, peak \(fromFrame.peakKilobytes / 1024) MB; baseline: a fresh device pulling the whole log (child process)…")
        let fullLog = try runDevice(rig, libraryID: libraryID, deviceID: ids.uuid(), name: "full-log", snapshotStartOpsMin: Int64.max)
        progress("lifecycle bootstrap: full log \(formatFixed(fullLog.seconds, 2)) s, peak \(fullLog.peakKilobytes / 1024) MB")
        for (name, run) in [("from the start image", fromSnapshot), ("from the snapshot's frame", fromFrame), ("pulling the full log", fullLog)]
            where run.digest != serverDigest {
            progress("lifecycle bootstrap: FAILED: the device \(name) ends with digest \(run.digest), the server's is \(serverDigest) (\(run.outcome))")
        }
        for run in [fromSnapshot, fromFrame] where run.bootstrappedAt != snapshotSeq {
            progress("lifecycle bootstrap: FAILED: the device did not start from the snapshot at \(snapshotSeq) (bootstrapped at \(run.bootstrappedAt.map(String.init) ?? "none"))")
        }
        if !fromSnapshot.startedFromImage || fromFrame.startedFromImage {
            progress("lifecycle bootstrap: FAILED: the default device did not take the start image, or the one with start images off did")
        }
        progress("lifecycle bootstrap: \(Self.downloadClients) clients download the snapshot at once (curl)…")
        let downloads = try downloadSnapshotAtOnce(rig, libraryID: libraryID, expectedBytes: frame.count)
        return BootstrapResult(ops: ops, importSeconds: Double(importNanoseconds) / 1e9, server: server,
                               serverSnapshotSeconds: serverSnapshotSeconds, serverSnapshotRSSBefore: memory.before,
                               serverSnapshotPeak: memory.peak, downloads: downloads, serverDigest: serverDigest,
                               snapshotSeq: snapshotSeq, snapshotFrameBytes: Int64(frame.count), fromSnapshot: fromSnapshot,
                               fromFrame: fromFrame, image: image, fullLog: fullLog,
                               floor: floor!)
    }

    static let downloadClients = 8

    /// What sending the snapshot to several clients at once cost the server (this process).
    struct SnapshotDownloads {
        var clients: Int
        var seconds: Double
        /// This process's resident memory before (KiB), and its peak while they ran (VmHWM reset first).
        var rssBefore: Int
        var peak: Int
        var allWhole: Bool
    }

    /// `downloadClients` `curl` processes fetch the snapshot at once, each at most 20 MB/s (a
    /// phone is slower still), so all are in flight together; the server is this process.
    private func downloadSnapshotAtOnce(_ rig: SyncRig, libraryID: UUID, expectedBytes: Int) throws -> SnapshotDownloads {
        let token = try rig.token(user: "reader", deviceID: UUID())
        let url = rig.server.url.appendingPathComponent("v1/libraries/\(libraryID.lowercased)/snapshot").absoluteString
        let before = resetPeakMemory()
        let t0 = nowNanoseconds()
        let clients = try (0..<Self.downloadClients).map { _ -> ChildProcess in
            try ChildProcess("/usr/bin/curl", ["-sS", "--limit-rate", "20M", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                               "-H", "Authorization: Bearer \(token)", url], stdout: .capture, stderr: .inherit)
        }
        var whole = true
        for client in clients {
            let result = client.wait()
            if result.status != 0 || result.stdout != "200 \(expectedBytes)" {
                whole = false
                progress("lifecycle bootstrap: FAILED: a snapshot download ended with '\(result.stdout)' (curl status \(result.status))")
            }
        }
        return SnapshotDownloads(clients: clients.count, seconds: Double(nowNanoseconds() - t0) / 1e9, rssBefore: before,
                                 peak: procStatusKilobytes("VmHWM") ?? 0, allWhole: whole)
    }

    /// `afterwards`: handed the device's store path (the child has ended) before it is removed.
    private func runDevice(_ rig: SyncRig, libraryID: UUID, deviceID: UUID, name: String, snapshotStartOpsMin: Int64,
                           startImages: Bool = true, afterwards: ((String) throws -> Void)? = nil) throws -> DeviceRun {
        let path = directory + "/lifecycle-device-\(name).chronicle"
        let token = try rig.token(user: "reader", deviceID: deviceID)
        let run = try DeviceRun(try runBenchChild(["_bootstrap", rig.server.url.absoluteString, libraryID.lowercased, deviceID.lowercased,
                                                   token, path, String(snapshotStartOpsMin), startImages ? "images" : "no-images"]))
        try afterwards?(path)
        remove(path)
        return run
    }

    // MARK: - Child process

    /// Diagnostic: `chronicle-bench _bootstrap-file SNAPSHOT LIBRARY STORE`: a fresh store started
    /// over from a snapshot frame in a file (`DeviceStore.bootstrap(from:)` alone, no network), for
    /// profiling the store's side of a bootstrap.
    static func bootstrapFromFile(_ arguments: [String]) throws -> String {
        guard arguments.count == 3, let libraryID = UUID(uuidString: arguments[1]) else {
            throw BenchError("usage: chronicle-bench _bootstrap-file SNAPSHOT LIBRARY STORE")
        }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: arguments[2] + suffix) }
        let store = try DeviceStore.create(at: arguments[2], schema: .readItLater, libraryID: libraryID, deviceID: UUID())
        let t0 = nowNanoseconds()
        let seq = try store.bootstrap(from: SnapshotFrame(file: arguments[0], temporary: false))
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        return JSON.object([("seconds", .number(seconds)), ("seq", .int(seq)),
                            ("vmhwm_kb", .int(Int64(procStatusKilobytes("VmHWM") ?? 0))),
                            ("digest", .string(try store.digest()))]).rendered
    }

    /// `chronicle-bench _bootstrap URL LIBRARY DEVICE TOKEN STORE SNAPSHOT_START_OPS_MIN images|no-images`: a
    /// fresh store and engine (default configuration but for the snapshot threshold and start images);
    /// times one `syncOnce`.
    static func bootstrapChild(_ arguments: [String]) throws -> String {
        guard arguments.count == 7, let url = URL(string: arguments[0]), let libraryID = UUID(uuidString: arguments[1]),
              let deviceID = UUID(uuidString: arguments[2]), let minimum = Int64(arguments[5]), ["images", "no-images"].contains(arguments[6]) else {
            throw BenchError("usage: chronicle-bench _bootstrap URL LIBRARY DEVICE TOKEN STORE SNAPSHOT_START_OPS_MIN images|no-images")
        }
        let store = try DeviceStore.create(at: arguments[4], schema: .readItLater, libraryID: libraryID, deviceID: deviceID)
        let transport = SnapshotTimingTransport(TimingTransport(HTTPTransport(baseURL: url, library: libraryID, token: arguments[3])))
        var configuration = SyncEngine.Configuration()
        configuration.snapshotStartOpsMin = minimum
        configuration.startImages = arguments[6] == "images"
        let engine = SyncEngine(store: store, transport: transport, configuration: configuration)
        let start = procStatusKilobytes("VmHWM") ?? 0
        let t0 = nowNanoseconds()
        let sampler = RSSSampler(since: t0)
        let report = try runBlocking { await engine.syncOnce() }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let peak = procStatusKilobytes("VmHWM") ?? 0
        let (peakSample, peakAt) = sampler.stop()
        progress("lifecycle bootstrap child: RSS peaked at \(peakSample / 1024) MB, \(formatFixed(peakAt, 2)) s in")
        let pulls = transport.timing.pulls
        // A start image stands where the snapshot's download would: the store takes it before the tail's pulls.
        let snapshot = transport.snapshotCall.withLock { $0 } ?? transport.imageCall.withLock { $0 }
        let imageCall = transport.imageCall.withLock { $0 }
        let memory = transport.snapshotMemory.withLock { $0 }
        // After the snapshot call the engine pulls the tail (calls back to back), then folds it
        // in DeviceStore.bootstrap (the longest pause between calls), then pulls what is left.
        var bootstrapSeconds = 0.0, tailSeconds = 0.0, tailCalls = 0
        if let call = snapshot {
            let after = pulls.filter { $0.start >= call.end }.sorted { $0.start < $1.start }
            let gaps = after.indices.map { i in after[i].start - (i == 0 ? call.end : after[i - 1].end) }
            // With no call after the snapshot, the bootstrap ran to the end of syncOnce.
            let (index, gap) = gaps.enumerated().max { $0.element < $1.element }
                .map { ($0.offset, $0.element) } ?? (0, t0 + UInt64(seconds * 1e9) - call.end)
            bootstrapSeconds = Double(gap) / 1e9
            tailCalls = index
            tailSeconds = Double(after.prefix(index).reduce(0) { $0 + $1.nanoseconds }) / 1e9
        }
        // The phrase indexes the store fills in the background after the bootstrap (not part of the time above).
        try completePhraseIndexes(store, label: "lifecycle bootstrap child")
        let digest = try store.digest()
        return JSON.object([
            ("seconds", .number(seconds)), ("vmhwm_kb", .int(Int64(peak))), ("start_vmhwm_kb", .int(Int64(start))),
            ("pulled", .int(Int64(report.pulled))), ("outcome", .string("\(report.outcome)")),
            ("bootstrapped_at", report.bootstrappedAt.map(JSON.int) ?? .null), ("digest", .string(digest)),
            ("snapshot_call_seconds", .number(snapshot.map { Double($0.end - $0.start) / 1e9 } ?? 0)),
            ("store_bootstrap_seconds", .number(bootstrapSeconds)), ("pulls", .int(Int64(pulls.count))),
            ("tail_pull_seconds", .number(tailSeconds)), ("tail_pulls", .int(Int64(tailCalls))),
            ("pull_call_seconds", .number(Double(pulls.reduce(0) { $0 + $1.nanoseconds }) / 1e9)),
            ("first_pull_seconds", .number(Double(pulls.first?.nanoseconds ?? 0) / 1e9)),
            ("snapshot_hwm_before_kb", .int(Int64(memory?.hwmBefore ?? 0))), ("snapshot_hwm_after_kb", .int(Int64(memory?.hwmAfter ?? 0))),
            ("snapshot_rss_after_kb", .int(Int64(memory?.rssAfter ?? 0))),
            ("store_bytes", .int(databaseBytes(arguments[4]))),
            ("started_from_image", .bool(report.startedFromImage)),
            ("image_call_seconds", .number(imageCall.map { Double($0.end - $0.start) / 1e9 } ?? 0)),
        ]).rendered
    }
}

/// A `TimingTransport` that also times the snapshot download (HTTP, LZ4, decoding).
final class SnapshotTimingTransport: SyncTransport {
    let timing: TimingTransport
    let snapshotCall = Locked<(start: UInt64, end: UInt64)?>(nil)
    let imageCall = Locked<(start: UInt64, end: UInt64)?>(nil)
    /// VmHWM and VmRSS (KiB) just before and just after the snapshot call (the download).
    let snapshotMemory = Locked<(hwmBefore: Int, hwmAfter: Int, rssAfter: Int)?>(nil)

    init(_ timing: TimingTransport) { self.timing = timing }

    func push(_ segment: Segment) async throws(SyncError) -> PushResponse { try await timing.push(segment) }

    func pull(after cursor: Int64, limit: Int, waitMilliseconds: Int) async throws(SyncError) -> PullPage {
        try await timing.pull(after: cursor, limit: limit, waitMilliseconds: waitMilliseconds)
    }

    func verdict(for entity: UUID) async throws(SyncError) -> Verdict { try await timing.verdict(for: entity) }

    func startImage(storeFormat: Int64, schemaFingerprint: String, to target: String) async throws(SyncError) -> Bool {
        let start = nowNanoseconds()
        let found = try await timing.inner.startImage(storeFormat: storeFormat, schemaFingerprint: schemaFingerprint, to: target)
        let end = nowNanoseconds()
        if found { imageCall.withLock { $0 = (start, end) } }
        return found
    }

    func snapshot() async throws(SyncError) -> SnapshotFrame {
        let hwmBefore = procStatusKilobytes("VmHWM") ?? 0
        let start = nowNanoseconds()
        let snapshot = try await timing.snapshot()
        let end = nowNanoseconds()
        snapshotCall.withLock { $0 = (start, end) }
        let memory = (hwmBefore, procStatusKilobytes("VmHWM") ?? 0, procStatusKilobytes("VmRSS") ?? 0)
        snapshotMemory.withLock { $0 = memory }
        return snapshot
    }
}

/// Runs this binary with `arguments` (a hidden child mode); its stderr passes through
/// (progress), its stdout is one JSON object.
func runBenchChild(_ arguments: [String]) throws -> [String: Any] {
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let result = try ChildProcess.run(executable, arguments, stdout: .capture, stderr: .inherit)
    guard result.status == 0 else { throw BenchError("\(arguments[0]) child exited with status \(result.status)") }
    guard let object = try JSONSerialization.jsonObject(with: Data(result.output)) as? [String: Any] else {
        throw BenchError("\(arguments[0]) child printed no JSON object")
    }
    return object
}

/// Samples the process's RSS every 10 ms on its own thread, to tell when the peak happened.
final class RSSSampler: @unchecked Sendable {
    private let state = Locked<(peak: Int, at: Double, done: Bool)>((0, 0, false))

    init(since t0: UInt64) {
        let state = self.state
        Thread.detachNewThread {
            while true {
                let rss = procStatusKilobytes("VmRSS") ?? 0
                let at = Double(nowNanoseconds() - t0) / 1e9
                let done = state.withLock { value -> Bool in
                    if rss > value.peak { value.peak = rss; value.at = at }
                    return value.done
                }
                if done { return }
                usleep(10_000)
            }
        }
    }

    /// The peak RSS seen (KiB) and when (seconds after `t0`).
    func stop() -> (Int, Double) {
        state.withLock { $0.done = true; return ($0.peak, $0.at) }
    }
}
