import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

// What `server verify` checks of PostgreSQL's side of a library.
extension PostgresServerStore {
    /// What PostgreSQL promises of library `id`, checked there (read only; beside running
    /// servers): the sealed segments run from seq 1, chained, and the log on from them to the head with no gap, each device's last answered number covers its
    /// ops and refusals, and the guard triggers are in place. `chronicle server verify --postgres`
    /// adds the replica's own checks (a replay of the log against the projection).
    public func checks(of id: UUID) throws -> [VerifyCheck] {
        let key = id.lowercased
        return try pool.withConnection { pg in
            try pg.transaction { pg in
                try pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                var checks: [VerifyCheck] = []
                let state = try PostgresLibrary.readState(id, pg, forUpdate: false)
                checks.append(try Self.segmentsCheck(id, state, pg))
                let log = try pg.execute("SELECT count(*), coalesce(min(server_seq), 0), coalesce(max(server_seq), 0) FROM chronicle_log WHERE library_id = $1", [key])
                let (count, first, last) = (try log.int(0, 0), try log.int(0, 1), try log.int(0, 2))
                let sealed = state.sealedThrough
                let whole = count == state.head - sealed && (count == 0 ? state.head == sealed : first == sealed + 1 && last == state.head)
                let segments = sealed == 0 ? "" : " the segments end at \(sealed) and"
                checks.append(VerifyCheck(name: "the log in PostgreSQL runs on from its sealed segments to the head with no gap", passed: whole,
                                          detail: whole ? "\(count) ops\(sealed == 0 ? "" : " after seq \(sealed)"), head \(state.head)"
                                                        : "\(count) ops from seq \(first) to \(last), but\(segments) the head is \(state.head)"))
                let behind = try pg.execute("""
                    SELECT o.device_id, o.top, coalesce(d.last_device_seq, -1) FROM (
                      SELECT device_id, max(device_seq) AS top FROM (
                        SELECT device_id, device_seq FROM chronicle_log WHERE library_id = $1
                        UNION ALL SELECT device_id, device_seq FROM chronicle_rejected_ops WHERE library_id = $1) AS answered
                      GROUP BY device_id) AS o
                    LEFT JOIN chronicle_devices d ON d.library_id = $1 AND d.device_id = o.device_id
                    WHERE coalesce(d.last_device_seq, -1) < o.top
                    """, [key])
                let detail = try (0..<min(behind.count, 3)).map { row in
                    "device \(try behind.string(row, 0)) answered up to \(try behind.int(row, 1)) but recorded at \(try behind.int(row, 2))"
                }
                checks.append(VerifyCheck(name: "every device's last answered number covers its ops", passed: behind.count == 0,
                                          detail: behind.count == 0 ? "ok" : detail.joined(separator: "; ")))
                let triggers = try pg.execute("""
                    SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'D'
                      AND tgname IN ('chronicle_log_kept', 'chronicle_log_unchanged', 'chronicle_rejected_ops_kept', 'chronicle_devices_forward',
                                     'chronicle_segments_kept', 'chronicle_segments_follow', 'chronicle_snapshots_kept',
                                     'chronicle_dropped_ops_kept', 'chronicle_history_base') ORDER BY tgname
                    """)
                let found = Set(try (0..<triggers.count).map { try triggers.string($0, 0) })
                let missing = ["chronicle_devices_forward", "chronicle_dropped_ops_kept", "chronicle_history_base", "chronicle_log_kept", "chronicle_log_unchanged",
                               "chronicle_rejected_ops_kept", "chronicle_segments_follow", "chronicle_segments_kept",
                               "chronicle_snapshots_kept"].filter { !found.contains($0) }
                checks.append(VerifyCheck(name: "the guard triggers are in place", passed: missing.isEmpty,
                                          detail: missing.isEmpty ? "ok" : "missing or disabled: \(missing.joined(separator: ", "))"))
                return checks
            }
        }
    }

    /// The sealed segments of library `id` run from seq 1 to where the library says they end, each
    /// one chained to the one before it, readable, and holding exactly its seqs of this library.
    static func segmentsCheck(_ id: UUID, _ state: PostgresLibrary.State, _ pg: PostgresConnection) throws -> VerifyCheck {
        var problems: [String] = []
        let key = id.lowercased
        var expected = state.historyBase + 1
        var previous: String? = state.historyBase == 0 ? "" : nil   // unknown where history was dropped
        var count = 0
        let rows = try pg.execute("""
            SELECT first_seq, last_seq, frame, digest, previous_digest FROM chronicle_segments WHERE library_id = $1 ORDER BY first_seq
            """, [id.lowercased])
        for row in 0..<rows.count {
            let first = try rows.int(row, 0), last = try rows.int(row, 1)
            let name = "segment \(first)…\(last)"
            if first != expected { problems.append("\(name) does not follow seq \(expected - 1)") }
            if let previous, try rows.string(row, 4) != previous { problems.append("\(name) is not chained to the one before it") }
            do {
                let (ops, body) = try ServerLibrary.decodeSealed(try rows.bytes(row, 2), libraryID: id)
                if ops.first?.serverSeq != first || ops.last?.serverSeq != last { problems.append("\(name) holds other seqs") }
                if LogTables.chainDigest(previous: try rows.string(row, 4), body: body) != (try rows.string(row, 3)) {
                    problems.append("\(name): its digest does not match its bytes")
                }
            } catch {
                problems.append("\(name) cannot be read: \(error)")
            }
            previous = try rows.string(row, 3)
            expected = last + 1
            count += 1
        }
        if expected - 1 != state.sealedThrough || (count > 0 && previous != state.sealedDigest) {
            problems.append("the segments end at seq \(expected - 1), but the library says \(state.sealedThrough)")
        }
        var history = ""
        if state.historyBase > 0 {
            // Past the retention horizon: a snapshot where history begins, and the id of every op before it.
            let snapshot = try pg.execute("SELECT frame, state_digest FROM chronicle_snapshots WHERE library_id = $1 AND seq = $2",
                                          [key, String(state.historyBase)])
            if snapshot.count != 1 {
                problems.append("history begins after seq \(state.historyBase), but there is no snapshot there")
            } else {
                do {
                    let decoded = try SnapshotCodec.decode(try snapshot.bytes(0, 0))
                    if decoded.libraryID != id || decoded.seq != state.historyBase {
                        problems.append("the snapshot at seq \(state.historyBase) holds library \(decoded.libraryID.lowercased) at seq \(decoded.seq)")
                    }
                } catch {
                    problems.append("the snapshot at seq \(state.historyBase) cannot be read: \(error)")
                }
            }
            let ids = try pg.execute("SELECT count(*), coalesce(min(server_seq), 0), coalesce(max(server_seq), 0) FROM chronicle_dropped_ops WHERE library_id = $1", [key])
            if try ids.int(0, 0) != state.historyBase || ids.int(0, 1) != 1 || ids.int(0, 2) != state.historyBase {
                problems.append("\(try ids.int(0, 0)) ids kept of the \(state.historyBase) ops dropped past the horizon")
            }
            history = "; history begins after seq \(state.historyBase), at its snapshot, with the ids of the ops before it"
        }
        return VerifyCheck(name: "the sealed segments in PostgreSQL run on from where history begins, chained and readable", passed: problems.isEmpty,
                           detail: problems.isEmpty ? "\(count) segments through seq \(state.sealedThrough)\(history)"
                                                    : problems.prefix(3).joined(separator: "; "))
    }
}
