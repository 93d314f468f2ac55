import CSQLite
import Foundation

/// Moves WAL checkpoints off the commit path.
///
/// SQLite's automatic checkpoint runs inside whichever commit crosses the
/// threshold, so one local write in a thousand would pay for copying the WAL
/// into the database and fsyncing it. Instead the writer's automatic
/// checkpoint is turned off and this object, told the WAL size after every
/// commit (`sqlite3_wal_hook`), runs a PASSIVE checkpoint on its own
/// connection in the background; PASSIVE never blocks readers or the writer.
/// See <https://sqlite.org/wal.html#ckpt>.
final class Checkpointer: @unchecked Sendable {
    private let path: String
    private let thresholdPages: Int32
    private let queue = DispatchQueue(label: "chronicle.checkpoint", qos: .utility)
    private let lock = NSLock()
    private var scheduled = false
    private var connection: Database?
    /// Checkpoints run so far (read after `drain()`).
    private(set) var completed = 0

    init(path: String, thresholdPages: Int32 = 1000) {
        self.path = path
        self.thresholdPages = thresholdPages
    }

    /// Installs the hook on the writer connection, which must outlive nothing
    /// longer than this object (the store holds both).
    func install(on database: Database) throws {
        try database.execute("PRAGMA wal_autocheckpoint = 0")
        sqlite3_wal_hook(database.handle, { context, _, _, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: pages)
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called on the writer's thread, inside its commit: only schedules work.
    private func committed(walPages: Int32) {
        guard walPages >= thresholdPages else { return }
        lock.lock()
        defer { lock.unlock() }
        guard !scheduled else { return }
        scheduled = true
        queue.async { [self] in
            lock.lock()
            scheduled = false
            lock.unlock()
            checkpoint()
        }
    }

    /// Runs one PASSIVE checkpoint on this object's own connection; only on `queue`.
    private func checkpoint() {
        do {
            if connection == nil { connection = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }()) }
            try connection?.execute("PRAGMA wal_checkpoint(PASSIVE)")
            completed += 1
        } catch {
            // A failed passive checkpoint leaves the WAL longer; the next commit tries again.
            connection = nil
        }
    }

    /// Waits for scheduled checkpoints (tests, and closing the store).
    func drain() { queue.sync {} }
}
