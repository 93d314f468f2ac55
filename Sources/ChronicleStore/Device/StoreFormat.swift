import ChronicleCore

/// The device store's own tables (log, outbox, metadata) and the invariants
/// SQLite enforces on them. Documented in `Schemas/store/device-v1.md` and
/// `device-v2.md` … `device-v9.md`.
///
/// A new store runs the v1 statements and then every migration, so a fresh
/// store and a migrated one are the same by construction.
package enum StoreFormat {
    /// Bumped with a migration whenever these tables change shape.
    package static let currentVersion: Int64 = 9

    /// The statements that take a store from format `key` to `key + 1`. Shipped steps are never edited.
    static let migrations: [Int64: [String]] = [1: version2, 2: version3, 3: version4, 4: version5, 5: version6, 6: version7, 7: version8,
                                                8: version9]

    /// Work a step needs that SQL cannot do, run in the step's transaction after its statements
    /// (`migrations`) and before `migrationsAfterConversion`. A new store runs them too (on empty tables).
    static let conversions: [Int64: @Sendable (Database) throws -> Void] = [8: { db in try DeviceStore.convertLogToBlocks(in: db) }]

    /// The statements of a step that follow its conversion.
    static let migrationsAfterConversion: [Int64: [String]] = [8: version9AfterConversion]

    /// Makes a new store: the v1 statements, then every step (statements, conversion, statements).
    static func create(in db: Database) throws {
        for statement in version1 { try db.execute(statement) }
        for version in migrations.keys.sorted() { try migrate(db, from: version) }
    }

    /// One step, from `version` to `version + 1`, inside the caller's transaction.
    static func migrate(_ db: Database, from version: Int64) throws {
        guard let steps = migrations[version] else {
            throw ChronicleError(.invariantViolated, "No migration from store format v\(version) to v\(version + 1).")
        }
        for statement in steps { try db.execute(statement) }
        try conversions[version]?(db)
        for statement in migrationsAfterConversion[version] ?? [] { try db.execute(statement) }
    }

    /// v9: the confirmed log kept in blocks (`chronicle_log_blocks`), a row per confirmed batch of
    /// up to `DeviceStore.logBlockOpsMax` ops instead of a row per op. A block's `body` is its ops
    /// encoded as a segment body (`Schemas/segment/segment-v1.md`), uncompressed, beside the Bloom
    /// filter of the entities they act on (`SegmentFilter`) and their newest server time. Sealing
    /// a block whole is compressing it and moving it: no op is decoded and no row per op is
    /// touched (with a row per op, deleting the rows was most of sealing's time).
    /// What the rows' indexes answered is kept apart, a row per op that sealing never touches:
    /// - `chronicle_op_ids`: every confirmed op's id as 16 bytes with its seq, hot and sealed (it
    ///   replaces `chronicle_sealed_ids` and the log's unique index): an op applies at most once;
    /// - `chronicle_own_confirmed`: this device's confirmed ops whose content the store holds (in
    ///   a block or a sealed segment, after the history base), by seq, with their number and id:
    ///   the sync bookkeeping that asked the log by device and number asks it.
    /// A block may start at or before the sealed end (a segment that ended inside it): its ops up
    /// to the sealed end are read from the segments, and it leaves once sealing passes its end.
    static let version9: [String] = [
        """
        CREATE TABLE chronicle_op_ids (
          op_id BLOB PRIMARY KEY NOT NULL CHECK (typeof(op_id) = 'blob' AND length(op_id) = 16),
          server_seq INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        "INSERT INTO chronicle_op_ids(op_id, server_seq) SELECT op_id, server_seq FROM chronicle_sealed_ids",
        "DROP TABLE chronicle_sealed_ids",
        """
        CREATE TABLE chronicle_own_confirmed (
          server_seq INTEGER PRIMARY KEY,
          device_seq INTEGER NOT NULL,
          op_id TEXT NOT NULL
        )
        """,
        "CREATE INDEX chronicle_own_confirmed_by_number ON chronicle_own_confirmed(device_seq)",
        """
        CREATE TABLE chronicle_log_blocks (
          first_seq INTEGER PRIMARY KEY,
          last_seq INTEGER NOT NULL,
          newest_time INTEGER NOT NULL,
          filter BLOB NOT NULL,
          body BLOB NOT NULL,
          CHECK (last_seq >= first_seq)
        )
        """,
        """
        CREATE TRIGGER chronicle_log_blocks_gap_free BEFORE INSERT ON chronicle_log_blocks
        WHEN NEW.first_seq IS NOT max(coalesce((SELECT last_seq FROM chronicle_log_blocks ORDER BY first_seq DESC LIMIT 1), 0),
                                      coalesce(\(sealedEnd), 0),
                                      coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_log_blocks: a block must follow the last confirmed op without a gap');
        END
        """,
        """
        CREATE TRIGGER chronicle_log_blocks_immutable BEFORE UPDATE ON chronicle_log_blocks BEGIN
          SELECT RAISE(ABORT, 'chronicle_log_blocks: the confirmed log is append-only: a block is never changed');
        END
        """,
        """
        CREATE TRIGGER chronicle_log_blocks_leave_only_sealed BEFORE DELETE ON chronicle_log_blocks
        WHEN OLD.last_seq > max(coalesce(\(sealedEnd), 0),
                                coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) BEGIN
          SELECT RAISE(ABORT, 'chronicle_log_blocks: the confirmed log is append-only: only blocks sealed into segments leave it');
        END
        """,
    ]

    /// v9, after the log's rows became blocks: the row log goes, and the outbox's guards look the
    /// confirmed ids up in `chronicle_op_ids`.
    static let version9AfterConversion: [String] = [
        "DROP TRIGGER chronicle_outbox_once",
        "DROP TRIGGER chronicle_outbox_leaves_when_settled",
        "DROP TABLE chronicle_log",
        """
        CREATE TRIGGER chronicle_outbox_once BEFORE INSERT ON chronicle_outbox
        WHEN EXISTS (SELECT 1 FROM chronicle_op_ids WHERE op_id = \(UUIDBlobFunction.name)(NEW.op_id)) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: this op id is already confirmed');
        END
        """,
        """
        CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_op_ids WHERE op_id = \(UUIDBlobFunction.name)(OLD.op_id))
         AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
        END
        """,
        "DELETE FROM chronicle_meta WHERE key = 'log_entity_index_aside'",
    ]

    /// v8: blobs, the large files ops name by their SHA-256 (`BlobRef`): those added here, queued
    /// until the server holds them, and those fetched from it, whole or so far. Chunks of
    /// `BlobLimits.chunkBytes`, keyed by their offset. Both tables are keyed without row ids (a
    /// salvage copies them by key, as it does `chronicle_sealed_ids`).
    static let version8: [String] = [
        """
        CREATE TABLE chronicle_blobs (
          hash TEXT PRIMARY KEY NOT NULL CHECK (length(hash) = 64),
          length INTEGER NOT NULL CHECK (length >= 0),
          received INTEGER NOT NULL CHECK (received BETWEEN 0 AND length),
          uploaded INTEGER NOT NULL DEFAULT 0 CHECK (uploaded BETWEEN 0 AND length),
          state TEXT NOT NULL CHECK (state IN ('queued', 'uploaded', 'refused', 'fetching', 'fetched')
                                     AND (state = 'fetching' OR received = length)),
          media_type TEXT,
          added_at INTEGER NOT NULL,
          done_at INTEGER,
          refusal TEXT
        ) WITHOUT ROWID
        """,
        "CREATE INDEX chronicle_blobs_queued ON chronicle_blobs(state, added_at)",
        """
        CREATE TABLE chronicle_blob_chunks (
          hash TEXT NOT NULL REFERENCES chronicle_blobs(hash) ON DELETE CASCADE,
          offset INTEGER NOT NULL CHECK (offset >= 0),
          data BLOB NOT NULL,
          PRIMARY KEY (hash, offset)
        ) WITHOUT ROWID
        """,
    ]

    /// v7: phrase indexes beside each entity's own search index too (titles, authors, names: an
    /// index that is not over a set and whose hits are its own rows), not only beside the indexes
    /// over documents. Made and filled when the store opens, as in v6; the version moves so that a
    /// v6 build, which would save an article without keeping its title's pairs, no longer opens
    /// the store.
    static let version7: [String] = []

    /// v6: phrase indexes (`PhraseIndex`), tables of word pairs beside the search indexes over
    /// documents, kept up to date by every write below their watermark in `chronicle_meta`.
    /// Derived from the schema like the search indexes, they are made when the store opens
    /// (`DeviceStore.openPhraseIndexes`), not here. The version moves so that an earlier build,
    /// which would write without keeping them up to date, no longer opens the store.
    static let version6: [String] = []

    /// v5: the ids of ops that left the log (sealed, or covered by a snapshot the store started
    /// from) are kept as their 16 bytes, with their seq only (`chronicle_sealed_ids`), instead of
    /// as text with the author's device id (`chronicle_sealed_ops`, which the server's library
    /// store keeps: it answers a repeated push with the original author). In a 1,000,000-op
    /// store the ids took 86 MB, more than the sealed segments themselves (85 MB); as bytes
    /// they take 27 MB. SQL that matches a text id against them converts it with
    /// `chronicle_uuid_blob()` (`UUIDBlobFunction`), which every connection of the store registers.
    static let version5: [String] = [
        """
        CREATE TABLE chronicle_sealed_ids (
          op_id BLOB PRIMARY KEY NOT NULL CHECK (typeof(op_id) = 'blob' AND length(op_id) = 16),
          server_seq INTEGER NOT NULL
        ) WITHOUT ROWID
        """,
        """
        INSERT INTO chronicle_sealed_ids(op_id, server_seq)
        SELECT \(UUIDBlobFunction.name)(op_id), server_seq FROM chronicle_sealed_ops ORDER BY 1
        """,
        "DROP TABLE chronicle_sealed_ops",
        "DROP TRIGGER chronicle_outbox_leaves_when_settled",
        """
        CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id)
         AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id)
         AND NOT EXISTS (SELECT 1 FROM chronicle_sealed_ids WHERE op_id = \(UUIDBlobFunction.name)(OLD.op_id)) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
        END
        """,
    ]

    /// v4: a snapshot's frame is the last column of `chronicle_snapshots`, sealed segments
    /// get entity filters (`segmentFilterStatements`), and the guard triggers find the end of
    /// the sealed prefix by key (`keyedGuardStatements`). SQLite keeps a
    /// `zeroblob()` unwritten only when it ends the row, so a device starting from a
    /// downloaded snapshot can reserve the frame's space and stream it in with incremental
    /// blob I/O without first holding the whole frame in memory (twice: the zeros and the
    /// row built from them). The table is rebuilt with the columns reordered; the trigger on
    /// `chronicle_segments` names it and is left as it is (`legacy_alter_table` for the rename).
    static let version4: [String] = [
        "PRAGMA legacy_alter_table = ON",
        """
        CREATE TABLE chronicle_snapshots_v4 (
          seq INTEGER PRIMARY KEY,
          state_digest TEXT NOT NULL,
          body_bytes INTEGER NOT NULL,
          created_at INTEGER NOT NULL,
          body BLOB NOT NULL
        )
        """,
        """
        INSERT INTO chronicle_snapshots_v4(seq, state_digest, body_bytes, created_at, body)
        SELECT seq, state_digest, body_bytes, created_at, body FROM chronicle_snapshots
        """,
        "DROP TABLE chronicle_snapshots",
        "ALTER TABLE chronicle_snapshots_v4 RENAME TO chronicle_snapshots",
        "PRAGMA legacy_alter_table = OFF",
    ] + segmentFilterStatements + keyedGuardStatements

    /// Per sealed segment, a Bloom filter of the entity ids its ops act on (`SegmentFilter`),
    /// so one entity's history opens only the segments that may hold it. Written when a
    /// segment is sealed and dropped with it; segments sealed before this table existed have
    /// none and are opened as before. The server's library store has it too (server v3).
    /// The log's and the segments' guard triggers find the end of the sealed prefix through the
    /// primary key (the newest segment's `last_seq`; segments never overlap, so it is the greatest)
    /// instead of `max(last_seq)`, which read every segment row: once per log row inserted or
    /// deleted, so sealing and applying slowed down as segments accumulated.
    static let sealedEnd = "(SELECT last_seq FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1)"

    package static let keyedGuardStatements: [String] = [
        "DROP TRIGGER chronicle_segments_contiguous",
        """
        CREATE TRIGGER chronicle_segments_contiguous BEFORE INSERT ON chronicle_segments
        WHEN NEW.first_seq IS NOT coalesce(\(sealedEnd),
                                           (SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0) + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_segments: a segment must continue the sealed prefix without a gap');
        END
        """,
        "DROP TRIGGER chronicle_log_leaves_only_sealed",
        """
        CREATE TRIGGER chronicle_log_leaves_only_sealed BEFORE DELETE ON chronicle_log
        WHEN OLD.server_seq > max(coalesce(\(sealedEnd), 0),
                                  coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) BEGIN
          SELECT RAISE(ABORT, 'chronicle_log is append-only: only ops sealed into a segment leave it');
        END
        """,
        "DROP TRIGGER chronicle_log_gap_free",
        """
        CREATE TRIGGER chronicle_log_gap_free BEFORE INSERT ON chronicle_log
        WHEN NEW.server_seq IS NOT max(coalesce((SELECT max(server_seq) FROM chronicle_log), 0),
                                       coalesce(\(sealedEnd), 0),
                                       coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_log: server_seq must follow the last confirmed op without a gap');
        END
        """,
    ]

    package static let segmentFilterStatements: [String] = [
        "CREATE TABLE chronicle_segment_filters (first_seq INTEGER PRIMARY KEY, filter BLOB NOT NULL)",
        """
        CREATE TRIGGER chronicle_segment_filters_follow AFTER DELETE ON chronicle_segments BEGIN
          DELETE FROM chronicle_segment_filters WHERE first_seq = OLD.first_seq;
        END
        """,
    ]

    /// v3: the log's lifecycle. A prefix of the log can be sealed into immutable,
    /// hash-chained segments (`chronicle_segments`; their op ids stay in
    /// `chronicle_sealed_ops` so an op still applies at most once), and the
    /// projection's state can be saved as snapshots (`chronicle_snapshots`).
    /// Only sealed ops may leave `chronicle_log`; the log stays gap-free across both.
    static var version3: [String] { lifecycleStatements + version3Outbox }

    static let version3Outbox: [String] = [
        // Outbox rows may also leave when the server says the op was ordered inside a snapshot this store started from.
        "DROP TRIGGER chronicle_outbox_leaves_when_settled",
        """
        CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id)
         AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id)
         AND NOT EXISTS (SELECT 1 FROM chronicle_sealed_ops WHERE op_id = OLD.op_id) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
        END
        """,
    ]

    /// The sealed-segment, snapshot and log-trigger statements; the server's library store runs them too.
    package static let lifecycleStatements: [String] = [
        """
        CREATE TABLE chronicle_segments (
          first_seq INTEGER PRIMARY KEY,
          last_seq INTEGER NOT NULL,
          op_count INTEGER NOT NULL,
          body BLOB NOT NULL,
          digest TEXT NOT NULL,
          previous_digest TEXT NOT NULL,
          body_bytes INTEGER NOT NULL,
          created_at INTEGER NOT NULL,
          CHECK (last_seq >= first_seq AND op_count = last_seq - first_seq + 1)
        )
        """,
        """
        CREATE TRIGGER chronicle_segments_contiguous BEFORE INSERT ON chronicle_segments
        WHEN NEW.first_seq IS NOT coalesce((SELECT max(last_seq) FROM chronicle_segments),
                                           (SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0) + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_segments: a segment must continue the sealed prefix without a gap');
        END
        """,
        "CREATE TRIGGER chronicle_segments_immutable BEFORE UPDATE ON chronicle_segments BEGIN SELECT RAISE(ABORT, 'chronicle_segments: a sealed segment is never changed'); END",
        """
        CREATE TRIGGER chronicle_segments_dropped_only_behind_a_snapshot BEFORE DELETE ON chronicle_segments
        WHEN OLD.last_seq > coalesce((SELECT max(seq) FROM chronicle_snapshots), 0) BEGIN
          SELECT RAISE(ABORT, 'chronicle_segments: history is dropped only where a snapshot covers it');
        END
        """,
        // Op ids that left the log (sealed, or covered by a snapshot the store started from), with their seq:
        // an op still applies at most once, and the server still answers a repeat with its original seq.
        "CREATE TABLE chronicle_sealed_ops (op_id TEXT PRIMARY KEY NOT NULL, server_seq INTEGER NOT NULL, device_id TEXT NOT NULL) WITHOUT ROWID",
        """
        CREATE TABLE chronicle_snapshots (
          seq INTEGER PRIMARY KEY,
          body BLOB NOT NULL,
          state_digest TEXT NOT NULL,
          body_bytes INTEGER NOT NULL,
          created_at INTEGER NOT NULL
        )
        """,
        "DROP TRIGGER chronicle_log_append_only_delete",
        """
        CREATE TRIGGER chronicle_log_leaves_only_sealed BEFORE DELETE ON chronicle_log
        WHEN OLD.server_seq > max(coalesce((SELECT max(last_seq) FROM chronicle_segments), 0),
                                  coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) BEGIN
          SELECT RAISE(ABORT, 'chronicle_log is append-only: only ops sealed into a segment leave it');
        END
        """,
        "DROP TRIGGER chronicle_log_gap_free",
        """
        CREATE TRIGGER chronicle_log_gap_free BEFORE INSERT ON chronicle_log
        WHEN NEW.server_seq IS NOT max(coalesce((SELECT max(server_seq) FROM chronicle_log), 0),
                                       coalesce((SELECT max(last_seq) FROM chronicle_segments), 0),
                                       coalesce((SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'), 0)) + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_log: server_seq must follow the last confirmed op without a gap');
        END
        """,
    ]

    /// v2: sync bookkeeping. Ops the server rejected leave the outbox for
    /// `chronicle_rejected` (kept, with the reason, so the app can tell the person).
    static let version2: [String] = [
        """
        CREATE TABLE chronicle_rejected (
          device_seq INTEGER PRIMARY KEY,
          op_id TEXT NOT NULL UNIQUE,
          type TEXT NOT NULL,
          version INTEGER NOT NULL,
          entity_id TEXT NOT NULL,
          payload TEXT NOT NULL,
          device_time INTEGER NOT NULL,
          base_seq INTEGER NOT NULL,
          code TEXT NOT NULL,
          message TEXT NOT NULL,
          verdict TEXT,
          rejected_at INTEGER NOT NULL,
          seen INTEGER NOT NULL DEFAULT 0
        )
        """,
        """
        CREATE TRIGGER chronicle_rejected_from_outbox BEFORE INSERT ON chronicle_rejected
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_outbox WHERE op_id = NEW.op_id AND device_seq = NEW.device_seq) BEGIN
          SELECT RAISE(ABORT, 'chronicle_rejected: only a queued op can be rejected');
        END
        """,
        "CREATE TRIGGER chronicle_rejected_fixed BEFORE UPDATE OF device_seq, op_id, type, version, entity_id, payload, device_time, base_seq, code, message, rejected_at ON chronicle_rejected BEGIN SELECT RAISE(ABORT, 'chronicle_rejected: a rejection is kept as it was recorded'); END",
        "CREATE TRIGGER chronicle_rejected_kept BEFORE DELETE ON chronicle_rejected BEGIN SELECT RAISE(ABORT, 'chronicle_rejected: rejected ops are kept'); END",
        "DROP TRIGGER chronicle_outbox_leaves_when_confirmed",
        """
        CREATE TRIGGER chronicle_outbox_leaves_when_settled BEFORE DELETE ON chronicle_outbox
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id)
         AND NOT EXISTS (SELECT 1 FROM chronicle_rejected WHERE op_id = OLD.op_id) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it or the server rejected it');
        END
        """,
        // The highest deviceSeq the server has answered (accepted, duplicate or rejected): pushes resume after it.
        "INSERT OR IGNORE INTO chronicle_meta(key, value) VALUES ('acked_device_seq', 0)",
    ]

    static let version1: [String] = [
        """
        CREATE TABLE chronicle_meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID
        """,
    ] + logStatements + [
        // The outbox: ops this device wrote that the server has not confirmed, in device order.
        """
        CREATE TABLE chronicle_outbox (
          device_seq INTEGER PRIMARY KEY,
          op_id TEXT NOT NULL UNIQUE,
          type TEXT NOT NULL,
          version INTEGER NOT NULL,
          entity_id TEXT NOT NULL,
          payload TEXT NOT NULL,
          device_time INTEGER NOT NULL,
          base_seq INTEGER NOT NULL,
          attempts INTEGER NOT NULL DEFAULT 0,
          last_error TEXT
        )
        """,
        "CREATE INDEX chronicle_outbox_by_entity ON chronicle_outbox(entity_id)",
        """
        CREATE TRIGGER chronicle_outbox_gap_free BEFORE INSERT ON chronicle_outbox
        WHEN NEW.device_seq IS NOT (SELECT value FROM chronicle_meta WHERE key = 'last_device_seq') + 1 BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: device_seq must follow the last one without a gap');
        END
        """,
        """
        CREATE TRIGGER chronicle_outbox_once BEFORE INSERT ON chronicle_outbox
        WHEN EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = NEW.op_id) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: this op id is already confirmed');
        END
        """,
        """
        CREATE TRIGGER chronicle_outbox_advance AFTER INSERT ON chronicle_outbox BEGIN
          UPDATE chronicle_meta SET value = NEW.device_seq WHERE key = 'last_device_seq';
        END
        """,
        """
        CREATE TRIGGER chronicle_outbox_leaves_when_confirmed BEFORE DELETE ON chronicle_outbox
        WHEN NOT EXISTS (SELECT 1 FROM chronicle_log WHERE op_id = OLD.op_id) BEGIN
          SELECT RAISE(ABORT, 'chronicle_outbox: an op leaves the outbox only when the confirmed log reaches it');
        END
        """,
        "CREATE TRIGGER chronicle_outbox_fixed BEFORE UPDATE OF op_id, device_seq, type, version, entity_id, payload, device_time, base_seq ON chronicle_outbox BEGIN SELECT RAISE(ABORT, 'chronicle_outbox: queued ops are immutable'); END",
        // Entities whose confirmed rows were copied aside because pending ops sit on top of them.
        "CREATE TABLE chronicle_shadowed (entity TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (entity, id)) WITHOUT ROWID",
    ]
}

extension StoreFormat {
    /// One entity's ops in order (the server's audit and pushes).
    static let logEntityIndex = "CREATE INDEX chronicle_log_by_entity ON chronicle_log(entity_id, server_seq)"

    /// The confirmed log, a row per op, and its guard triggers: the server's library store, and a device's before v9.
    package static let logStatements: [String] = [
        // The confirmed log: a gap-free prefix of the server's log, append-only.
        """
        CREATE TABLE chronicle_log (
          server_seq INTEGER PRIMARY KEY,
          op_id TEXT NOT NULL UNIQUE,
          device_id TEXT NOT NULL,
          device_seq INTEGER NOT NULL,
          type TEXT NOT NULL,
          version INTEGER NOT NULL,
          entity_id TEXT NOT NULL,
          payload TEXT NOT NULL,
          device_time INTEGER NOT NULL,
          base_seq INTEGER NOT NULL,
          server_time INTEGER NOT NULL
        )
        """,
        logEntityIndex,
        """
        CREATE TRIGGER chronicle_log_append_only_update BEFORE UPDATE ON chronicle_log BEGIN
          SELECT RAISE(ABORT, 'chronicle_log is append-only: confirmed ops are never updated');
        END
        """,
        """
        CREATE TRIGGER chronicle_log_append_only_delete BEFORE DELETE ON chronicle_log BEGIN
          SELECT RAISE(ABORT, 'chronicle_log is append-only: confirmed ops are never deleted');
        END
        """,
        """
        CREATE TRIGGER chronicle_log_gap_free BEFORE INSERT ON chronicle_log
        WHEN NEW.server_seq IS NOT (SELECT coalesce(max(server_seq), 0) + 1 FROM chronicle_log) BEGIN
          SELECT RAISE(ABORT, 'chronicle_log: server_seq must follow the last confirmed op without a gap');
        END
        """,
    ]
}
