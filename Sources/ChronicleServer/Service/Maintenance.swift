import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// When a running server compacts its libraries on its own (`chronicle serve --compact-*`).
///
/// A library that took pushes is looked at every `checkIntervalSeconds`; once a whole segment
/// of ops lies past what `compaction` keeps hot, it is compacted: whole segments of old ops
/// sealed (pulls read them as before), a snapshot for new devices once enough ops lie past the
/// last one, and history past the horizon dropped if the policy sets one. Each step is its own transaction, so pushes to the
/// library go on in between.
///
/// ```swift
/// var maintenance = MaintenancePolicy()          // keep 100,000 ops hot, seal the rest
/// maintenance.compaction?.horizonMilliseconds = 365 * 86_400_000
/// let server = try SyncServer(dataDirectory: dir, maintenance: maintenance)
/// ```
public struct MaintenancePolicy: Sendable, Equatable {
    /// What each compaction keeps hot, seals and drops; nil: the server never compacts on its
    /// own (`chronicle server compact` still does). It seals whole segments only
    /// (`wholeSegmentsOnly` is set on every pass), and snapshots only every `snapshotEveryOps`
    /// ops: a snapshot costs about the library's whole state however little was sealed. `givesSpaceBack` is off by default here: VACUUM would hold the library's writer
    /// while it copies the file, and the pages the sealed rows leave are reused by the next pushes.
    public var compaction: CompactionPolicy?
    /// How often libraries that took pushes since the last look are looked at.
    public var checkIntervalSeconds: Double = 60
    /// How often a library's history is checked against the horizon when nothing is due to be
    /// sealed (the check reads every sealed segment's last op time).
    public var horizonCheckSeconds: Double = 3_600
    /// How long an upload of a file (a blob) may stay unfinished before its chunks are deleted
    /// (looked at every `horizonCheckSeconds`); its device starts it again from 0 when it comes back.
    /// nil: kept until the library is deleted.
    public var abandonedUploadSeconds: Double? = 7 * 86_400
    /// How long a file (a blob) stays once no row names it (`SyncService.collectUnnamedBlobs`):
    /// it is deleted when it was completed longer ago than this and no row of the library names
    /// it, where rows soft-deleted longer ago than this no longer count. nil: kept until the
    /// library is deleted.
    public var unnamedBlobSeconds: Double? = 30 * 86_400
    /// How often files are looked at for `unnamedBlobSeconds` (the look reads each library's
    /// projection where any of its files is old enough).
    public var blobCollectionSeconds: Double = 86_400
    /// A library whose newest snapshot holds at least this many ops gets a start image of it
    /// (`ServerLibrary.buildStartImage`), made after the compaction that wrote the snapshot (or at
    /// the next pass, where there is none): a new device takes it whole instead of building the
    /// snapshot's indexes. It takes about 3 times the snapshot's bytes on disk. nil: never.
    public var startImageOpsMin: Int64? = 100_000

    /// Keep the newest 100,000 ops of each library hot and seal the rest, 10,000 to a segment;
    /// a new snapshot once 100,000 ops lie past the newest one.
    public init() {
        var policy = CompactionPolicy()
        policy.keepOps = 100_000
        policy.snapshotEveryOps = 100_000
        policy.givesSpaceBack = false
        policy.wholeSegmentsOnly = true
        compaction = policy
    }

    /// The server never compacts on its own.
    public static var off: MaintenancePolicy {
        var policy = MaintenancePolicy()
        policy.compaction = nil
        return policy
    }
}

/// One library compacted by a maintenance pass.
public struct MaintenanceResult: Sendable {
    public var library: UUID
    public var report: CompactionReport?
    /// Why the compaction failed or stopped (the library is whole either way).
    public var failure: String?
}

/// The libraries that changed since the last look, and when each was last checked against
/// the horizon. Shared by the push path (which marks) and the maintenance thread.
final class MaintenanceState: Sendable {
    private struct State {
        var changed: Set<UUID> = []
        var horizonCheckedAt: [UUID: UInt64] = [:]
        var stopping = false
    }

    private let state = Locked(State())
    private let wake = NSCondition()
    private let finished = DispatchSemaphore(value: 0)
    private let started = Locked(false)

    func markChanged(_ library: UUID) { state.withLock { _ = $0.changed.insert(library) } }

    /// The libraries changed since the last call (and forgets them).
    func takeChanged() -> [UUID] {
        state.withLock { s in
            defer { s.changed.removeAll() }
            return s.changed.sorted { $0.uuidString < $1.uuidString }
        }
    }

    /// True (and the time noted) when `library`'s horizon was last checked `interval` ago or more.
    func horizonDue(_ library: UUID, interval: Double) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return state.withLock { s in
            if let last = s.horizonCheckedAt[library], Double(now - last) / 1e9 < interval { return false }
            s.horizonCheckedAt[library] = now
            return true
        }
    }

    var isStopping: Bool { state.withLock { $0.stopping } }

    /// Runs `pass` every `interval` seconds on a thread of its own until `stop()`.
    func start(interval: Double, name: String, pass: @escaping @Sendable () -> Void) {
        guard started.withLock({ s in defer { s = true }; return !s }) else { return }
        let thread = Thread { [self] in
            while true {
                wake.lock()
                if !isStopping { _ = wake.wait(until: Date(timeIntervalSinceNow: interval)) }
                wake.unlock()
                if isStopping { break }
                pass()
            }
            finished.signal()
        }
        thread.name = name
        thread.start()
    }

    /// Stops the thread: a compaction in progress stops after the step it is on (each step
    /// commits whole). Returns once the thread has ended; a second call (or one racing the
    /// first) returns too, once it has.
    func stop() {
        state.withLock { $0.stopping = true }
        wake.lock()
        wake.broadcast()
        wake.unlock()
        guard started.withLock({ $0 }) else { return }
        // The thread signals once; each caller passes the signal on to the next.
        finished.wait()
        finished.signal()
    }
}

