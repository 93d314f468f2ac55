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

    public init(directory: String, clock: SimulatedClock, limits: ServiceLimits,
                maintenance: MaintenancePolicy = MaintenancePolicy()) throws {
        self.directory = directory
        self.clock = clock
        self.limits = limits
        self.maintenance = maintenance
        current = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock)
    }

    /// The service running now.
    public var service: SyncService { lock.withLock { current } }

    /// How many times the server restarted.
    public var generation: Int { lock.withLock { restarts } }

    /// Drops the running service (its open libraries close) and starts a new one on the same files.
    public func restart() throws {
        // The new process opens the files; the old one (and the libraries it holds open) is gone
        // as soon as a request still running on it, if any, returns.
        let fresh = try SyncService(dataDirectory: directory, limits: limits, maintenance: maintenance, clock: clock)
        lock.withLock {
            restarts += 1
            current = fresh
        }
    }
}
