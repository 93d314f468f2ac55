import ChronicleCore
import ChronicleStore
import Dispatch
import Foundation
import ChronicleServerStore


/// The sync API behind the HTTP routes (and, in tests and the simulator, called
/// directly): authenticates each call, routes it to the library's store, and
/// parks long-poll pulls until ops arrive or their wait runs out.
///
/// Parked pulls hold no thread: they wait in a registry and are answered from
/// whichever thread commits the next push to their library, or from a timer.
public final class SyncService: SyncEndpoint {
    public let dataDirectory: String
    public let accounts: Accounts
    public let metrics: Metrics
    /// The server's own files found damaged so far (`/healthz`, `/readyz`).
    public let health = ServerHealth()
    public let limits: ServiceLimits
    /// The server's structured log; extensions write their events to it too.
    public let log: ServerLog
    let clock: any ChronicleClock
    let libraries = Locked(OpenLibraries())
    let waiters = Locked<Waiters>(Waiters())
    /// Where requests that block run (the HTTP routes, woken long-polls).
    let workers: WorkerPool
    /// When libraries are compacted on their own (`runMaintenance`, `startMaintenance`).
    public let maintenancePolicy: MaintenancePolicy
    /// Schemas served beyond the built-in ones.
    public let schemas: [Schema]
    /// Where the libraries' order lives when several servers share it (`ChroniclePostgres`); nil:
    /// each library is a file in the data directory.
    public let shared: (any SharedLibraryStore)?
    /// Where the libraries' blobs are kept: the shared store's where there is one, else a file per
    /// library in the data directory (`ServerBlobFiles`).
    public let blobs: any BlobStorage
    let maintenance = MaintenanceState()
    /// What apps add to the server (`ServerExtension`), told of accepted pushes and opened
    /// libraries in this order.
    public let extensions: [any ServerExtension]
    /// Each library's newest snapshot frame while a response is sending it: devices that start
    /// from the snapshot at the same time share one copy (held only while some response holds it).
    /// Checked and filled under its lock, so requests arriving together wait for the one read
    /// rather than each reading its own copy.
    let snapshotFrames = Locked<[UUID: SharedSnapshotFrame]>([:])
    /// Each library's start image as last mapped, with when it was last found current: the ranges
    /// of one download come a few milliseconds apart and need not each read its description.
    let startImages = Locked<[UUID: (info: StartImageInfo, bytes: SharedBytes, checked: UInt64)]>([:])

    struct Waiter {
        var after: Int64
        var fire: @Sendable () -> Void
    }

    struct Waiters {
        var nextID = 0
        var byLibrary: [UUID: [Int: Waiter]] = [:]
    }

    /// `schemas`: schemas of the apps this server serves beyond the built-in ones (`Schema.builtIn`);
    /// a library is opened with the one of its name, the newest version with its history.
    /// `shared`: libraries ordered in a database several servers share, each served from this
    /// process's replica. `accounts`: users and devices kept elsewhere than the data directory's
    /// `server.sqlite` (in the database the servers share). `extensions`: what apps add to the
    /// server (`ServerExtension`), each attached to this service alone.
    public init(dataDirectory: String, limits: ServiceLimits = ServiceLimits(), maintenance: MaintenancePolicy = MaintenancePolicy(),
                log: ServerLog = ServerLog(to: nil), clock: any ChronicleClock = SystemClock(), schemas: [Schema] = [],
                shared: (any SharedLibraryStore)? = nil, accounts: Accounts? = nil, extensions: [any ServerExtension] = []) throws {
        self.dataDirectory = dataDirectory
        self.schemas = schemas
        self.shared = shared
        try Self.makePrivate(dataDirectory, log: log)
        blobs = shared?.blobs ?? ServerBlobFiles(dataDirectory: dataDirectory, clock: clock)
        maintenancePolicy = maintenance
        self.accounts = try accounts ?? Accounts(dataDirectory: dataDirectory, clock: clock)
        self.metrics = Metrics()
        self.limits = limits
        self.log = log
        self.clock = clock
        workers = WorkerPool(name: "chronicle.sync.work", threadsMax: max(1, limits.workerThreadsMax))
        self.extensions = extensions
        for each in extensions { each.attach(to: self) }
    }

    /// The data directory made 0700 (`PrivateFiles`), or narrowed to it, with what is in it
    /// and in its `libraries` and `blobs` directories narrowed to 0600: an earlier build, or a
    /// copy made by hand, may have left them readable by other users of the machine. Each
    /// narrowing is logged, since it means someone else could read them until now.
    static func makePrivate(_ dataDirectory: String, log: ServerLog) throws {
        var narrowed: [(path: String, mode: mode_t)] = []
        if let mode = try PrivateFiles.directory(dataDirectory) { narrowed.append((dataDirectory, mode)) }
        let files = FileManager.default
        for sub in ["", "libraries", "blobs"] {
            let directory = sub.isEmpty ? dataDirectory : (dataDirectory as NSString).appendingPathComponent(sub)
            if !sub.isEmpty, let mode = try PrivateFiles.narrowIfPresent(directory) { narrowed.append((directory, mode)) }
            for name in (try? files.contentsOfDirectory(atPath: directory)) ?? [] {
                let path = (directory as NSString).appendingPathComponent(name)
                var isDirectory: ObjCBool = false
                guard files.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                if let mode = try PrivateFiles.narrowIfPresent(path) { narrowed.append((path, mode)) }
            }
        }
        for (path, mode) in narrowed.prefix(20) {
            log.log("file_mode_narrowed", ["path": .text(path), "mode_was": .text(PrivateFiles.text(mode)),
                                           "mode": .text(PrivateFiles.text(mode & 0o700))])
        }
        if narrowed.count > 20 { log.log("file_modes_narrowed", ["more": .integer(Int64(narrowed.count - 20)), "directory": .text(dataDirectory)]) }
    }

    /// After an op the server wrote itself (an extension's): wakes the library's parked pulls.
    func appended(by op: Op) {
        wake(op.libraryID)
        maintenance.markChanged(op.libraryID)
    }
}
