import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation

extension SyncBenchmark {
    // MARK: - 5. Many devices syncing at once

    struct ScaleResult {
        var devices: Int
        var libraries: Int
        var opsPerDevice: Int
        var setupSeconds: Double
        /// Wall clock of the timed round: every device's `syncOnce()` started together, until the last ended.
        var seconds: Double
        /// First push request sent to last push answered.
        var pushWindowSeconds: Double
        var pushed: Int
        /// Each push request's duration, every device.
        var requests: Samples
        var failedRequests: Int
        var retries: Int
        /// Devices whose timed round did not end `.synced` with all their ops pushed.
        var unsynced: Int
        var catchUpSeconds: Double
        /// From the server's log, timed round only: time in `pushNow` (includes waiting for the
        /// library's writer), and time inside the HTTP server, per push request.
        var serverPushNow: Samples
        var serverRequests: Samples
        /// Each push, cut at the server's log line for it (ms resolution): from the client's
        /// call to `pushNow` starting, and from `pushNow` ending to the client's call returning.
        var beforePushNow = Samples()
        var afterPushNow = Samples()
        /// Push-only bursts of fresh fleets (diagnostics, `SyncBenchmark+Diagnostics.swift`).
        var bursts: [BurstResult] = []
        /// The same number of devices, live for a while instead of all starting with a backlog.
        var sustained: SustainedResult?
        /// Raw SQLite running the server's statements for the same first pushes (`HerdFloor`), and
        /// the same with no index but the keys, no trigger and one transaction a library.
        var floor: HerdFloor.Result?
        var strippedFloor: HerdFloor.Result?
        // The audit, after a second (untimed) round that lets every device catch up.
        var audit = FleetAudit()
        var failures: [String] = []

        var lost: Int { audit.lost }
        var duplicated: Int { audit.duplicated }
        var unexpected: Int { audit.unexpected }
        var librariesWithGaps: Int { audit.librariesWithGaps }
        var digestMismatches: Int { audit.digestMismatches }
        var devicesWithPending: Int { audit.devicesWithPending }
        var opsPerSecond: Double { Double(pushed) / seconds }
        var clean: Bool { failures.isEmpty }
        var pass: Bool {
            var copy = requests
            return copy.percentileMilliseconds(0.99) <= 50 && clean
        }
    }

