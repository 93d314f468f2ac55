import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation

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
        let fresh = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock,
                                    schemas: lock.withLock { givenSchemas })
        lock.withLock {
            backup = nil
            restarts += 1
            current = fresh
        }
    }

    /// Drops the running service (its open libraries close) and starts a new one on the same files.
    public func restart() throws {
        // The new process opens the files; the old one (and the libraries it holds open) is gone
        // as soon as a request still running on it, if any, returns.
        let fresh = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock,
                                    schemas: lock.withLock { givenSchemas })
        lock.withLock {
            restarts += 1
            current = fresh
        }
    }
}
