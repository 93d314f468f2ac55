import CSQLite
import ChronicleCore
import ChronicleStore
import Foundation

/// The baseline: a plain SQLite connection driven through the C API with
/// prepared statements, configured like `ChronicleStore.Database` (WAL,
/// synchronous FULL, the same cache and temp-store pragmas), so the ratio
/// measures what the engine adds on top of SQLite doing the same SQL work.
final class RawDatabase {
    let handle: OpaquePointer
    let path: String
    /// Where `chronicle_bm25_term` leaves its counts on this connection.
    let searchWindowCounts: SearchRank.WindowCounts?
    private var cache: [String: OpaquePointer] = [:]

    init(path: String, readOnly: Bool = false) throws {
        // The engine's process-wide SQLite settings, whichever side opens a connection first.
        Database.configureLibrary()
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_NOMUTEX | (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            if let handle { sqlite3_close_v2(handle) }
            throw BenchError("cannot open \(path): SQLite error \(rc)")
        }
        self.handle = handle
        self.path = path
        sqlite3_busy_timeout(handle, 5_000)
        // The engine's snippet and ranking functions, so searches run the same SQL on both sides.
        SearchSnippet.register(on: handle)
        searchWindowCounts = SearchRank.register(on: handle)
        // The phrase indexes' pairs, which the baseline writes as the engine does.
        SearchPairs.register(on: handle)
        // Confirmed op ids as their 16 bytes, which the outbox's guard triggers look up.
        UUIDBlobFunction.register(on: handle)
        try exec("PRAGMA foreign_keys = ON")
        try exec("PRAGMA secure_delete = OFF")
        if !readOnly {
            try exec("PRAGMA journal_mode = WAL")
            try exec("PRAGMA synchronous = FULL")
        }
        try exec("PRAGMA temp_store = MEMORY")
        try exec("PRAGMA cache_size = -16000")
        // Diagnostic only: extra pragmas for the baseline, e.g.
        // CHRONICLE_BENCH_BASELINE_PRAGMAS="cache_size=-262144;mmap_size=1073741824".
        if let extra = ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BASELINE_PRAGMAS"] {
            for pragma in extra.split(separator: ";") where !pragma.isEmpty { try exec("PRAGMA \(pragma)") }
        }
    }

    deinit {
        for statement in cache.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    var errorMessage: String { String(cString: sqlite3_errmsg(handle)) }

    /// Runs one or more statements without arguments.
    func exec(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? errorMessage
            sqlite3_free(message)
            throw BenchError("SQLite error \(rc): \(text) — while running: \(sql.prefix(200))")
        }
    }

    /// A prepared statement for `sql`, prepared once and kept for the connection's life.
    func prepare(_ sql: String) throws -> OpaquePointer {
        if let cached = cache[sql] { return cached }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw BenchError("SQLite error \(rc): \(errorMessage) — while preparing: \(sql.prefix(200))")
        }
        cache[sql] = statement
        return statement
    }

    /// Drops every prepared statement (after DDL that changes the tables they read).
    func clearCache() {
        for statement in cache.values { sqlite3_finalize(statement) }
        cache.removeAll()
    }

    @inline(__always)
    func bind(_ statement: OpaquePointer, _ arguments: [Value]) throws {
        sqlite3_reset(statement)
        var index: Int32 = 1
        for value in arguments {
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, index)
            case .bool(let b): rc = sqlite3_bind_int64(statement, index, b ? 1 : 0)
            case .integer(let i): rc = sqlite3_bind_int64(statement, index, i)
            case .real(let d): rc = sqlite3_bind_double(statement, index, d)
            case .text(var s):
                rc = s.withUTF8 { buffer -> Int32 in
                    guard let base = buffer.baseAddress, buffer.count > 0 else { return chronicle_bind_text(statement, index, "", 0) }
                    return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                        chronicle_bind_text(statement, index, $0, Int32(buffer.count))
                    }
                }
            }
            guard rc == SQLITE_OK else { throw BenchError("bind failed (\(rc)): \(errorMessage)") }
            index += 1
        }
    }

    /// Binds, runs to completion and resets a statement that returns no rows.
    @inline(__always)
    func run(_ statement: OpaquePointer, _ arguments: [Value]) throws {
        try bind(statement, arguments)
        var rc = sqlite3_step(statement)
        while rc == SQLITE_ROW { rc = sqlite3_step(statement) }
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else {
            throw BenchError("SQLite error \(rc): \(errorMessage) — while running: \(String(cString: sqlite3_sql(statement)).prefix(200))")
        }
    }

    func run(_ sql: String, _ arguments: [Value] = []) throws { try run(try prepare(sql), arguments) }

    /// `run` with `blob` bound at parameter `index` after `arguments` (which leave it out).
    func run(_ statement: OpaquePointer, _ arguments: [Value], blob: [UInt8], at index: Int32) throws {
        try run(statement, arguments, blobs: [(blob, index)])
    }

    /// `run` with BLOBs bound at their parameters after `arguments` (which leave them out).
    func run(_ statement: OpaquePointer, _ arguments: [Value], blobs: [(bytes: [UInt8], index: Int32)]) throws {
        try bind(statement, arguments)
        for blob in blobs {
            let rc = blob.bytes.withUnsafeBytes { chronicle_bind_blob(statement, blob.index, $0.baseAddress, Int32($0.count)) }
            guard rc == SQLITE_OK else { throw BenchError("bind failed (\(rc)): \(errorMessage)") }
        }
        var step = sqlite3_step(statement)
        while step == SQLITE_ROW { step = sqlite3_step(statement) }
        sqlite3_reset(statement)
        guard step == SQLITE_DONE else {
            throw BenchError("SQLite error \(step): \(errorMessage) — while running: \(String(cString: sqlite3_sql(statement)).prefix(200))")
        }
    }

    /// The first column of the first row as an integer.
    func scalarInt(_ sql: String, _ arguments: [Value] = []) throws -> Int64? {
        let statement = try prepare(sql)
        try bind(statement, arguments)
        defer { sqlite3_reset(statement) }
        let rc = sqlite3_step(statement)
        if rc == SQLITE_ROW { return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 0) }
        guard rc == SQLITE_DONE else { throw BenchError("SQLite error \(rc): \(errorMessage)") }
        return nil
    }

    /// Every row, each column as text (or nil), for setup work outside the timers.
    func rows(_ sql: String) throws -> [[String?]] {
        let statement = try prepare(sql)
        try bind(statement, [])
        defer { sqlite3_reset(statement) }
        var result: [[String?]] = []
        let count = sqlite3_column_count(statement)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw BenchError("SQLite error \(rc): \(errorMessage)") }
            result.append((0..<count).map { column in
                sqlite3_column_text(statement, column).map { String(cString: $0) }
            })
        }
        return result
    }
}