    /// `devices` devices spread over `libraries` libraries, each with its own store
    /// (under /dev/shm when there is one) and `opsPerDevice` queued local ops, all
    /// starting `syncOnce()` at once from one task group against one server.
    func measureScale() throws -> ScaleResult {
        let count = sizes.devices, libraries = sizes.libraries, perDevice = sizes.opsPerDevice
        let shm = FileManager.default.fileExists(atPath: "/dev/shm")
        let root = shm ? "/dev/shm/chronicle-bench-sync-\(getpid())" : directory + "/sync-scale-devices"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer {
            if keep { progress("sync scale: device stores kept in \(root)") } else { try? FileManager.default.removeItem(atPath: root) }
        }
        let rig = try SyncRig(directory: directory + "/sync-scale-server", logged: true)
        defer { rig.stop() }

        progress("sync scale: \(count) devices over \(libraries) libraries, \(perDevice) queued ops each; setting up…")
        let s0 = nowNanoseconds()
        let (libraryIDs, all) = try fleet(rig: rig, root: root, name: "user", salt: 0x5CA1E)
        let devices = all.map(\.device)
        let setupSeconds = Double(nowNanoseconds() - s0) / 1e9

        // The timed round: everyone at once.
        progress("sync scale: \(count) devices start syncOnce() together…")
        let engines = devices.map(\.engine)
        let t0 = nowNanoseconds()
        let reports = try runBlocking { await Self.syncAll(engines) }
        let seconds = Double(nowNanoseconds() - t0) / 1e9
        let pushes = devices.flatMap(\.transport.pushes)
        var requests = Samples(capacity: pushes.count)
        for call in pushes where !call.failed { requests.add(call.nanoseconds) }
        let window = (pushes.map(\.end).max() ?? t0) - (pushes.map(\.start).min() ?? t0)

        let logged = rig.loggedPushTimes()
        let (before, after) = Self.cutAtServer(devices.compactMap { device in
            device.transport.pushes.first.map { (device.store.deviceID, $0) }
        }, rig: rig)

        // Catch-up round (untimed), so every device also holds the ops pushed after its own pull.
        progress("sync scale: catch-up round and audit…")
        let c0 = nowNanoseconds()
        let catchUp = try runBlocking { await Self.syncAll(engines) }
        let catchUpSeconds = Double(nowNanoseconds() - c0) / 1e9

        var result = ScaleResult(devices: count, libraries: libraries, opsPerDevice: perDevice, setupSeconds: setupSeconds,
                                 seconds: seconds, pushWindowSeconds: Double(window) / 1e9,
                                 pushed: reports.reduce(0) { $0 + $1.pushed }, requests: requests,
                                 failedRequests: pushes.filter(\.failed).count, retries: reports.reduce(0) { $0 + $1.retries },
                                 unsynced: 0, catchUpSeconds: catchUpSeconds, serverPushNow: logged.pushNow, serverRequests: logged.request,
                                 beforePushNow: before, afterPushNow: after)
        for (index, report) in reports.enumerated() where report.outcome != .synced || report.pushed != perDevice || report.rejected != 0 {
            result.unsynced += 1
            result.failures.append("device \(index): timed round ended \(report.outcome), \(report.pushed) pushed, \(report.rejected) rejected")
        }
        for (index, report) in catchUp.enumerated() where report.outcome != .synced {
            result.failures.append("device \(index): catch-up round ended \(report.outcome)")
        }
        result.audit = try audit(libraryIDs: libraryIDs, devices: devices, written: all.map(\.ops), rig: rig)
        result.failures += result.audit.failures
        for failure in result.failures.prefix(20) { syncFailure("scale: " + failure) }

        progress("sync scale: the herd's floor (raw SQLite, the server's statements for the same pushes)…")
        result.floor = try HerdFloor.measure(directory: directory + "/sync-scale-floor", libraryIDs: libraryIDs, written: all.map(\.ops),
                                             schema: .readItLater, threads: ProcessInfo.processInfo.activeProcessorCount)
        result.strippedFloor = try HerdFloor.measure(directory: directory + "/sync-scale-floor", libraryIDs: libraryIDs, written: all.map(\.ops),
                                                     schema: .readItLater, threads: ProcessInfo.processInfo.activeProcessorCount, stripped: true)
        if !keep { try? FileManager.default.removeItem(atPath: directory + "/sync-scale-floor") }

        result.sustained = try measureSustained(rig: rig, root: root)

        for kind in BurstKind.selected {
            progress("sync scale: diagnostic, a fresh fleet of \(count) devices pushes at once without pulling (\(kind.rawValue))…")
            result.bursts.append(try pushBurst(kind, rig: rig, root: root))
        }
        progress("sync scale: \(formatCount(result.opsPerSecond)) ops/s pushed, push p99 \(millisecondsText(result.requests.percentileMilliseconds(0.99))), \(result.failures.isEmpty ? "no" : "\(result.failures.count)") problems")
        return result
    }

