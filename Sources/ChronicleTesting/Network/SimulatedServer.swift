import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation
import ChronicleServerStore

/// The server as the simulation sees it: a `SyncService` over a data directory,
/// with its own clock, that can be restarted (the service dropped and a new one
/// made over the same directory). Transports always reach the current one.
public final class SimulatedServer: @unchecked Sendable {
    public let directory: String
    public let clock: SimulatedClock
    public let limits: ServiceLimits
    /// How the service compacts libraries on its own when a pass runs (`SyncService.runMaintenance`).
    public let maintenance: MaintenancePolicy
    private let lock = NSLock()
    private var current: SyncService
    private var restarts = 0
    /// Schemas the service is given beyond its build's (an app schema as an earlier server build had it).
    private var givenSchemas: [Schema]

    /// `schemas`: as `SyncService`'s (an earlier version of a built-in schema runs the server as
    /// an earlier build of it; `update(schemas:)` later).
    public init(directory: String, clock: SimulatedClock, limits: ServiceLimits,
                maintenance: MaintenancePolicy = MaintenancePolicy(), schemas: [Schema] = []) throws {
        self.directory = directory
        self.clock = clock
        self.limits = limits
        self.maintenance = maintenance
        givenSchemas = schemas
        current = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock, schemas: schemas)
    }

    /// The server is updated: it restarts with `schemas` (the build's own where empty), and opens
    /// each library with its schema's version there, migrating it.
    public func update(schemas: [Schema]) throws {
        lock.withLock { givenSchemas = schemas }
        try restart()
    }

    /// The service running now.
    public var service: SyncService { lock.withLock { current } }

    /// How many times the server restarted.
    public var generation: Int { lock.withLock { restarts } }

    /// Where `takeBackup` put the copy, until `restoreBackup` uses it.
    private var backup: String?

    /// Copies the data directory aside while the service runs (`ServerBackup`, what
    /// `chronicle server backup` does).
    public func takeBackup() throws {
        let copy = directory + ".backup"
        try? FileManager.default.removeItem(atPath: copy)
        _ = try ServerBackup.run(dataDirectory: directory, to: copy)
        lock.withLock { backup = copy }
    }

    /// Stops the service, puts the backup in the data directory's place and starts a new service
    /// on it: what the server took since the backup is gone. Nothing happens without a backup.
    public func restoreBackup() throws {
        guard let copy = lock.withLock({ backup }) else { return }
        // The old process is gone before its files are: nothing runs between simulation steps.
        try FileManager.default.removeItem(atPath: directory)
        try FileManager.default.moveItem(atPath: copy, toPath: directory)
        try startAgain(droppingBackup: true)
    }

    /// The server stops, a leaf of `table` in the library's file is broken (the one at `pick(leaves)`
    /// in key order, so that a seed replays), the library is salvaged (`ServerLibrary.salvage`, as
    /// `chronicle server salvage` does) and the server starts again. A backup taken before is
    /// dropped: it holds the history the salvage cut, at its old seqs.
    public func damageAndSalvage(library: UUID, table: String, pick: (Int) -> Int) throws -> LibrarySalvageReport {
        let path = (directory as NSString).appendingPathComponent("libraries/\(library.lowercased).sqlite")
        // The old process and every connection it held are gone before the file is touched (its
        // last connection's close would delete the WAL by name, the new file's by then): the
        // service in its place opens no library until asked.
        let schema = try lock.withLock { () throws -> Schema in
            let record = try current.accounts.libraries().first { $0.libraryID == library }
            current = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock, schemas: givenSchemas)
            return givenSchemas.first { $0.name == record?.schemaName } ?? Schema.named(record?.schemaName ?? "") ?? .readItLater
        }
        // The WAL merged into the file first, or the page broken in the file could be read from the WAL
        // instead; this connection is closed before the salvage.
        let (leaves, pageSize) = try { () throws -> ([Int64], Int64) in
            let db = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }())
            let busy = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) }.first ?? 1
            guard busy == 0 else { throw ChronicleError(.invariantViolated, "The stopped server's library file is still open elsewhere.") }
            return (try db.query("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = 'leaf' ORDER BY path", [.text(table)]) { $0.int(0) },
                    try db.scalarInt("PRAGMA page_size") ?? 4096)
        }()
        if !leaves.isEmpty {
            let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
            try handle.seek(toOffset: UInt64((leaves[pick(leaves.count)] - 1) * pageSize))
            handle.write(Data(repeating: 0xEE, count: 16))
            try handle.close()
        }
        let report = try ServerLibrary.salvage(at: path, libraryID: library, schema: schema, clock: clock)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: report.damagedPath + suffix) }
        if let copy = lock.withLock({ backup }) { try? FileManager.default.removeItem(atPath: copy) }
        try startAgain(droppingBackup: true)
        return report
    }

    /// Drops the running service (its open libraries close) and starts a new one on the same files.
    public func restart() throws {
        try startAgain(droppingBackup: false)
    }

    /// A new service on the data directory in place of the running one; `droppingBackup`: the
    /// backup taken before no longer applies.
    private func startAgain(droppingBackup: Bool) throws {
        // The new process opens the files; the old one (and the libraries it holds open) is gone
        // as soon as a request still running on it, if any, returns.
        let fresh = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock,
                                    schemas: lock.withLock { givenSchemas })
        lock.withLock {
            if droppingBackup { backup = nil }
            restarts += 1
            current = fresh
        }
    }
}
