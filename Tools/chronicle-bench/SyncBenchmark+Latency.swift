import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation
import ChronicleServerStore

extension SyncBenchmark {
    // MARK: - 4. Write-to-other-device latency with long-poll

    struct LatencyResult {
        /// From just before A's `store.write` until B's store shows the op.
        var samples: Samples
        /// The same interval cut in three, at A's push request leaving and B's pull answer arriving:
        /// A writes (a durable local transaction) and its round reads the outbox; the push travels, the
        /// server commits it, wakes B's parked pull and the page travels back; B folds it in (+ polling).
        var write: Samples
        var delivery: Samples
        var apply: Samples
        /// Samples B received through a parked long-poll (the rest came through one of B's own rounds).
        var viaLongPoll: Int
        var failures: [String]
        var pollMicroseconds: Int

        var pass: Bool {
            var copy = samples
            return copy.percentileMilliseconds(0.5) <= 20 && failures.isEmpty
        }
    }

    /// Device B runs `engine.run()` (long-poll, the engine's default 25 s wait);
    /// device A writes one op (the push measurement's realistic mix) and runs `syncOnce()`.
    /// The main thread watches B's cursor every `pollMicroseconds` (one indexed read of
    /// B's meta table, cheaper than looking the row up; the cursor and the row commit
    /// in one transaction, so they become visible together). Only A writes, so A's
    /// k-th op gets serverSeq k.
    ///
    /// `across`: two servers sharing one PostgreSQL database (`serve --postgres`), A syncing with
    /// the first and B with the second, so the write reaches B through NOTIFY and a catch-up.
    func measureLatency(across shared: (any SharedLibraryStore, any SharedLibraryStore)? = nil) throws -> LatencyResult {
        let samplesWanted = sizes.latencySamples
        let pollMicroseconds = 200
        let name = shared == nil ? "sync-latency" : "sync-latency-postgres"
        let rig = try SyncRig(directory: directory + "/\(name)-server", shared: shared?.0)
        defer { rig.stop() }
        let rigB = try shared.map { try SyncRig(directory: directory + "/\(name)-server", shared: $0.1) } ?? rig
        defer { if shared != nil { rigB.stop() } }
        var ids = SplitMix64(seed: seed ^ 0x9041)
        let libraryID = try rig.addLibrary("pair", libraryID: ids.uuid())
        let a = try rig.device(user: "pair", libraryID: libraryID, path: directory + "/\(name)-a.chronicle",
                               deviceID: ids.uuid(), seed: seed ^ 0x9042)
        let b = try rigB.device(user: "pair", libraryID: libraryID, path: directory + "/\(name)-b.chronicle",
                                deviceID: ids.uuid(), seed: seed ^ 0x9043)
        defer { remove(a.store.path, b.store.path) }
        var writer = LocalWriter(seed: seed ^ 0x9044, vocabulary: vocabulary)

        progress("sync latency: \(samplesWanted) writes on device A, device B long-polling (SyncEngine.run)…")
        let rounds = Locked(0)
        let engineA = a.engine, engineB = b.engine
        let runner = Launched { await engineB.run { _ in rounds.withLock { $0 += 1 } } }
        defer {
            runner.cancel()
            _ = try? runner.wait()
        }
        let deadline = nowNanoseconds() + 10_000_000_000
        while rounds.withLock({ $0 }) == 0 {
            guard nowNanoseconds() < deadline else { throw BenchError("sync latency: device B's first round did not finish in 10 s") }
            usleep(1_000)
        }

        var result = LatencyResult(samples: Samples(capacity: samplesWanted), write: Samples(), delivery: Samples(),
                                   apply: Samples(), viaLongPoll: 0, failures: [], pollMicroseconds: pollMicroseconds)
        for index in 0..<samplesWanted {
            usleep(20_000)   // B is parked in its next long-poll again
            let target = Int64(index + 1)
            let t0 = nowNanoseconds()
            let op = try writer.write(1, to: a.store)[0]
            let sync = Launched { await engineA.syncOnce() }
            var seen = true
            while try b.store.cursor() < target {
                if nowNanoseconds() - t0 > 10_000_000_000 { seen = false; break }
                usleep(UInt32(pollMicroseconds))
            }
            let t1 = nowNanoseconds()
            let report = try sync.wait()
            guard seen else {
                result.failures.append("write \(index + 1) (\(op.type)) did not reach device B within 10 s")
                syncFailure(result.failures.last!)
                continue
            }
            if report.outcome != .synced || report.pushed != 1 {
                result.failures.append("device A's round for write \(index + 1) ended \(report.outcome), \(report.pushed) pushed")
            }
            if try b.store.row(op.entityID) == nil {
                result.failures.append("device B's cursor passed write \(index + 1) but its row \(op.entityID.lowercased) is missing")
            }
            result.samples.add(t1 - t0)
            // Cut the interval where A's push leaves and where the B pull that brought the op returns.
            if let pushed = a.transport.pushes.last(where: { $0.start >= t0 && !$0.failed }),
               let delivered = b.transport.pulls.first(where: { $0.end >= pushed.start && $0.end <= t1 && $0.ops > 0 }) {
                result.write.add(pushed.start - t0)
                result.delivery.add(delivered.end - pushed.start)
                result.apply.add(t1 - delivered.end)
                if delivered.waitMilliseconds > 0 { result.viaLongPoll += 1 }
            }
        }
        for failure in result.failures { syncFailure(failure) }
        progress("sync latency: p50 \(millisecondsText(result.samples.percentileMilliseconds(0.5))), p99 \(millisecondsText(result.samples.percentileMilliseconds(0.99)))")
        return result
    }
}
