import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// The server's order kept in one PostgreSQL database that several `chronicle serve` processes
/// share (`Schemas/store/server-postgres-v3.md`; formats 1 and 2 in `server-postgres-v1.md`, `-v2.md`).
///
/// PostgreSQL holds what decides: each library's log with its gap-free serverSeq, the answer
/// every refused op got, and each device's last answered deviceSeq. A push takes its library's
/// row lock, so pushes to one library are ordered across every process, and commits there
/// first. Sealing takes a lock of its own (`PostgresLibrary.sealed`), so pushes go on while a
/// segment's rows leave the log. Each process keeps a replica of the libraries it serves, a `ServerLibrary` file in
/// its cache directory: the projection that verdicts and rules read, and the log that pulls
/// read. A replica is disposable; a process catches it up from PostgreSQL before each push and
/// pull, and makes it anew from the log where it is missing, damaged, or from another history.
///
/// ```swift
/// let store = try PostgresServerStore(conninfo: "host=127.0.0.1 dbname=chronicle", cacheDirectory: "/var/cache/chronicle", schema: .readItLater)
/// let library = try store.library(id)
/// let response = try library.push(ops, from: device)
/// ```
public final class PostgresServerStore: SharedLibraryStore {
    /// v1: libraries, log, refused ops and devices. v2: users, device registrations and library
    /// deletions too (`PostgresAccountsStorage`). v3: sealed segments, which the log's oldest ops
    /// leave it for, and history dropped past the retention horizon behind a snapshot, the op ids
    /// kept (`PostgresLibrary.sealed`). v4: blobs, uploaded in chunks (`PostgresBlobStorage`).
    /// An older database gains what it lacks when it is opened.
    public static let formatVersion: Int64 = 4
    /// How long a statement may run by default (`statement_timeout`): 30 s.
    public static let defaultStatementTimeoutMilliseconds = 30_000

    /// The key of the advisory lock that orders the setup of the tables between processes.
    static let setupLockKey: Int64 = 0x4348_524F_4E49_434C   // "CHRONICL"

    public let pool: PostgresPool
    public let cacheDirectory: String
    public let schema: Schema
    let clock: any ChronicleClock
    private let listener = Locked<PostgresListener?>(nil)
    let counters = Locked(PostgresCounters())
    /// Each library's upstream, made once: it orders this process's writes to the library.
    private let upstreams = Locked<[UUID: PostgresLibrary]>([:])

    /// Connects, makes the tables on first use (one process at a time), and refuses a database
    /// written by a newer format.
    /// `statementTimeoutMilliseconds`: how long a statement may run, a wait for a library's row
    /// lock included, before the request is answered 503 (`server_store_unavailable`, Retry-After):
    /// a database that stalls never holds requests for longer.
    public init(conninfo: String, cacheDirectory: String, schema: Schema, poolSize: Int = 8,
                statementTimeoutMilliseconds: Int? = defaultStatementTimeoutMilliseconds, clock: any ChronicleClock = SystemClock()) throws {
        self.pool = PostgresPool(conninfo, size: poolSize, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        self.cacheDirectory = cacheDirectory
        self.schema = schema
        self.clock = clock
        try PrivateFiles.directory(cacheDirectory)
        try pool.withConnection { pg in try Self.setUp(pg) }
        try sweepReplicas()
    }

    /// This process's replica of library `id` (made in PostgreSQL on first use), following it:
    /// pushes and server ops are ordered in PostgreSQL, reads catch up first. Keep one open per
    /// library at a time (`SyncService` does); `schema` nil: the store's.
    ///
    /// A replica of another history (another database, or this one restored from a backup) is
    /// made anew from the log; so is one that cannot be read.
    public func library(_ id: UUID, schema: Schema? = nil, caps: [FreeTierCap]? = nil) throws -> ServerLibrary {
        do {
            return try open(id, schema: schema ?? self.schema, caps: caps)
        } catch let error as PostgresError where error.isUnavailable {
            counters.withLock { $0.unavailable += 1 }
            throw PostgresLibrary.unavailable(error)
        }
    }

    private func open(_ id: UUID, schema: Schema, caps: [FreeTierCap]?) throws -> ServerLibrary {
        let upstream = upstreams.withLock { open in
            if let known = open[id] { return known }
            let made = PostgresLibrary(libraryID: id, pool: pool, counters: counters)
            open[id] = made
            return made
        }
        let state = try upstream.create(schema: schema, now: clock.nowMilliseconds())
        let path = replicaPath(id)
        func make() throws -> ServerLibrary {
            // PostgreSQL commits each write first, so the replica's commits need not wait for the disk:
            // one lost with a power cut leaves the replica behind, and it catches up.
            try ServerLibrary.openOrCreate(at: path, libraryID: id, schema: schema, clock: clock, caps: caps, incarnation: state.incarnation,
                                           durable: false)
        }
        var replica = try? make()
        if let existing = replica {
            let head = existing.localHead
            // (A replica short of where PostgreSQL's history now begins cannot catch up: it starts again from the snapshot there.)
            let same = existing.incarnation == state.incarnation && head <= state.head && (head == 0 || head >= state.historyBase)
                && (try? existing.replicaGeneration()).map { $0 <= state.generation } == true
                && (head == 0 || (try? existing.pull(after: head - 1, limit: 1).ops.first?.opID.lowercased) == (try? upstream.opID(at: head)))
            if !same { replica = nil }
        }
        if replica == nil {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            replica = try make()
        }
        upstream.behindHistory.withLock { $0 = false }
        replica!.follow(upstream)
        try replica!.catchUp()
        return replica!
    }

    /// True when this process's replica of library `id` was found short of where PostgreSQL's
    /// history begins (it sat unused past the horizon): it is made anew when next opened.
    public func needsRemaking(_ id: UUID) -> Bool {
        upstreams.withLock { $0[id] }?.behindHistory.withLock { $0 } ?? false
    }

    /// The server and database, from the connection string (its password left out).
    public var label: String { Self.label(pool.conninfo) }

    /// "PostgreSQL" and the connection string with its password left out.
    static func label(_ conninfo: String) -> String {
        let kept = conninfo.split(separator: " ").filter { !$0.hasPrefix("password=") }.joined(separator: " ")
        return "PostgreSQL " + kept.replacingOccurrences(of: #"://([^:@/]*):[^@/]*@"#, with: "://$1@", options: .regularExpression)
    }

    /// Deletes library `id`: its log, refused ops and devices in PostgreSQL (one transaction), then
    /// this process's replica. Other processes' replicas go when they start again (`sweepReplicas`).
    /// The libraries' blobs, in the same database.
    public var blobs: (any BlobStorage)? { PostgresBlobStorage(pool: pool) }

    public func deleteLibrary(_ id: UUID) throws -> Bool {
        let existed = try Self.deleteLibrary(id, pool: pool)
        upstreams.withLock { _ = $0.removeValue(forKey: id) }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: replicaPath(id) + suffix) }
        return existed
    }