    /// `sizes.devices` devices over `sizes.libraries` new libraries (users `name0`, `name1`…), each
    /// signed in and holding `sizes.opsPerDevice` queued local ops. Registration runs scrypt
    /// (tens of ms), so devices are set up on every core.
    func fleet(rig: SyncRig, root: String, name: String, salt: UInt64, opsPerDevice: Int? = nil) throws -> (libraries: [UUID], devices: [(device: SyncDevice, ops: [Op])]) {
        let count = sizes.devices, libraries = sizes.libraries, perDevice = opsPerDevice ?? sizes.opsPerDevice
        var ids = SplitMix64(seed: seed ^ salt)
        let libraryIDs = try (0..<libraries).map { try rig.addLibrary("\(name)\($0)", libraryID: ids.uuid()) }
        let deviceIDs = (0..<count).map { _ in ids.uuid() }
        let made = Locked<[Int: (device: SyncDevice, ops: [Op])]>([:])
        let errors = Locked<[String]>([])
        let (seed, vocabulary) = (self.seed, self.vocabulary)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            do {
                let library = index % libraries
                let device = try rig.device(user: "\(name)\(library)", libraryID: libraryIDs[library],
                                            path: "\(root)/\(name)-device-\(index).chronicle",
                                            deviceID: deviceIDs[index], seed: seed ^ salt ^ UInt64(index))
                var writer = LocalWriter(seed: seed ^ (salt << 4) ^ UInt64(index), vocabulary: vocabulary)
                let ops = try writer.write(perDevice, to: device.store)
                made.withLock { $0[index] = (device, ops) }
            } catch {
                errors.withLock { $0.append("device \(index): \(error)") }
            }
        }
        if let first = errors.withLock({ $0.first }) { throw BenchError("sync scale: setup failed: \(first)") }
        return (libraryIDs, made.withLock { table in (0..<count).map { table[$0]! } })
    }

    /// Every device's `syncOnce()` at once; the reports in device order.
    static func syncAll(_ engines: [SyncEngine]) async -> [SyncReport] {
        await withTaskGroup(of: (Int, SyncReport).self) { group in
            for (index, engine) in engines.enumerated() {
                group.addTask { (index, await engine.syncOnce()) }
            }
            var reports = [SyncReport?](repeating: nil, count: engines.count)
            for await (index, report) in group { reports[index] = report }
            return reports.map { $0! }
        }
    }

    /// For every library: the server log holds exactly the ops its devices wrote, each
    /// op id once, serverSeq gap-free from 1; every device's digest equals the server's
    /// and nothing is left queued. `written[i]` is what `devices[i]` wrote; device i
    /// belongs to library `i % libraryIDs.count`.
    func audit(libraryIDs: [UUID], devices: [SyncDevice], written: [[Op]], rig: SyncRig) throws -> FleetAudit {
        var result = FleetAudit()
        for (libraryIndex, libraryID) in libraryIDs.enumerated() {
            let members = devices.indices.filter { $0 % libraryIDs.count == libraryIndex }
            let expected = Set(members.flatMap { written[$0].map(\.opID) })
            let library = try rig.service.library(libraryID)
            let logged = try library.allOps()
            var seen = Set<UUID>()
            var duplicated = 0
            for op in logged where !seen.insert(op.opID).inserted { duplicated += 1 }
            let gapFree = logged.enumerated().allSatisfy { $0.element.serverSeq == Int64($0.offset + 1) }
            let lost = expected.subtracting(seen).count, unexpected = seen.subtracting(expected).count
            result.lost += lost
            result.duplicated += duplicated
            result.unexpected += unexpected
            if !gapFree { result.librariesWithGaps += 1 }
            if lost + duplicated + unexpected > 0 || !gapFree {
                result.failures.append("library \(libraryIndex): \(logged.count) ops logged for \(expected.count) written; lost \(lost), duplicated \(duplicated), unexpected \(unexpected), gap-free \(gapFree)")
            }
            let digest = try library.digest()
            for index in members {
                let store = devices[index].store
                if try store.digest() != digest {
                    result.digestMismatches += 1
                    result.failures.append("device \(index): digest differs from library \(libraryIndex)'s on the server")
                }
                if try !store.pendingOps().isEmpty {
                    result.devicesWithPending += 1
                    result.failures.append("device \(index): ops still queued after the catch-up round")
                }
            }
        }
        return result
    }
}

/// What the audit after a fleet's rounds found.
struct FleetAudit: Sendable {
    var lost = 0
    var duplicated = 0
    var unexpected = 0
    var librariesWithGaps = 0
    var digestMismatches = 0
    var devicesWithPending = 0
    var failures: [String] = []
}
