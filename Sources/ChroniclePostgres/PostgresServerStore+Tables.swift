import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

// The tables servers share in PostgreSQL, by format, and their setup on first use.
extension PostgresServerStore {
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
}
