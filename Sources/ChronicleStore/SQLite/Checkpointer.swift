import ChronicleCore
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
///
/// Under sustained writes a PASSIVE checkpoint never catches up with the end of
/// the WAL, and SQLite only starts the WAL over once one has; left alone the WAL
/// grew to 4.6 GB during a 1,000,000-op pull. So past `restartPages` the writer
/// itself runs a RESTART checkpoint right after its commit (backpressure: it
/// waits for readers, then the next write starts the WAL from the beginning),
/// and `journal_size_limit` truncates the file back afterwards.
/// See <https://sqlite.org/wal.html#ckpt>.
package final class Checkpointer: @unchecked Sendable {
    private let path: String
    private let thresholdPages: Int32
    private let restartPages: Int32
    /// RESTART checkpoints the writer ran because the WAL outgrew `restartPages`.
    private(set) var restarts = 0
    private let queue = DispatchQueue(label: "chronicle.checkpoint", qos: .utility)
    private let lock = NSLock()
    private var scheduled = false
    private var connection: Database?
    /// While set, commits leave even a long WAL to the background checkpoint (`deferringRestart`).
    private let backgroundOnly = Locked(false)

    /// Runs `body` (one large commit after which writes pause, such as the end of a bulk
    /// apply) with the WAL left to the background checkpoint however long it grew: the
    /// writer does not copy it into the database itself before returning. The backpressure
    /// is for sustained writes, which the next ordinary commit still gets.
    func deferringRestart<T>(_ body: () throws -> T) rethrows -> T {
        backgroundOnly.withLock { $0 = true }
        defer { backgroundOnly.withLock { $0 = false } }
        return try body()
    }

    /// While set, commits schedule no checkpoint at all (`holdingCheckpoints`).
    private let holding = Locked(false)

    /// Runs `body` (a run of commits that only move data already in the store, such as a
    /// compaction's seals) with no checkpoint scheduled by its commits: neither the background
    /// one, which took one of the two cores from the work, nor a restart on the writer, which
    /// stopped it. One background checkpoint is scheduled after it.
    func holdingCheckpoints<T>(_ body: () throws -> T) rethrows -> T {
        holding.withLock { $0 = true }
        defer {
            holding.withLock { $0 = false }
            lock.lock()
            let schedule = !scheduled
            scheduled = true
            lock.unlock()
            if schedule {
                queue.async { [self] in
                    lock.lock()
                    scheduled = false
                    lock.unlock()
                    checkpoint()
                }
            }
        }
        return try body()
    }

    /// Checkpoints run so far (read after `drain()`).
    private(set) var completed = 0

    package init(path: String, thresholdPages: Int32 = 1000, restartPages: Int32 = 16_000) {
        self.path = path
        self.thresholdPages = thresholdPages
        self.restartPages = restartPages
    }

    /// Installs the hook on the writer connection, which must outlive nothing
    /// longer than this object (the store holds both).
    package func install(on database: Database) throws {
        try database.execute("PRAGMA wal_autocheckpoint = 0")
        try database.execute("PRAGMA journal_size_limit = \(Int64(thresholdPages) * 4096 * 4)")
        sqlite3_wal_hook(database.handle, { context, db, _, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: pages, writer: db)
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called on the writer's thread, right after its commit: schedules a background
    /// checkpoint, or past `restartPages` runs a RESTART one on the writer (SQLite's own
    /// automatic checkpoint runs from this same hook).
    private func committed(walPages: Int32, writer: OpaquePointer?) {
        guard walPages >= thresholdPages, !holding.withLock({ $0 }) else { return }
        if walPages >= restartPages, let writer, !backgroundOnly.withLock({ $0 }) {
            // Busy (a reader or the background checkpoint holds on) is fine: the next commit tries again.
            if sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_RESTART, nil, nil) == SQLITE_OK {
                lock.lock()
                restarts += 1
                lock.unlock()
                return
            }
        }
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

    /// Waits for scheduled checkpoints and closes this object's connection (the next one opens
    /// it again): the store's file is about to be replaced.
    func closeConnection() { queue.sync { connection = nil } }

    /// Checkpoints the whole WAL and truncates it to zero bytes, on the writer (whose lock the
    /// caller holds, so no commit schedules another background checkpoint meanwhile). A TRUNCATE
    /// checkpoint waits for readers through the busy handler but answers busy at once while the
    /// background PASSIVE checkpoint runs, so that one is waited for first, and a busy answer is
    /// tried again for a bounded time. False if the WAL could not be truncated (a reader held on).
    @discardableResult
    package func truncate(writer: Database, attempts: Int = 50) -> Bool {
        for attempt in 0..<attempts {
            drain()
            if sqlite3_wal_checkpoint_v2(writer.handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil) == SQLITE_OK { return true }
            if attempt + 1 < attempts { usleep(20_000) }
        }
        return false
    }
}
