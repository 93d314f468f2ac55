import ChronicleCore
import Foundation

/// The tables of a library's log, as both sides keep them in SQLite: the device store
/// (`DeviceStore`) and the server's library files read and write them through this one type.
///
/// - `chronicle_meta`: the store's key-value facts (cursor, history base, incarnation, …);
/// - the confirmed log: hot blocks and sealed segments (`chronicle_log_blocks`,
///   `chronicle_segments`), read in order by `forEachConfirmedOp`;
/// - `chronicle_snapshots`: the projection's state at a seq, LZ4-framed.
///
/// Every function runs inside the caller's transaction (`in db:`).
public enum LogTables {
// LOGTABLES
    package static func meta(_ key: String, in db: Database) throws -> Value {
        try db.query("SELECT value FROM chronicle_meta WHERE key = ?1", [.text(key)]) { $0.value(0) }.first ?? .null
    }

    package static func setMeta(_ key: String, _ value: Value, in db: Database) throws {
        try db.execute("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value", [.text(key), value])
    }

    /// The highest seq sealed into segments (or below which history was dropped); 0 if none.
    package static func sealedUpTo(in db: Database) throws -> Int64 {
        let sealed = try db.scalarInt("SELECT \(StoreFormat.sealedEnd)") ?? 0
        return max(sealed, try meta("history_base_seq", in: db).integerValue ?? 0)
    }

    /// The seq before the first op this store still has (0 unless history was dropped past a snapshot).
    package static func historyBase(in db: Database) throws -> Int64 {
        try meta("history_base_seq", in: db).integerValue ?? 0
    }
}