/// One statement of baseline work, resolved to its prepared handle ahead of
/// time, as hand-written SQLite code would hold it.
struct PreparedStep {
    let statement: OpaquePointer
    let arguments: [Value]
}

extension RawDatabase {
    func execute(_ steps: [PreparedStep]) throws {
        for step in steps { try run(step.statement, step.arguments) }
    }

    /// The materializer's SQL for `op`, prepared on this connection.
    func prepared(_ steps: [SQLStep]) throws -> [PreparedStep] {
        try steps.map { PreparedStep(statement: try prepare($0.sql), arguments: $0.arguments) }
    }
}

/// The SQL a device store is made of, read back from a freshly created store so
/// the baseline runs against exactly the same tables, indexes, FTS5 tables and
/// triggers (the engine's store-format DDL is internal to ChronicleStore).
struct StoreDDL {
    var statements: [String]
    var meta: [(key: String, value: String?, isInteger: Bool)]

    static func read(fromStoreAt path: String, schema: Schema) throws -> StoreDDL {
        let source = try RawDatabase(path: path, readOnly: true)
        let ftsNames = ProjectionSchema(schema: schema).searchIndexes.map(\.index.index)
        var statements: [String] = []
        for row in try source.rows("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid") {
            guard let type = row[0], let name = row[1], let sql = row[2] else { continue }
            if name.hasPrefix("sqlite_") { continue }
            // FTS5 makes its own shadow tables when its virtual table is created.
            // (Phrase indexes, `<index>_pairs`, are FTS5 tables of their own.)
            if type == "table", !sql.hasPrefix("CREATE VIRTUAL TABLE"), ftsNames.contains(where: { name.hasPrefix($0 + "_") }) { continue }
            statements.append(sql)
        }
        // Diagnostic only: CHRONICLE_BENCH_BASELINE_DDL=no-prefix|no-fts changes the
        // baseline's DDL to show what the FTS5 prefix indexes, or FTS5 as a whole, cost.
        switch ProcessInfo.processInfo.environment["CHRONICLE_BENCH_BASELINE_DDL"] {
        case "no-prefix"?:
            statements = statements.map { $0.replacingOccurrences(of: ", prefix='2 3'", with: "") }
        case "no-fts"?:
            statements = statements.filter { sql in !ftsNames.contains { sql.contains(ProjectionSchema.quoted($0)) } }
        default:
            break
        }
        let meta = try source.rows("SELECT key, value, typeof(value) FROM chronicle_meta ORDER BY key").map {
            (key: $0[0] ?? "", value: $0[1], isInteger: $0[2] == "integer")
        }
        return StoreDDL(statements: statements, meta: meta)
    }

