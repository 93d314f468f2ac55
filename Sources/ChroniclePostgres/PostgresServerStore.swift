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

    static func setUp(_ pg: PostgresConnection) throws {
        try pg.execute("SELECT pg_advisory_lock($1)", [String(setupLockKey)])
        defer { _ = try? pg.execute("SELECT pg_advisory_unlock($1)", [String(setupLockKey)]) }
        let exists = try pg.execute("SELECT to_regclass('chronicle_meta') IS NOT NULL").text(0, 0) == "t"
        if !exists {
            try pg.transaction { pg in
                for statement in statements + accountsStatements + sealingStatements + PostgresBlobStorage.statements + sessionStatements {
                    try pg.execute(statement)
                }
                try pg.execute("INSERT INTO chronicle_meta(key, value) VALUES ('format_version', $1), ('kind', 'chronicle-server')",
                               [String(formatVersion)])
            }
            return
        }
        let rows = try pg.execute("SELECT value FROM chronicle_meta WHERE key = 'format_version'")
        guard rows.count == 1, let format = Int64(try rows.string(0, 0)) else {
            throw ChronicleError(.invariantViolated, "The PostgreSQL database has a chronicle_meta table without a format version; it was not made by Chronicle.")
        }
        if format > formatVersion {
            throw ChronicleError(.futureStoreVersion, "The PostgreSQL database uses Chronicle's server format v\(format), but this build reads up to v\(formatVersion). Update Chronicle; nothing was changed.")
        }
        if format < formatVersion {
            try pg.transaction { pg in
                for statement in (format < 2 ? accountsStatements : []) + (format < 3 ? sealingStatements : [])
                    + PostgresBlobStorage.statements { try pg.execute(statement) }
                try pg.execute("UPDATE chronicle_meta SET value = $1 WHERE key = 'format_version'", [String(formatVersion)])
            }
        }
        if try pg.execute("SELECT to_regclass('chronicle_device_sessions') IS NULL").text(0, 0) == "t" {
            try pg.transaction { pg in for statement in sessionStatements { try pg.execute(statement) } }
        }
    }

    /// Access tokens given (`Accounts+Sessions.swift`): their SHA-256, never the token. Added
    /// within format 4 (2026-12-06): a build from before gives no access tokens and never reads it.
    static let sessionStatements: [String] = [
        """
        CREATE TABLE chronicle_device_sessions (
          token_hash text PRIMARY KEY,
          device_id text NOT NULL,
          device_token_hash text NOT NULL,
          expires_at bigint NOT NULL
        )
        """,
        "CREATE INDEX chronicle_device_sessions_by_device ON chronicle_device_sessions(device_id, expires_at)",
        "CREATE INDEX chronicle_device_sessions_by_expiry ON chronicle_device_sessions(expires_at)",
    ]

    /// Format 3's sealed segments: a library's oldest ops, kept as the segments a server sealed
    /// (the documented encoding in an LZ4 frame), chained by digest, in place of their log rows;
    /// and the retention horizon: segments older than it dropped behind a snapshot of the state
    /// there, their op ids kept.
    static let sealingStatements: [String] = [
        "ALTER TABLE chronicle_libraries ADD COLUMN sealed_through bigint NOT NULL DEFAULT 0",
        "ALTER TABLE chronicle_libraries ADD COLUMN sealed_digest text NOT NULL DEFAULT ''",
        "ALTER TABLE chronicle_libraries ADD COLUMN history_base bigint NOT NULL DEFAULT 0",
        "ALTER TABLE chronicle_libraries ADD COLUMN history_dropped_at bigint",
        """
        ALTER TABLE chronicle_libraries ADD CONSTRAINT chronicle_libraries_sealed_within
          CHECK (history_base >= 0 AND history_base <= sealed_through AND sealed_through <= head)
        """,
        """
        CREATE TABLE chronicle_segments (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          first_seq bigint NOT NULL CHECK (first_seq > 0),
          last_seq bigint NOT NULL,
          op_count integer NOT NULL,
          frame bytea NOT NULL,
          digest text NOT NULL,
          previous_digest text NOT NULL,
          body_bytes bigint NOT NULL,
          created_at bigint NOT NULL,
          PRIMARY KEY (library_id, first_seq),
          CHECK (last_seq >= first_seq AND op_count = last_seq - first_seq + 1)
        )
        """,
        """
        CREATE TABLE chronicle_snapshots (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          seq bigint NOT NULL CHECK (seq > 0),
          frame bytea NOT NULL,
          state_digest text NOT NULL,
          body_bytes bigint NOT NULL,
          created_at bigint NOT NULL,
          PRIMARY KEY (library_id, seq)
        )
        """,
        """
        CREATE TABLE chronicle_dropped_ops (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          op_id text NOT NULL,
          server_seq bigint NOT NULL,
          device_id text NOT NULL,
          PRIMARY KEY (library_id, op_id)
        )
        """,
        "CREATE INDEX chronicle_dropped_ops_by_seq ON chronicle_dropped_ops(library_id, server_seq)",
        // Frames are LZ4 already: stored out of line without PostgreSQL trying to compress them again.
        "ALTER TABLE chronicle_segments ALTER COLUMN frame SET STORAGE EXTERNAL",
        "ALTER TABLE chronicle_snapshots ALTER COLUMN frame SET STORAGE EXTERNAL",
        // Segments, snapshots and dropped op ids are never changed. A segment goes only behind the
        // horizon (at or before the library's history_base), a snapshot only where it is not the one
        // history begins at, an op id never: each also with its whole library.
        """
        CREATE FUNCTION chronicle_history_kept() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          base bigint;
        BEGIN
          IF TG_OP = 'DELETE' THEN
            IF current_setting('chronicle.deleting_library', true) = OLD.library_id THEN
              RETURN OLD;
            END IF;
            SELECT history_base INTO base FROM chronicle_libraries WHERE library_id = OLD.library_id;
            IF TG_TABLE_NAME = 'chronicle_segments' AND OLD.last_seq <= base THEN
              RETURN OLD;
            END IF;
            IF TG_TABLE_NAME = 'chronicle_snapshots' AND OLD.seq <> base THEN
              RETURN OLD;
            END IF;
          END IF;
          RAISE EXCEPTION '%: % is never changed', TG_TABLE_NAME, TG_ARGV[0] USING ERRCODE = 'restrict_violation';
        END
        $$
        """,
        "CREATE TRIGGER chronicle_segments_kept BEFORE UPDATE OR DELETE ON chronicle_segments FOR EACH ROW EXECUTE FUNCTION chronicle_history_kept('a sealed segment')",
        "CREATE TRIGGER chronicle_snapshots_kept BEFORE UPDATE OR DELETE ON chronicle_snapshots FOR EACH ROW EXECUTE FUNCTION chronicle_history_kept('a snapshot')",
        "CREATE TRIGGER chronicle_dropped_ops_kept BEFORE UPDATE OR DELETE ON chronicle_dropped_ops FOR EACH ROW EXECUTE FUNCTION chronicle_history_kept('an op id')",
        // History begins at a snapshot of the state there.
        """
        CREATE FUNCTION chronicle_history_base() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.history_base < OLD.history_base THEN
            RAISE EXCEPTION 'chronicle_libraries: history_base never moves back' USING ERRCODE = 'restrict_violation';
          END IF;
          IF NEW.history_base > OLD.history_base
             AND NOT EXISTS (SELECT 1 FROM chronicle_snapshots WHERE library_id = NEW.library_id AND seq = NEW.history_base) THEN
            RAISE EXCEPTION 'chronicle_libraries: history is dropped only behind a snapshot' USING ERRCODE = 'restrict_violation';
          END IF;
          RETURN NEW;
        END
        $$
        """,
        """
        CREATE TRIGGER chronicle_history_base BEFORE UPDATE OF history_base ON chronicle_libraries FOR EACH ROW
        WHEN (NEW.history_base IS DISTINCT FROM OLD.history_base) EXECUTE FUNCTION chronicle_history_base()
        """,
        // A segment continues the sealed prefix, chained to its last segment.
        """
        CREATE FUNCTION chronicle_segments_follow() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          library record;
        BEGIN
          SELECT sealed_through, sealed_digest INTO library FROM chronicle_libraries WHERE library_id = NEW.library_id;
          IF NEW.first_seq <> library.sealed_through + 1 OR NEW.previous_digest <> library.sealed_digest THEN
            RAISE EXCEPTION 'chronicle_segments: a segment must continue the sealed prefix (after seq %)', library.sealed_through
              USING ERRCODE = 'restrict_violation';
          END IF;
          RETURN NEW;
        END
        $$
        """,
        "CREATE TRIGGER chronicle_segments_follow BEFORE INSERT ON chronicle_segments FOR EACH ROW EXECUTE FUNCTION chronicle_segments_follow()",
        // Confirmed ops are never changed; one leaves the log only for a segment that holds its seq,
        // or with its whole library. Deletions are checked once a statement (a segment's 10,000 rows
        // took 220 ms with a check a row, 2026-12-06).
        "DROP TRIGGER chronicle_log_kept ON chronicle_log",
        "CREATE TRIGGER chronicle_log_unchanged BEFORE UPDATE ON chronicle_log FOR EACH ROW EXECUTE FUNCTION chronicle_kept('a confirmed op')",
        """
        CREATE FUNCTION chronicle_log_leaves() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM gone g
                     WHERE g.library_id IS DISTINCT FROM current_setting('chronicle.deleting_library', true)
                       AND coalesce((SELECT s.last_seq FROM chronicle_segments s WHERE s.library_id = g.library_id AND s.first_seq <= g.server_seq
                                     ORDER BY s.first_seq DESC LIMIT 1), 0) < g.server_seq) THEN
            RAISE EXCEPTION 'chronicle_log: a confirmed op leaves the log only for a sealed segment that holds it' USING ERRCODE = 'restrict_violation';
          END IF;
          RETURN NULL;
        END
        $$
        """,
        "CREATE TRIGGER chronicle_log_kept AFTER DELETE ON chronicle_log REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION chronicle_log_leaves()",
    ]

    /// Format 2's accounts (`PostgresAccountsStorage`): what `server.sqlite` holds for a lone server.
    static let accountsStatements: [String] = [
        """
        CREATE TABLE chronicle_users (
          name text PRIMARY KEY,
          password_hash text NOT NULL,
          library_id text NOT NULL UNIQUE,
          schema_name text NOT NULL,
          created_at bigint NOT NULL
        )
        """,
        """
        CREATE TABLE chronicle_registrations (
          device_id text PRIMARY KEY,
          user_name text NOT NULL REFERENCES chronicle_users(name),
          library_id text NOT NULL,
          token_hash text NOT NULL UNIQUE,
          created_at bigint NOT NULL
        )
        """,
        "CREATE INDEX chronicle_registrations_by_user ON chronicle_registrations(user_name)",
        "CREATE TABLE chronicle_library_deletions (library_id text PRIMARY KEY, requested_at bigint NOT NULL)",
    ]

    static let statements: [String] = [
        "CREATE TABLE chronicle_meta (key text PRIMARY KEY, value text NOT NULL)",
        """
        CREATE TABLE chronicle_libraries (
          library_id text PRIMARY KEY,
          incarnation text NOT NULL,
          schema_name text NOT NULL,
          head bigint NOT NULL DEFAULT 0 CHECK (head >= 0),
          head_time bigint NOT NULL DEFAULT 0,
          generation bigint NOT NULL DEFAULT 0,
          created_at bigint NOT NULL
        )
        """,
        """
        CREATE TABLE chronicle_log (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          server_seq bigint NOT NULL CHECK (server_seq > 0),
          op_id text NOT NULL,
          device_id text NOT NULL,
          device_seq bigint NOT NULL,
          type text NOT NULL,
          version integer NOT NULL,
          entity_id text NOT NULL,
          payload text NOT NULL,
          device_time bigint NOT NULL,
          base_seq bigint NOT NULL,
          server_time bigint NOT NULL,
          PRIMARY KEY (library_id, server_seq),
          UNIQUE (library_id, op_id)
        )
        """,
        """
        CREATE TABLE chronicle_rejected_ops (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          op_id text NOT NULL,
          device_id text NOT NULL,
          device_seq bigint NOT NULL,
          type text NOT NULL,
          entity_id text NOT NULL,
          code text NOT NULL,
          message text NOT NULL,
          rejected_at bigint NOT NULL,
          generation bigint NOT NULL,
          PRIMARY KEY (library_id, op_id)
        )
        """,
        "CREATE INDEX chronicle_rejected_ops_by_generation ON chronicle_rejected_ops(library_id, generation)",
        """
        CREATE TABLE chronicle_devices (
          library_id text NOT NULL REFERENCES chronicle_libraries,
          device_id text NOT NULL,
          last_device_seq bigint NOT NULL,
          generation bigint NOT NULL,
          PRIMARY KEY (library_id, device_id)
        )
        """,
        "CREATE INDEX chronicle_devices_by_generation ON chronicle_devices(library_id, generation)",
        // Confirmed ops and answers are never changed; rows go only with their whole library, deleted
        // by an operator's request (the transaction sets chronicle.deleting_library to its id).
        """
        CREATE FUNCTION chronicle_kept() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'DELETE' AND current_setting('chronicle.deleting_library', true) = OLD.library_id THEN
            RETURN OLD;
          END IF;
          RAISE EXCEPTION '%: % is never changed', TG_TABLE_NAME, TG_ARGV[0] USING ERRCODE = 'restrict_violation';
        END
        $$
        """,
        "CREATE TRIGGER chronicle_log_kept BEFORE UPDATE OR DELETE ON chronicle_log FOR EACH ROW EXECUTE FUNCTION chronicle_kept('a confirmed op')",
        "CREATE TRIGGER chronicle_rejected_ops_kept BEFORE UPDATE OR DELETE ON chronicle_rejected_ops FOR EACH ROW EXECUTE FUNCTION chronicle_kept('an answer')",
        """
        CREATE FUNCTION chronicle_devices_forward() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.last_device_seq < OLD.last_device_seq THEN
            RAISE EXCEPTION 'chronicle_devices: a device sequence never moves backwards' USING ERRCODE = 'restrict_violation';
          END IF;
          RETURN NEW;
        END
        $$
        """,
        "CREATE TRIGGER chronicle_devices_forward BEFORE UPDATE ON chronicle_devices FOR EACH ROW EXECUTE FUNCTION chronicle_devices_forward()",
    ]

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

    /// Where this process keeps its replica of library `id`.
    public func replicaPath(_ id: UUID) -> String {
        (cacheDirectory as NSString).appendingPathComponent("\(id.lowercased).sqlite")
    }
}
