import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

// The maintenance thread: compaction, deletions, collections, on a schedule.
extension SyncService {
    /// How often the maintenance thread looks for libraries to delete (`runLibraryDeletions`).
    public static let deletionCheckSeconds = 1.0

    /// Runs `runLibraryDeletions()` every second and `runMaintenance()` every
    /// `maintenancePolicy.checkIntervalSeconds` (when it compacts at all) on a thread of its own,
    /// until `stopMaintenance()` (`SyncServer` does both).
    public func startMaintenance() {
        let every = max(0.001, maintenancePolicy.checkIntervalSeconds)
        let tick = min(every, Self.deletionCheckSeconds)
        let compacts = maintenancePolicy.compaction != nil
        let compactedAt = Locked(DispatchTime.now().uptimeNanoseconds)
        let sweptAt = Locked<UInt64?>(nil)
        let collectedAt = Locked<UInt64?>(nil)
        /// Whether `seconds` have passed since `last` (or it never ran); if so, now is the last time.
        @Sendable func due(_ last: Locked<UInt64?>, every seconds: Double) -> Bool {
            last.withLock { last in
                let now = DispatchTime.now().uptimeNanoseconds
                if let last, Double(now - last) / 1e9 < seconds { return false }
                last = now
                return true
            }
        }
        maintenance.start(interval: tick, name: "chronicle.maintenance") { [self] in
            runLibraryDeletions()
            if due(sweptAt, every: maintenancePolicy.horizonCheckSeconds) { sweepAbandonedUploads() }
            if due(collectedAt, every: maintenancePolicy.blobCollectionSeconds) { collectUnnamedBlobs() }
            let now = DispatchTime.now().uptimeNanoseconds
            let due = compacts && compactedAt.withLock { last in
                guard Double(now - last) / 1e9 >= every - tick / 2 else { return false }
                last = now
                return true
            }
            if due { runMaintenance() }
        }
    }

    /// Stops the maintenance thread after the compaction step it is on, then the extensions
    /// (`ServerExtension.stop`); returns once both have ended.
    public func stopMaintenance() {
        maintenance.stop()
        for each in extensions { each.stop() }
    }

    /// Compacts one library on the server (seal, snapshot, horizon) and wakes nobody: the ops are
    /// the same. Then builds its start image where one is due (`MaintenancePolicy.startImageOpsMin`).
    @discardableResult
    public func compact(library id: UUID, policy: CompactionPolicy) throws -> CompactionReport {
        let library = try library(id)
        let report = try library.compact(policy)
        defer { buildStartImageIfDue(library) }
        log.log("compact", ["library": .text(id.lowercased), "sealed": .integer(report.opsSealed),
                            "segments": .integer(Int64(report.segmentsWritten)),
                            "snapshot_seq": report.snapshotSeq.map(Value.integer) ?? .null,
                            "history_dropped_through": report.historyDroppedThrough.map(Value.integer) ?? .null])
        return report
    }
}
