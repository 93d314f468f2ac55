import ChronicleCore
import ChronicleStore
import Foundation

extension ServerLibrary {
    /// Checks what the library's file promises, on read connections (a running server goes on
    /// answering meanwhile): SQLite's integrity, the sealed segments' chain and the log that
    /// continues it, each op id once, every device's last answered number covering its ops, the
    /// guard triggers, and that the projection equals a fresh replay of the history (digest).
    ///
    /// A damaged file is a failed check, not an error: the report ends where a check meets a page
    /// SQLite cannot read (`chronicle server salvage` keeps what can still be read).
    public func verify(progress: ProgressHandler? = nil) throws -> VerifyReport {
        var checks: [VerifyCheck] = []
        do {
            try read { db in try Self.verifyLog(in: db, libraryID: libraryID, into: &checks) }
            let current = try digest()
            let replayed = try read { source in
                let scratch = try ProjectionTables.scratchProjection(projection, onDisk: true)
                let base = try LogTables.replayBase(in: source, projection, preferLatest: false)
                try scratch.transaction { scratch in
                    if let base { _ = try ProjectionTables.load(storedAt: base, from: source, into: scratch, projection, libraryID: libraryID) }
                    _ = try ProjectionTables.replay(from: source, into: scratch, materializer, projection, after: base ?? 0, upTo: nil,
                                               includePending: false, progress: progress)
                }
                return try ProjectionTables.digest(projection, in: scratch)
            }
            checks.append(VerifyCheck(name: "digest equals a replay of the log", passed: current == replayed,
                                      detail: current == replayed ? current : "projection \(current) but replay gives \(replayed)"))
            return VerifyReport(checks: checks, digest: current)
        } catch let error as SQLiteError where error.isCorrupt {
            checks.append(VerifyCheck(name: "the file can be read", passed: false,
                                      detail: "SQLite cannot read part of the file (\(error.message)); with the server stopped, `chronicle server salvage` keeps what can still be read"))
            return VerifyReport(checks: checks, digest: "")
        }
    }

    static func verifyLog(in db: Database, libraryID: UUID, into checks: inout [VerifyCheck]) throws {
        let integrity = try db.query("PRAGMA integrity_check") { $0.text(0) }
        checks.append(VerifyCheck(name: "sqlite integrity_check", passed: integrity == ["ok"], detail: integrity.prefix(5).joined(separator: "; ")))

        var problems = try LogTables.verifySegments(in: db, libraryID: libraryID)
        let sealed = try LogTables.sealedUpTo(in: db)
        let (count, first, last, ids) = try db.query("SELECT count(*), coalesce(min(server_seq), 0), coalesce(max(server_seq), 0), count(DISTINCT op_id) FROM chronicle_log") {
            ($0.int(0), $0.int(1), $0.int(2), $0.int(3))
        }[0]
        if count > 0 && (first != sealed + 1 || last != sealed + count) {
            problems.append("server_seq has gaps (\(count) ops spanning \(first)…\(last) after sealed seq \(sealed))")
        }
        if ids != count { problems.append("an op id appears more than once in the log") }
        if try db.scalarInt("SELECT count(*) FROM chronicle_log l JOIN chronicle_sealed_ops s ON s.op_id = l.op_id") != 0 {
            problems.append("an op id is both sealed and in the log")
        }
        if try db.scalarInt("SELECT count(*) FROM chronicle_log l JOIN chronicle_rejected_ops r ON r.op_id = l.op_id AND r.device_id = l.device_id") != 0 {
            problems.append("an op is both in the log and refused")
        }
        // The server answers a device's next op only after its last: an op of a device past that
        // number would be answered again as new.
        let behind = try db.query("""
            SELECT l.device_id, max(l.device_seq), coalesce(d.last_device_seq, 0) FROM chronicle_log l
            LEFT JOIN chronicle_devices d ON d.device_id = l.device_id GROUP BY l.device_id HAVING max(l.device_seq) > coalesce(d.last_device_seq, 0)
            """) { "device \($0.text(0)) has op \($0.int(1)) in the log but its last answered number is \($0.int(2))" }
        problems += behind
        let triggers = Set(try db.query("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'chronicle_%'") { $0.text(0) })
        for required in ["chronicle_log_append_only_update", "chronicle_log_leaves_only_sealed", "chronicle_log_gap_free", "chronicle_devices_forward",
                         "chronicle_rejected_ops_kept_update", "chronicle_rejected_ops_kept_delete", "chronicle_segments_contiguous",
                         "chronicle_segments_immutable"] where !triggers.contains(required) {
            problems.append("guard trigger \(required) is missing")
        }
        let sealedOps = try db.scalarInt("SELECT coalesce(sum(op_count), 0) FROM chronicle_segments") ?? 0
        checks.append(VerifyCheck(name: "log invariants", passed: problems.isEmpty,
                                  detail: problems.isEmpty ? "\(count + sealedOps) ops (\(sealedOps) sealed), gap-free through seq \(max(last, sealed))"
                                                           : problems.joined(separator: "; ")))
    }
}