    /// Deletes library `id`'s log, refused ops and devices in PostgreSQL, in one transaction that
    /// also wakes every server's parked pulls on it. Returns whether there was a library.
    public static func deleteLibrary(_ id: UUID, pool: PostgresPool) throws -> Bool {
        let key = id.lowercased
        return try pool.withConnection { pg in
            try pg.transaction { pg in
                try pg.execute("SELECT set_config('chronicle.deleting_library', $1, true)", [key])
                for table in ["chronicle_blob_chunks", "chronicle_blobs", "chronicle_log", "chronicle_segments", "chronicle_snapshots", "chronicle_dropped_ops", "chronicle_rejected_ops",
                              "chronicle_devices"] {
                    try pg.execute("DELETE FROM \(table) WHERE library_id = $1", [key])
                }
                let existed = try pg.execute("DELETE FROM chronicle_libraries WHERE library_id = $1", [key]).affected > 0
                try pg.execute("SELECT pg_notify($1, $2)", [PostgresLibrary.channel, key])
                return existed
            }
        }
    }

    /// Deletes the replicas in the cache directory of libraries PostgreSQL no longer has (deleted
    /// while this process was not running, or by another one): a person's data leaves every server.
    /// Run before any library is opened. Returns the libraries whose replicas went.
    @discardableResult
    public func sweepReplicas() throws -> [UUID] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: cacheDirectory)) ?? []
        let replicas = Set(names.compactMap { name -> UUID? in
            guard name.hasSuffix(".sqlite") else { return nil }
            return UUID(text: String(name.dropLast(7)))
        })
        guard !replicas.isEmpty else { return [] }
        let known = try pool.withConnection { pg in
            let rows = try pg.execute("SELECT library_id FROM chronicle_libraries")
            return Set(try (0..<rows.count).map { try rows.string($0, 0) })
        }
        let gone = replicas.filter { !known.contains($0.lowercased) }.sorted { $0.lowercased < $1.lowercased }
        for id in gone {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: replicaPath(id) + suffix) }
        }
        return gone
    }

    /// Listens for other processes' writes (`NOTIFY` on `PostgresLibrary.channel`) on a connection
    /// and thread of its own.
    public func watch(_ changed: @escaping @Sendable (UUID?) -> Void) {
        let counters = self.counters
        let made = PostgresListener(conninfo: pool.conninfo, channel: PostgresLibrary.channel) { payload in
            if let payload {
                counters.withLock { $0.notifications += 1 }
                if let id = UUID(text: payload) { changed(id) }
            } else {
                counters.withLock { $0.listenerReconnects += 1 }
                changed(nil)
            }
        }
        let previous = listener.withLock { current -> PostgresListener? in
            defer { current = made }
            return current
        }
        previous?.stop()
        made.start()
    }

    public func stopWatching() {
        listener.withLock { current -> PostgresListener? in
            defer { current = nil }
            return current
        }?.stop()
    }

    /// The store's lines for `/metrics` (Prometheus text format).
    public func renderMetrics() -> String {
        let c = counters.withLock { $0 }
        let pool = self.pool.usage
        let listening = listener.withLock { $0?.isListening ?? false }
        return """
            # HELP chronicle_postgres_connections Connections this server holds open to PostgreSQL for libraries, by state (serve --postgres-pool caps them).
            # TYPE chronicle_postgres_connections gauge
            chronicle_postgres_connections{state="busy"} \(pool.open - pool.idle)
            chronicle_postgres_connections{state="idle"} \(pool.idle)
            # HELP chronicle_postgres_connection_waits_total Times a request waited for a connection because every pooled one was busy.
            # TYPE chronicle_postgres_connection_waits_total counter
            chronicle_postgres_connection_waits_total \(pool.waited)
            # HELP chronicle_postgres_unavailable_total Requests answered 503 server_store_unavailable: PostgreSQL out of reach, or past --postgres-timeout.
            # TYPE chronicle_postgres_unavailable_total counter
            chronicle_postgres_unavailable_total \(c.unavailable)
            # HELP chronicle_postgres_writes_total Writes (pushes, server ops) ordered and committed in PostgreSQL by this server.
            # TYPE chronicle_postgres_writes_total counter
            chronicle_postgres_writes_total \(c.writes)
            # HELP chronicle_postgres_catchups_total Times a replica caught up with what other servers committed.
            # TYPE chronicle_postgres_catchups_total counter
            chronicle_postgres_catchups_total \(c.catchUps)
            # HELP chronicle_postgres_ops_caught_up_total Ops replicas read from PostgreSQL while catching up.
            # TYPE chronicle_postgres_ops_caught_up_total counter
            chronicle_postgres_ops_caught_up_total \(c.opsCaughtUp)
            # HELP chronicle_postgres_notifications_total Notifications of writes (NOTIFY chronicle_pushes) this server received.
            # TYPE chronicle_postgres_notifications_total counter
            chronicle_postgres_notifications_total \(c.notifications)
            # HELP chronicle_postgres_listening Whether the connection listening for other servers' writes is up (1) or reconnecting (0).
            # TYPE chronicle_postgres_listening gauge
            chronicle_postgres_listening \(listening ? 1 : 0)
            # HELP chronicle_postgres_listener_reconnects_total Times the listening connection was opened again; parked pulls were all answered each time.
            # TYPE chronicle_postgres_listener_reconnects_total counter
            chronicle_postgres_listener_reconnects_total \(c.listenerReconnects)
            # HELP chronicle_postgres_segments_sealed_total Sealed segments this server's replicas handed over to PostgreSQL in place of their log rows.
            # TYPE chronicle_postgres_segments_sealed_total counter
            chronicle_postgres_segments_sealed_total \(c.segmentsSealed)
            # HELP chronicle_postgres_ops_sealed_total Ops that left PostgreSQL's log for those segments.
            # TYPE chronicle_postgres_ops_sealed_total counter
            chronicle_postgres_ops_sealed_total \(c.opsSealed)
            # HELP chronicle_postgres_ops_dropped_total Ops whose history left PostgreSQL past the retention horizon (their ids are kept).
            # TYPE chronicle_postgres_ops_dropped_total counter
            chronicle_postgres_ops_dropped_total \(c.opsDropped)

            """
    }

    /// Why PostgreSQL cannot be reached now (`SELECT 1` on a pooled connection); nil when it can.
    public func unreachable() -> String? {
        do {
            try pool.withConnection { pg in _ = try pg.execute("SELECT 1") }
            return nil
        } catch let error as PostgresError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    /// Where library `id`'s log stands in PostgreSQL: its head, how far it is sealed into segments,
    /// and the seq its history begins after (0: whole).
    public func lifecycle(_ id: UUID) throws -> (head: Int64, sealedThrough: Int64, historyBase: Int64) {
        let state = try pool.withConnection { pg in try PostgresLibrary.readState(id, pg, forUpdate: false) }
        return (state.head, state.sealedThrough, state.historyBase)
    }

    /// PostgreSQL's head for library `id`.
    public func head(_ id: UUID) throws -> Int64 {
        try pool.withConnection { pg in try PostgresLibrary.readState(id, pg, forUpdate: false).head }
    }

    /// Where this process keeps its replica of library `id`.
    public func replicaPath(_ id: UUID) -> String {
        (cacheDirectory as NSString).appendingPathComponent("\(id.lowercased).sqlite")
    }
}