    /// A new baseline database at `path` with the same DDL and metadata rows.
    func createBaseline(at path: String) throws -> RawDatabase {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let db = try RawDatabase(path: path)
        try db.exec("BEGIN IMMEDIATE")
        for statement in statements { try db.exec(statement) }
        for row in meta {
            let value: Value = row.value.map { row.isInteger ? .integer(Int64($0) ?? 0) : .text($0) } ?? .null
            try db.run("INSERT INTO chronicle_meta(key, value) VALUES (?1, ?2)", [.text(row.key), value])
        }
        try db.exec("COMMIT")
        return db
    }
}

/// The log row the engine appends for a confirmed op, as arguments of
/// `INSERT INTO chronicle_log(<logColumns>) VALUES (?1 … ?11)`.
enum LogRow {
    static let columns = "server_seq, op_id, device_id, device_seq, type, version, entity_id, payload, device_time, base_seq, server_time"
    static let insertSQL = "INSERT INTO chronicle_log(\(columns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"

    static func arguments(_ op: Op) -> [Value] {
        [.integer(op.serverSeq!), .text(op.opID.lowercased), .text(op.deviceID.lowercased), .integer(op.deviceSeq),
         .text(op.type), .integer(Int64(op.version)), .text(op.entityID.lowercased), .text(CanonicalJSON.encode(op.payload)),
         .integer(op.deviceTime), .integer(op.baseSeq), .integer(op.serverTime!)]
    }
}

/// A confirmed batch as the device keeps it (store format 9): one block of the log (the ops
/// encoded as a segment body, with their entity filter and newest server time) and each op's id
/// as its 16 bytes with its seq. Built before a baseline's clock starts, as the engine builds
/// them off its writer.
struct LogBlockRow {
    static let insertSQL = "INSERT INTO chronicle_log_blocks(first_seq, last_seq, newest_time, filter, body) VALUES (?1, ?2, ?3, ?4, ?5)"
    static let idInsertSQL = "INSERT INTO chronicle_op_ids(op_id, server_seq) VALUES (?1, ?2)"

    var firstSeq: Int64
    var lastSeq: Int64
    var newestTime: Int64
    var filter: [UInt8]
    var body: [UInt8]
    var ids: [(bytes: [UInt8], seq: Int64)]

    init(_ batch: [Op]) throws {
        firstSeq = batch.first!.serverSeq!
        lastSeq = batch.last!.serverSeq!
        newestTime = batch.compactMap(\.serverTime).max() ?? 0
        filter = SegmentFilter(ids: Set(batch.map(\.entityID))).bytes
        body = SegmentCodec.encodeBody(try Segment(libraryID: batch[0].libraryID, ops: batch))
        ids = batch.map { op in (withUnsafeBytes(of: op.opID.uuid) { Array($0) }, op.serverSeq!) }
    }

    /// Runs `insertSQL` (prepared as `block`) for the block.
    func insertBlock(_ block: OpaquePointer, in db: RawDatabase) throws {
        try db.run(block, [.integer(firstSeq), .integer(lastSeq), .integer(newestTime), .null], blobs: [(filter, 4), (body, 5)])
    }

    /// Runs `idInsertSQL` (prepared as `id`) for each op.
    func insertIDs(_ id: OpaquePointer, in db: RawDatabase) throws {
        for op in ids { try db.run(id, [.null, .integer(op.seq)], blob: op.bytes, at: 1) }
    }
}

/// The outbox row the engine appends for a local op.
enum OutboxRow {
    static let insertSQL = """
        INSERT INTO chronicle_outbox(device_seq, op_id, type, version, entity_id, payload, device_time, base_seq)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
        """

    static func arguments(_ op: Op) -> [Value] {
        [.integer(op.deviceSeq), .text(op.opID.lowercased), .text(op.type), .integer(Int64(op.version)),
         .text(op.entityID.lowercased), .text(CanonicalJSON.encode(op.payload)), .integer(op.deviceTime), .integer(op.baseSeq)]
    }
}
