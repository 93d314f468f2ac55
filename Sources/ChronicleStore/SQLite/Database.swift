import CSQLite
import ChronicleCore
import Foundation

/// One SQLite connection with a prepared-statement cache.
///
/// Not thread-safe on its own: a `Database` is always owned by something that
/// serializes access to it (the store's writer lock, or one reader checkout).
/// Opened in WAL mode so readers never block on the writer.
///
/// ```swift
/// let db = try Database(path: "/tmp/x.sqlite")
/// try db.transaction { db in try db.execute("INSERT INTO t VALUES (?1)", [.integer(1)]) }
/// ```
/// See <https://sqlite.org/c3ref/open.html> and <https://sqlite.org/wal.html>.
public final class Database {
    let handle: OpaquePointer
    public let path: String
    private var cache: [String: Statement] = [:]
    private static let cacheCountMax = 256
    /// `PRAGMA synchronous` as opened: FULL (true) or NORMAL.
    private let synchronousFull: Bool
    /// Where `chronicle_bm25_term` leaves the counts its phrase's IDF needs (`SearchRank`).
    let searchWindowCounts: SearchRank.WindowCounts?

    /// How a connection is opened: read-only or not, created or not, and its limits.
    public struct Options: Sendable {
        public var readOnly = false
        public var create = true
        /// How long a connection waits for a lock before `SQLITE_BUSY`.
        public var busyTimeoutMilliseconds: Int32 = 5_000
        /// `NORMAL` in WAL mode is durable against application crashes and keeps
        /// the database consistent across power loss; `FULL` also keeps the
        /// last commits across power loss.
        public var synchronousFull = true
        /// A throwaway file (a search index built on another thread): no journal, no syncs.
        public var scratch = false
        /// SQLite's page cache per connection, in KiB.
        public static let defaultCacheKilobytes = 16_000
        public init() {}
    }

    /// Process-wide SQLite settings, made once, before the process's first connection opens
    /// (`sqlite3_config` works only before SQLite initializes; afterwards it changes nothing).
    /// Every `Database` calls it; code that opens connections through the C API itself should
    /// call it first, before any other thread uses SQLite (`sqlite3_config` is not thread-safe
    /// against other SQLite calls).
    ///
    /// Memory statistics are turned off: SQLite then takes no process-wide mutex around each
    /// allocation, which threads with connections of their own (a search's two read
    /// connections, a two-thread index build, a server's worker threads) otherwise queue on.
    /// Debian's SQLite is built without lookaside memory, so a read that brings pages into a
    /// connection's cache allocates for each of them: one-word searches over 20,000 long
    /// articles were 1.4x–1.5x slower at p99 with the statistics on. `sqlite3_memory_used()` and
    /// friends read 0 afterwards. See <https://sqlite.org/c3ref/c_config_covering_index_scan.html>.
    /// Returns whether the settings took effect.
    @discardableResult
    public static func configureLibrary() -> Bool { libraryConfigured }

    private static let libraryConfigured: Bool = chronicle_config_memstatus(0) == SQLITE_OK