/// Raised between compaction steps when the server is stopping.
struct MaintenanceStopped: Error, CustomStringConvertible {
    var description: String { "the server is stopping" }
}

extension SyncService {
    /// One maintenance pass: every library that took pushes since the last pass (all libraries
    /// the server has when `all`) is compacted if the policy says it is due. Errors are logged
    /// and returned, never thrown: a library that cannot be compacted now is left as it was.
    @discardableResult
    public func runMaintenance(all: Bool = false) -> [MaintenanceResult] {
        guard var policy = maintenancePolicy.compaction else { return [] }
        policy.wholeSegmentsOnly = true
        let changed = maintenance.takeChanged()
        let ids: [UUID]
        if all {
            ids = ((try? accounts.libraries().map(\.libraryID)) ?? []) + changed
        } else {
            ids = changed
        }
        var results: [MaintenanceResult] = []
        var seen = Set<UUID>()
        for id in ids where seen.insert(id).inserted {
            if maintenance.isStopping { break }
            // A file found damaged is left alone until the operator salvages it (server stopped):
            // compacting would fail on it every pass, and would write into it.
            if health.isDamaged(id) { continue }
            if let result = compactIfDue(id, policy) { results.append(result) }
        }
        return results
    }

    private func compactIfDue(_ id: UUID, _ policy: CompactionPolicy) -> MaintenanceResult? {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            let library = try library(id)
            var cheap = policy
            cheap.horizonMilliseconds = nil
            let plan = try library.compactionPlan(cheap)
            let sealDue = plan.opsToSeal > 0
            let horizonDue = policy.horizonMilliseconds != nil && maintenance.horizonDue(id, interval: maintenancePolicy.horizonCheckSeconds)
            if !sealDue {
                guard horizonDue, try library.compactionPlan(policy).dropThrough != nil else {
                    // What an earlier pass sealed may not have reached a shared store yet (it was out of reach).
                    try library.publishSealed()
                    buildStartImageIfDue(library)
                    return nil
                }
            }
            let report = try library.compact(policy, afterStep: { [maintenance] _, _ in
                if maintenance.isStopping { throw MaintenanceStopped() }
            })
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            metrics.compacted(ops: report.opsSealed, seconds: seconds)
            log.log("compact", ["library": .text(id.lowercased), "auto": .bool(true), "sealed": .integer(report.opsSealed),
                                "segments": .integer(Int64(report.segmentsWritten)),
                                "snapshot_seq": report.snapshotSeq.map(Value.integer) ?? .null,
                                "history_dropped_through": report.historyDroppedThrough.map(Value.integer) ?? .null,
                                "ms": .real((seconds * 1e6).rounded() / 1e3)])
            buildStartImageIfDue(library)
            return MaintenanceResult(library: id, report: report)
        } catch let error as ProtocolError where error.code == .unknownLibrary {
            return nil   // deleted since it took pushes: nothing to compact
        } catch {
            let message = (error as? ProtocolError)?.message ?? "\(error)"
            if let error = error as? ProtocolError, error.code == ProtocolError.Code.libraryDamaged {
                noteDamaged(code: error.code, library: id, message: error.message)
            }
            if !(error is MaintenanceStopped) { metrics.compactionFailed() }
            log.log(error is MaintenanceStopped ? "compact_stopped" : "compact_failed",
                    ["library": .text(id.lowercased), "error": .text(message)])
            // Looked at again next pass: the work left is still due.
            maintenance.markChanged(id)
            return MaintenanceResult(library: id, report: nil, failure: message)
        }
    }

    /// Builds the library's start image where its newest snapshot is big enough and has none
    /// (`MaintenancePolicy.startImageOpsMin`). A failure is logged; devices start from the snapshot.
    func buildStartImageIfDue(_ library: ServerLibrary) {
        guard let opsMin = maintenancePolicy.startImageOpsMin,
              let seq = try? library.latestSnapshotSeq(), seq >= opsMin,
              (try? library.currentStartImage()) == nil, !maintenance.isStopping else { return }
        do {
            guard let info = try library.buildStartImage() else { return }
            startImages.withLock { _ = $0.removeValue(forKey: library.libraryID) }
            log.log("start_image", ["library": .text(library.libraryID.lowercased), "seq": .integer(info.seq),
                                    "bytes": .integer(info.imageBytes), "store_bytes": .integer(info.storeBytes),
                                    "ms": .real((info.buildSeconds * 1e6).rounded() / 1e3)])
        } catch {
            library.removeStartImage()
            log.log("start_image_failed", ["library": .text(library.libraryID.lowercased), "error": .text("\(error)")])
        }
    }
}
