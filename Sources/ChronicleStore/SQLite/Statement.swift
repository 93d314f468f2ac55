import CSQLite
import ChronicleCore
import Foundation

/// A prepared statement. Owns its `sqlite3_stmt` and finalizes it in `deinit`.
/// Not thread-safe: it belongs to one `Database`, used from one thread at a time.
public final class Statement {
    let handle: OpaquePointer
    unowned let database: Database
    public let sql: String

    init(database: Database, sql: String) throws(SQLiteError) {
        var handle: OpaquePointer?
        let rc = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard rc == SQLITE_OK, let handle else {
            throw database.error(rc, sql: sql)
        }
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// Binds arguments to `?1`, `?2`, …, clearing earlier bindings.
    public func bind(_ arguments: [Value]) throws(SQLiteError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (offset, value) in arguments.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    public func bind(_ value: Value, at index: Int32) throws(SQLiteError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .bool(let b): rc = sqlite3_bind_int64(handle, index, b ? 1 : 0)
        case .integer(let i): rc = sqlite3_bind_int64(handle, index, i)
        case .real(let d): rc = sqlite3_bind_double(handle, index, d)
        case .text(var s):
            rc = s.withUTF8 { buffer -> Int32 in
                guard let base = buffer.baseAddress, buffer.count > 0 else { return chronicle_bind_text(handle, index, "", 0) }
                return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    chronicle_bind_text(handle, index, $0, Int32(buffer.count))
                }
            }
        }
        guard rc == SQLITE_OK else { throw database.error(rc, sql: sql) }
    }

    /// Binds bytes as a BLOB (copied by SQLite).
    public func bind(blob bytes: [UInt8], at index: Int32) throws(SQLiteError) {
        let rc = bytes.withUnsafeBytes { raw in chronicle_bind_blob(handle, index, raw.baseAddress, Int32(raw.count)) }
        guard rc == SQLITE_OK else { throw database.error(rc, sql: sql) }
    }

    /// Binds a UUID as its 16 bytes (a BLOB, copied by SQLite), the form of `chronicle_uuid_blob`.
    public func bind(uuid: UUID, at index: Int32) throws(SQLiteError) {
        let rc = withUnsafeBytes(of: uuid.uuid) { raw in chronicle_bind_blob(handle, index, raw.baseAddress, 16) }
        guard rc == SQLITE_OK else { throw database.error(rc, sql: sql) }
    }

    /// Runs the statement to completion with `arguments` and one BLOB at `blobIndex`.
    public func execute(_ arguments: [Value], blob: [UInt8], at blobIndex: Int32) throws(SQLiteError) {
        try bind(arguments)
        try bind(blob: blob, at: blobIndex)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Runs the statement to completion with `arguments` and BLOBs at the given indexes.
    public func execute(_ arguments: [Value], blobs: [(index: Int32, bytes: [UInt8])]) throws(SQLiteError) {
        try bind(arguments)
        for blob in blobs { try bind(blob: blob.bytes, at: blob.index) }
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Runs the statement to completion with `arguments` and a UUID's 16 bytes at `uuidIndex`.
    public func execute(_ arguments: [Value], uuid: UUID, at uuidIndex: Int32) throws(SQLiteError) {
        try bind(arguments)
        try bind(uuid: uuid, at: uuidIndex)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Whether the query, with `arguments` and a UUID's 16 bytes at `uuidIndex`, has a row.
    public func exists(_ arguments: [Value], uuid: UUID, at uuidIndex: Int32) throws(SQLiteError) -> Bool {
        try bind(arguments)
        try bind(uuid: uuid, at: uuidIndex)
        defer { sqlite3_reset(handle) }
        return try step()
    }

    /// Runs the statement to completion, discarding rows.
    public func execute(_ arguments: [Value] = []) throws(SQLiteError) {
        try bind(arguments)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Advances one row; `true` while a row is available.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = database.error(rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Runs the query, calling `body` for each row without copying it.
    public func forEach(_ arguments: [Value] = [], _ body: (Row) throws -> Void) throws {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        let row = Row(statement: self)
        while try step() { try body(row) }
    }

    /// Runs the query, calling `body` for each row until it returns false (no later row is read).
    public func read(_ arguments: [Value] = [], while body: (Row) throws -> Bool) throws {
        try bind(arguments)
        defer { sqlite3_reset(handle) }
        let row = Row(statement: self)
        while try step(), try body(row) {}
    }

    /// All rows, decoded by `decode`.
    public func map<T>(_ arguments: [Value] = [], _ decode: (Row) throws -> T) throws -> [T] {
        var result: [T] = []
        try forEach(arguments) { result.append(try decode($0)) }
        return result
    }
}

/// A view of the statement's current row; valid only inside the callback that received it.
public struct Row {
    let statement: Statement
    var handle: OpaquePointer { statement.handle }

    public var columnCount: Int32 { sqlite3_column_count(handle) }
    public func name(_ index: Int32) -> String { String(cString: sqlite3_column_name(handle, index)) }
    public func isNull(_ index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }
    public func int(_ index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }
    public func double(_ index: Int32) -> Double { sqlite3_column_double(handle, index) }
    public func optionalInt(_ index: Int32) -> Int64? { isNull(index) ? nil : int(index) }

    public func text(_ index: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    public func optionalText(_ index: Int32) -> String? { isNull(index) ? nil : text(index) }

    /// A text column holding a UUID's 36-character form, parsed in place; nil if it holds anything else.
    public func uuid(_ index: Int32) -> UUID? {
        withBytes(index) { UUID(utf8: $0) }
    }

    /// Raw bytes of a column (text or blob), for hashing without decoding.
    public func withBytes<R>(_ index: Int32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let type = sqlite3_column_type(handle, index)
        let pointer = type == SQLITE_BLOB ? UnsafeRawPointer(sqlite3_column_blob(handle, index))
                                          : UnsafeRawPointer(sqlite3_column_text(handle, index))
        let count = Int(sqlite3_column_bytes(handle, index))
        return try body(UnsafeRawBufferPointer(start: pointer, count: pointer == nil ? 0 : count))
    }

    /// The column as a `Value` (integers stay integers; blobs are not used by Chronicle's projection).
    public func value(_ index: Int32) -> Value {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_NULL: .null
        case SQLITE_INTEGER: .integer(int(index))
        case SQLITE_FLOAT: .real(double(index))
        default: .text(text(index))
        }
    }

    public func columnType(_ index: Int32) -> Int32 { sqlite3_column_type(handle, index) }
}
