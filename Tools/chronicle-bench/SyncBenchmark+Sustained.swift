import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation

extension SyncBenchmark {
    // MARK: - 5b. Many devices syncing at once, as apps do

    /// The scale measurement's other half. The herd (`measureScale`) starts every device at
    /// the same instant with a backlog, so its p99 is the time the server needs to order the
    /// whole backlog. Here every device of a fresh fleet is live for a fixed time, all at once:
    /// it writes a few ops (a person saving, tagging, reading), runs `syncOnce()` (push, then
    /// pull what the other devices of its library wrote), and pauses a random 0.5–1.5 s before
    /// the next change, as an app syncing on each change does. Every push request is timed.
    struct SustainedResult {
        var devices: Int
        var libraries: Int
        var seconds: Double
        var pushed: Int
        var rounds: Int
        /// Each push request's duration, every device.
        var requests: Samples
        /// Each `syncOnce()` round's duration (push, pull, fold), every device.
        var roundTimes: Samples
        var failedRequests: Int
        var unsynced: Int
        var audit: FleetAudit
        /// The server's side of the same push requests (its log): the whole request in the HTTP
        /// server, and `pushNow` in it (incl. the library's writer lock).
        var serverRequests: Samples
        var serverPushNow: Samples
        /// The disk alone in the same window, beside the server's files (`DiskStallProbe`).
        var disk: DiskStallProbe.Result?

        var opsPerSecond: Double { Double(pushed) / seconds }
        var clean: Bool { audit.failures.isEmpty && unsynced == 0 }
        var pass: Bool {
            var copy = requests
            return copy.percentileMilliseconds(0.99) <= 50 && clean
        }
    }

    /// How long the devices stay live: 30 s (quick 10 s), or `CHRONICLE_BENCH_SUSTAINED_SECONDS`.
    var sustainedSeconds: Double {
        ProcessInfo.processInfo.environment["CHRONICLE_BENCH_SUSTAINED_SECONDS"].flatMap(Double.init)
            ?? (sizes.devices < 200 ? 10 : 30)
    }

    func measureSustained(rig: SyncRig, root: String) throws -> SustainedResult {
        let duration = sustainedSeconds
        let (libraryIDs, all) = try fleet(rig: rig, root: root, name: "live", salt: 0x11FE, opsPerDevice: 0)
        let devices = all.map(\.device)
        progress("sync scale: \(devices.count) devices over \(libraryIDs.count) libraries live for \(formatFixed(duration, 0)) s, each writing 1–3 ops, syncing, pausing 0.5–1.5 s…")
        let (seed, vocabulary) = (self.seed, self.vocabulary)
        let wallStart = Date().timeIntervalSince1970 * 1000
        let t0 = nowNanoseconds()
        let deadline = t0 + UInt64(duration * 1e9)
        let disk = try DiskStallProbe(path: rig.directory + "/disk-probe.bin", until: deadline)
        let outcomes = try runBlocking {
            await withTaskGroup(of: (Int, LiveDevice).self) { group in
                for (index, device) in devices.enumerated() {
                    group.addTask {
                        var live = LiveDevice(seed: seed ^ 0x11FE ^ UInt64(index), vocabulary: vocabulary)
                        await live.run(device, until: deadline)
                        return (index, live)
                    }
                }
                var done = [LiveDevice?](repeating: nil, count: devices.count)
                for await (index, live) in group { done[index] = live }
                return done.map { $0! }
            }
        }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let diskResult = disk.finish()
        var requests = Samples(), rounds = Samples()
        var failed = 0
        for device in devices {
            for call in device.transport.pushes {
                if call.failed { failed += 1 } else { requests.add(call.nanoseconds) }
            }
        }
        for live in outcomes { for nanoseconds in live.roundNanoseconds { rounds.add(nanoseconds) } }
        let logged = rig.loggedPushTimes(since: wallStart)

        progress("sync scale: live fleet's catch-up round and audit…")
        let catchUp = try runBlocking { await Self.syncAll(devices.map(\.engine)) }
        var audit = try self.audit(libraryIDs: libraryIDs, devices: devices, written: outcomes.map(\.written), rig: rig)
        var unsynced = 0
        for (index, live) in outcomes.enumerated() where !live.problems.isEmpty {
            unsynced += 1
            audit.failures.append("live device \(index): " + live.problems.prefix(3).joined(separator: "; "))
        }
        for (index, report) in catchUp.enumerated() where report.outcome != .synced {
            audit.failures.append("live device \(index): catch-up round ended \(report.outcome)")
        }
        for failure in audit.failures.prefix(20) { syncFailure("sustained: " + failure) }
        let result = SustainedResult(devices: devices.count, libraries: libraryIDs.count, seconds: seconds,
                                     pushed: outcomes.reduce(0) { $0 + $1.pushed }, rounds: rounds.count, requests: requests,
                                     roundTimes: rounds, failedRequests: failed, unsynced: unsynced, audit: audit,
                                     serverRequests: logged.request, serverPushNow: logged.pushNow, disk: diskResult)
        var p99 = requests
        progress("sync scale: live fleet pushed \(formatCount(result.opsPerSecond)) ops/s, push p99 \(millisecondsText(p99.percentileMilliseconds(0.99)))")
        return result
    }
}

