import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation

extension Simulator {
    /// A compaction policy the seed picks: seal most of the log in small segments, and
    /// sometimes drop history past a short retention horizon.
    func randomPolicy() -> CompactionPolicy {
        var policy = CompactionPolicy()
        policy.keepOps = random.pick([0, 1, 5, 20, nil])
        policy.segmentOpsMax = random.pick([1, 3, 10, 100])
        policy.keepMilliseconds = random.chance(0.2) ? random.between64(0, 3_600_000) : nil
        policy.horizonMilliseconds = random.chance(0.5) ? random.pick([0, 60_000, 3_600_000, 86_400_000]) : nil
        return policy
    }

    static func describe(_ policy: CompactionPolicy) -> String {
        "keep \(policy.keepOps.map(String.init) ?? "any") ops, segments of \(policy.segmentOpsMax), "
            + "horizon \(policy.horizonMilliseconds.map { "\($0 / 1000) s" } ?? "none")"
            + (policy.wholeSegmentsOnly ? ", whole segments only" : "") + (policy.givesSpaceBack ? "" : ", no VACUUM")
            + (policy.snapshotEveryOps.map { ", a snapshot every \($0) ops" } ?? "")
    }

    /// The server seals its log into segments, snapshots, and maybe drops old history
    /// (devices behind it then start from the snapshot). Half the time as a running server's
    /// own maintenance does it: whole segments only, no VACUUM.
    func compactServer() throws {
        // A third of the time, the running server's own maintenance pass instead (libraries that
        // took pushes since the last pass, or every library).
        if lifecycleRandom.chance(0.33) {
            let all = lifecycleRandom.chance(0.3)
            let results = server.service.runMaintenance(all: all)
            if let failed = results.first(where: { $0.failure != nil }) {
                throw Violation("the server's maintenance compacts without failing", failed.failure ?? "")
            }
            compactions += results.count
            let sealed = results.reduce(Int64(0)) { $0 + ($1.report?.opsSealed ?? 0) }
            let dropped = results.compactMap { $0.report?.historyDroppedThrough }.first
            log.record("server maintenance pass\(all ? " over every library" : ""): \(results.count) compacted, sealed \(sealed) ops, "
                       + "history dropped through \(dropped.map(String.init) ?? "none")")
            return
        }
        var policy = randomPolicy()
        if lifecycleRandom.chance(0.5) {
            policy.wholeSegmentsOnly = true
            policy.givesSpaceBack = false
            policy.snapshotEveryOps = lifecycleRandom.pick([nil, 10, 40])
        }
        let report = try server.service.compact(library: libraryID, policy: policy)
        compactions += 1
        log.record("server compacts (\(Self.describe(policy))): sealed \(report.opsSealed) ops in \(report.segmentsWritten) segments, "
                   + "snapshot at \(report.snapshotSeq.map(String.init) ?? "none"), history dropped through \(report.historyDroppedThrough.map(String.init) ?? "none")")
    }

    /// The device compacts its own store the same way; on a full disk that may fail, cleanly.
    /// With the seed's crash rate, the device is killed after one of the compaction's steps
    /// (each its own transaction): reopened, it must show the same state and pass `verify()`.
    func compact(_ device: SimulatedDevice) throws {
        var policy = randomPolicy()
        policy.givesSpaceBack = lifecycleRandom.chance(0.7)
        policy.snapshotEveryOps = lifecycleRandom.chance(0.3) ? lifecycleRandom.pick([10, 40]) : nil
        let crashAfterStep = plan.crashRate > 0 && random.chance(0.5) ? random.between(1...4) : nil
        let before = try device.store.digest()
        do {
            let report = try device.store.compact(policy, afterStep: { step, what in
                if step == crashAfterStep { throw CrashDuringCompaction(step: step, what: what) }
            })
            compactions += 1
            log.record("\(device.name) compacts (\(Self.describe(policy))): sealed \(report.opsSealed) ops, "
                       + "history dropped through \(report.historyDroppedThrough.map(String.init) ?? "none")")
        } catch let crash as CrashDuringCompaction {
            log.fault(.deviceCrash, "\(device.name) crashes while compacting (\(Self.describe(policy))), after step \(crash.step): \(crash.what)")
            try device.crashAndRestart()
            let after = try device.store.digest()
            if after != before {
                throw Violation("a compaction killed at any step leaves the same state", "\(device.name): digest \(before.prefix(12)) became \(after.prefix(12))")
            }
        } catch let error as ChronicleError where error.code == .diskFull && device.diskFullPages != nil {
            log.record("\(device.name) cannot compact: disk full")
        } catch let error as SQLiteError where error.isDiskFull && device.diskFullPages != nil {
            log.record("\(device.name) cannot compact: disk full (\(error.extendedCode))")
        }
        // History dropped past the horizon may hold ops the server lost in a restore that the
        // device has not heard of yet: with their content gone from it, they are gone for good.
        try forgetOpsLostForGood(device)
    }
}

/// Thrown from a compaction's step hook to stand for the process dying there.
struct CrashDuringCompaction: Error {
    var step: Int
    var what: String
}