    public init(path: String, options: Options = Options()) throws(SQLiteError) {
        Self.configureLibrary()
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI
        flags |= options.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if options.create && !options.readOnly { flags |= SQLITE_OPEN_CREATE }
        if !options.readOnly, PrivateFiles.isPlainPath(path) {
            // SQLite would make the file 0644 less the umask, and its -wal and -shm files after it.
            // Best effort: where this fails, the open below says why.
            if options.create { _ = try? PrivateFiles.file(path) }
            _ = try? PrivateFiles.narrowDatabase(path)
        }
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let code = handle.map { sqlite3_extended_errcode($0) } ?? rc
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteError(extendedCode: code, message: message, sql: nil)
        }
        self.handle = handle
        self.path = path
        self.synchronousFull = options.synchronousFull
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, options.busyTimeoutMilliseconds)
        _ = chronicle_enable_defensive(handle)
        SearchSnippet.register(on: handle)
        searchWindowCounts = SearchRank.register(on: handle)
        UUIDBlobFunction.register(on: handle)
        // Phrase indexes (`PhraseIndex`) are written through it.
        SearchPairs.register(on: handle)
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA secure_delete = OFF")
        if options.scratch {
            try execute("PRAGMA journal_mode = OFF")
            try execute("PRAGMA synchronous = OFF")
        } else if !options.readOnly {
            try execute("PRAGMA journal_mode = WAL")
            try execute("PRAGMA synchronous = \(options.synchronousFull ? "FULL" : "NORMAL")")
        }
        try execute("PRAGMA temp_store = MEMORY")
        try execute("PRAGMA cache_size = -\(Options.defaultCacheKilobytes)")
    }

    /// `VACUUM INTO path` (a copy of the database at one moment), into a file made 0600 first:
    /// SQLite would make it 0644 less the umask. `path` must not exist, or be empty.
    public func vacuum(into path: String) throws {
        try PrivateFiles.file(path)
        try execute("VACUUM INTO ?1", [.text(path)])
    }

    /// A copy of the database at one moment into a new file at `path` (made 0600), through
    /// SQLite's online backup API: its pages copied as they are, in one step under one read
    /// transaction. About three times faster than `vacuum(into:)` (which rebuilds every b-tree:
    /// 0.3 s against 1.0 s for a 335 MB store), at the cost of copying free pages too; a
    /// migration's backup before its first step uses it. The copy is synced to the disk.
    public func backup(to path: String) throws {
        try PrivateFiles.file(path)
        do {
            // No journal and no syncs while it is written: a copy that does not finish is deleted by its caller.
            let copy = try Database(path: path, options: { var o = Options(); o.scratch = true; return o }())
            guard let backup = sqlite3_backup_init(copy.handle, "main", handle, "main") else {
                throw SQLiteError(extendedCode: sqlite3_extended_errcode(copy.handle), message: String(cString: sqlite3_errmsg(copy.handle)), sql: nil)
            }
            let stepped = sqlite3_backup_step(backup, -1)
            let finished = sqlite3_backup_finish(backup)
            guard stepped == SQLITE_DONE, finished == SQLITE_OK else {
                let code = finished != SQLITE_OK ? finished : stepped
                throw SQLiteError(extendedCode: code, message: String(cString: sqlite3_errstr(code)), sql: "backup to \(path)")
            }
            // A plain rollback-journal file, whatever mode the source is in.
            try copy.execute("PRAGMA journal_mode = DELETE")
        }
        // Closed: now to the disk.
        guard let file = FileHandle(forUpdatingAtPath: path) else {
            throw SQLiteError(extendedCode: SQLITE_CANTOPEN, message: "the backup at \(path) cannot be opened to sync it", sql: nil)
        }
        defer { try? file.close() }
        try file.synchronize()
    }

    /// Runs `body` (whole transactions) with `synchronous = NORMAL`: commits stop waiting for
    /// the WAL to reach the disk, and the database stays consistent across power loss, but the
    /// last commits before a power loss may roll back. For work that can be redone (folding ops
    /// the server still holds), never for a person's own writes; the setting goes back as it was
    /// before `body` returns, and the next FULL commit's sync covers the earlier frames too.
    /// See <https://sqlite.org/pragma.html#pragma_synchronous>.
    public func withRelaxedSync<T>(_ body: () throws -> T) throws -> T {
        guard synchronousFull else { return try body() }
        try execute("PRAGMA synchronous = NORMAL")
        defer { try? execute("PRAGMA synchronous = FULL") }
        return try body()
    }

    /// Set by `closeNow()`.
    private var closed = false

    /// Closes the connection now rather than when the last reference goes (the object must not
    /// be used afterwards): its statements are finalized first, so SQLite closes it at once.
    func closeNow() {
        guard !closed else { return }
        cache.removeAll()
        sqlite3_close_v2(handle)
        closed = true
    }

    deinit {
        cache.removeAll()
        if !closed { sqlite3_close_v2(handle) }
    }

    func error(_ rc: Int32, sql: String?) -> SQLiteError {
        let code = sqlite3_extended_errcode(handle)
        return SQLiteError(extendedCode: code == SQLITE_OK ? rc : code, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// A cached prepared statement for `sql`.
    public func statement(_ sql: String) throws(SQLiteError) -> Statement {
        if let cached = cache[sql] { return cached }
        let statement = try Statement(database: self, sql: sql)
        if cache.count >= Self.cacheCountMax { cache.removeAll(keepingCapacity: true) }
        cache[sql] = statement
        return statement
    }

    /// Runs one statement with arguments, or several without (`sqlite3_exec`).
    public func execute(_ sql: String, _ arguments: [Value] = []) throws(SQLiteError) {
        if arguments.isEmpty, sql.contains(";") {
            var message: UnsafeMutablePointer<CChar>?
            let rc = sqlite3_exec(handle, sql, nil, nil, &message)
            if rc != SQLITE_OK {
                let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
                sqlite3_free(message)
                throw SQLiteError(extendedCode: sqlite3_extended_errcode(handle), message: text, sql: sql)
            }
            return
        }
        try statement(sql).execute(arguments)
    }

    /// Writes a BLOB in pieces into a row's column that already holds a zeroblob of the
    /// full length (SQLite's incremental blob I/O), so a large value never sits in memory whole.
    /// `pieces` hands over the bytes in order; more bytes than the zeroblob holds is an error.
    public func writeBlob(table: String, column: String, rowid: Int64,
                          _ pieces: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        var blob: OpaquePointer?
        let rc = sqlite3_blob_open(handle, "main", table, column, rowid, 1, &blob)
        guard rc == SQLITE_OK, let blob else { throw error(rc, sql: "blob \(table).\(column) of row \(rowid)") }
        defer { sqlite3_blob_close(blob) }
        let length = Int(sqlite3_blob_bytes(blob))
        var offset = 0
        try pieces { piece in
            guard offset + piece.count <= length else {
                throw SQLiteError(extendedCode: SQLITE_ERROR, message: "more bytes than the \(length) the blob holds", sql: nil)
            }
            let rc = sqlite3_blob_write(blob, piece.baseAddress, Int32(piece.count), Int32(offset))
            guard rc == SQLITE_OK else { throw self.error(rc, sql: "blob \(table).\(column) of row \(rowid)") }
            offset += piece.count
        }
    }

    /// Reads a BLOB in pieces of at most `pieceBytes` (SQLite's incremental blob I/O), so a
    /// large value never sits in memory whole. Each piece is valid only during its call.
    public func readBlob(table: String, column: String, rowid: Int64, pieceBytes: Int = 1 << 20,
                         _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var blob: OpaquePointer?
        let rc = sqlite3_blob_open(handle, "main", table, column, rowid, 0, &blob)
        guard rc == SQLITE_OK, let blob else { throw error(rc, sql: "blob \(table).\(column) of row \(rowid)") }
        defer { sqlite3_blob_close(blob) }
        let length = Int(sqlite3_blob_bytes(blob))
        var piece = [UInt8](repeating: 0, count: max(1, min(pieceBytes, length)))
        var offset = 0
        while offset < length {
            let count = min(piece.count, length - offset)
            let rc = piece.withUnsafeMutableBytes { sqlite3_blob_read(blob, $0.baseAddress, Int32(count), Int32(offset)) }
            guard rc == SQLITE_OK else { throw error(rc, sql: "blob \(table).\(column) of row \(rowid)") }
            try piece.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += count
        }
    }

    /// Prepares without caching (one-off statements: DDL, integrity checks).
    public func uncached(_ sql: String) throws(SQLiteError) -> Statement { try Statement(database: self, sql: sql) }

    public func query<T>(_ sql: String, _ arguments: [Value] = [], _ decode: (Row) throws -> T) throws -> [T] {
        try statement(sql).map(arguments, decode)
    }

    public func scalarInt(_ sql: String, _ arguments: [Value] = []) throws -> Int64? {
        try query(sql, arguments) { $0.optionalInt(0) }.first ?? nil
    }

    public func scalarText(_ sql: String, _ arguments: [Value] = []) throws -> String? {
        try query(sql, arguments) { $0.optionalText(0) }.first ?? nil
    }

    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Runs `body` with SQLite's defensive mode off. Defensive mode treats any table named
    /// `<fts table>_content` as one of the FTS table's shadow tables; the search indexes'
    /// content views carry that name, and within one transaction SQLite keeps refusing to
    /// drop such a view even after the FTS table itself was dropped. Only drops run here.
    package func withoutDefensive<T>(_ body: () throws -> T) rethrows -> T {
        _ = chronicle_set_defensive(handle, 0)
        defer { _ = chronicle_set_defensive(handle, 1) }
        return try body()
    }
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Schemas attached by `attachUntilTransactionEnds`: DETACH fails inside a transaction
    /// that has read them, so `transaction` detaches them once it has ended.
    private var attachedUntilTransactionEnds: [String] = []

    /// Attaches the database file at `path` (read inside this transaction) and returns its schema name.
    func attachUntilTransactionEnds(_ path: String) throws(SQLiteError) -> String {
        precondition(isInTransaction, "attachUntilTransactionEnds outside a transaction")
        let name = "chronicle_scratch_\(attachedUntilTransactionEnds.count)"
        try execute("ATTACH DATABASE ?1 AS \(name)", [.text(path)])
        attachedUntilTransactionEnds.append(name)
        return name
    }

    private func detachAfterTransaction() {
        for name in attachedUntilTransactionEnds { try? execute("DETACH DATABASE \(name)") }
        attachedUntilTransactionEnds = []
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: committed if it returns,
    /// rolled back if it throws. Takes the write lock up front so a transaction
    /// never fails half-way on a lock upgrade.
    public func transaction<T>(_ body: (Database) throws -> T) throws -> T {
        precondition(!isInTransaction, "transactions do not nest")
        try execute("BEGIN IMMEDIATE")
        defer { detachAfterTransaction() }
        do {
            let result = try body(self)
            try execute("COMMIT")
            return result
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// A read transaction: a consistent snapshot for several queries.
    public func readTransaction<T>(_ body: (Database) throws -> T) throws -> T {
        try execute("BEGIN DEFERRED")
        defer { if isInTransaction { try? execute("ROLLBACK") } }
        return try body(self)
    }

    /// The SQLite library version, e.g. "3.40.1".
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}