/// One device of the live fleet: what it wrote, how long each round took, what went wrong.
struct LiveDevice: Sendable {
    private var writer: LocalWriter
    private var rng: SplitMix64
    private(set) var written: [Op] = []
    private(set) var pushed = 0
    private(set) var roundNanoseconds: [UInt64] = []
    private(set) var problems: [String] = []

    init(seed: UInt64, vocabulary: Vocabulary) {
        writer = LocalWriter(seed: seed, vocabulary: vocabulary)
        rng = SplitMix64(seed: seed ^ 0x7A5E)
    }

    mutating func run(_ device: SyncDevice, until deadline: UInt64) async {
        // Devices start spread over the first pause, as a fleet already running would be.
        try? await Task.sleep(nanoseconds: UInt64(rng.unit() * 1e9))
        while nowNanoseconds() < deadline {
            do {
                written += try writer.write(rng.int(1...3), to: device.store)
            } catch {
                problems.append("local write failed: \(error)")
                return
            }
            let start = nowNanoseconds()
            let report = await device.engine.syncOnce()
            roundNanoseconds.append(nowNanoseconds() - start)
            pushed += report.pushed
            if report.outcome != .synced || report.rejected != 0 {
                problems.append("round ended \(report.outcome), \(report.rejected) rejected")
            }
            try? await Task.sleep(nanoseconds: UInt64((0.5 + rng.unit()) * 1e9))
        }
    }
}

/// The disk alone while a measurement runs: a thread beside it writes 4 KiB in place and
/// `fdatasync`s it (`DiskSync`) every 20 ms in the server's directory, until a deadline. A
/// push is acknowledged only once its commit is on the disk, so a sync that stalls for a
/// second (this VM's disk does, with nothing else running) holds every push of that second.
final class DiskStallProbe: @unchecked Sendable {
    struct Result {
        var syncs: Samples
        /// Syncs of 50 ms or more: the live fleet's whole push target.
        var stalls: Int
    }

    private let disk: DiskSync
    private let path: String
    private let deadline: UInt64
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var samples = Samples()
    private var stopped = false

    init(path: String, until deadline: UInt64) throws {
        disk = try DiskSync(path: path)
        self.path = path
        self.deadline = deadline
        Thread { self.run() }.start()
    }

    private func run() {
        defer {
            unlink(path)
            done.signal()
        }
        while nowNanoseconds() < deadline, !lock.withLock({ stopped }) {
            let t0 = nowNanoseconds()
            guard (try? disk.writeAndSync()) != nil else { return }
            let elapsed = nowNanoseconds() - t0
            lock.withLock { samples.add(elapsed) }
            usleep(20_000)
        }
    }

    /// Waits for the thread (it stops at the deadline, or now) and hands back what it measured.
    func finish() -> Result {
        lock.withLock { stopped = true }
        done.wait()
        return lock.withLock { Result(syncs: samples, stalls: samples.nanoseconds.filter { $0 >= 50_000_000 }.count) }
    }
}
