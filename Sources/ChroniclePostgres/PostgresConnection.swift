import CPQ
import Foundation

/// An error PostgreSQL or libpq reported: its SQLSTATE where the server sent one, and its message.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// The five-character SQLSTATE (`23505` for a unique violation…); nil where no server answered.
    public var sqlState: String?
    public var message: String

    public init(sqlState: String?, message: String) {
        self.sqlState = sqlState
        self.message = message
    }

    public var description: String { sqlState.map { "PostgreSQL \($0): \(message)" } ?? "PostgreSQL: \(message)" }

    /// No answer came: the connection failed or was lost. The same work may be tried again on a new one.
    public var isConnectionFailure: Bool { sqlState == nil || sqlState!.hasPrefix("08") || sqlState == "57P01" }

    /// PostgreSQL cannot do the work now: the connection failed or was lost, a statement ran past
    /// its timeout (waiting on a lock another server holds, say), or the server is out of
    /// connections or shutting down. Answered 503 with a Retry-After; nothing was written.
    public var isUnavailable: Bool {
        isConnectionFailure || sqlState == "57014" || sqlState == "55P03" || sqlState?.hasPrefix("53") == true || sqlState?.hasPrefix("57P") == true
    }

    /// Another transaction got in the way (serialization failure, deadlock): try the whole transaction again.
    public var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
}

/// The rows a statement returned, in PostgreSQL's text format.
public final class PostgresRows {
    private let result: OpaquePointer

    init(_ result: OpaquePointer) { self.result = result }
    deinit { PQclear(result) }

    public var count: Int { Int(PQntuples(result)) }
    public var columns: Int { Int(PQnfields(result)) }
    /// The number of rows an INSERT, UPDATE or DELETE touched.
    public var affected: Int { Int(String(cString: PQcmdTuples(result))) ?? 0 }

    public func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(result, Int32(row), Int32(column)) == 1 }

    public func text(_ row: Int, _ column: Int) -> String? {
        guard !isNull(row, column) else { return nil }
        return String(cString: PQgetvalue(result, Int32(row), Int32(column)))
    }

    /// The value as a 64-bit integer; a NULL or a value that is not one is an error, never a silent 0.
    public func int(_ row: Int, _ column: Int) throws(PostgresError) -> Int64 {
        guard let text = text(row, column), let value = Int64(text) else {
            throw PostgresError(sqlState: nil, message: "column \(column) of row \(row) is not an integer")
        }
        return value
    }

    /// A `bytea` value's bytes (libpq unescapes PostgreSQL's text form); NULL is an error.
    public func bytes(_ row: Int, _ column: Int) throws(PostgresError) -> [UInt8] {
        guard !isNull(row, column), let value = PQgetvalue(result, Int32(row), Int32(column)) else {
            throw PostgresError(sqlState: nil, message: "column \(column) of row \(row) is NULL")
        }
        var length = 0
        guard let raw = PQunescapeBytea(UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), &length) else {
            throw PostgresError(sqlState: nil, message: "column \(column) of row \(row) is not a bytea value")
        }
        defer { PQfreemem(raw) }
        return Array(UnsafeBufferPointer(start: raw, count: length))
    }

    /// The value as text; NULL is an error.
    public func string(_ row: Int, _ column: Int) throws(PostgresError) -> String {
        guard let text = text(row, column) else {
            throw PostgresError(sqlState: nil, message: "column \(column) of row \(row) is NULL")
        }
        return text
    }
}

/// One connection to a PostgreSQL server (libpq). Used by one thread at a time: `PostgresPool`
/// hands connections out. Statements take their arguments as parameters (`$1`, `$2`…), in text
/// form, never spliced into the SQL.
public final class PostgresConnection {
    private let handle: OpaquePointer
    public let conninfo: String
    /// The `statement_timeout` this connection sets (again after `reset`).
    public let statementTimeoutMilliseconds: Int?

    /// Connects; `conninfo` is a libpq connection string (`host=127.0.0.1 port=5432 dbname=chronicle`)
    /// or URI (`postgresql://user@host/db`). Unless `conninfo` says otherwise, a connection attempt
    /// waits at most `connectTimeoutSeconds`, and TCP keepalives find a peer gone silent within
    /// about a minute. `statementTimeoutMilliseconds`: no statement (a lock wait included) runs
    /// longer; it fails with SQLSTATE 57014 (`isUnavailable`) instead of holding its caller.
    public init(_ conninfo: String, connectTimeoutSeconds: Int = 10, statementTimeoutMilliseconds: Int? = nil) throws(PostgresError) {
        self.conninfo = conninfo
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        // Defaults first, the caller's string last: libpq takes the last value given for a key word,
        // and expands `dbname` (the first one) when it holds a connection string or URI.
        let settings: [(String, String)] = [("connect_timeout", String(connectTimeoutSeconds)), ("keepalives", "1"),
                                            ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
                                            ("dbname", conninfo)]
        let keys = settings.map { strdup($0.0) }, values = settings.map { strdup($0.1) }
        defer { for pointer in keys + values { free(pointer) } }
        let made: OpaquePointer? = (keys.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keyBuffer in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valueBuffer in
                PQconnectdbParams(keyBuffer.baseAddress, valueBuffer.baseAddress, 1)
            }
        }
        guard let handle = made else {
            throw PostgresError(sqlState: nil, message: "libpq could not allocate a connection")
        }
        self.handle = handle
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(handle))
            throw PostgresError(sqlState: nil, message: message.isEmpty ? "could not connect" : message)
        }
        // Warnings and notices (NOTICE: relation already exists…) are not written to stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        if let statementTimeoutMilliseconds {
            try execute("SELECT set_config('statement_timeout', $1, false)", [String(statementTimeoutMilliseconds)])
        }
    }

    deinit { PQfinish(handle) }

    /// The connection is usable (libpq's view; a server gone away shows here after a statement failed).
    public var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Reconnects with the same parameters.
    public func reset() {
        PQreset(handle)
        if isHealthy, let statementTimeoutMilliseconds {
            _ = try? execute("SELECT set_config('statement_timeout', $1, false)", [String(statementTimeoutMilliseconds)])
        }
    }

    /// Runs one statement with `parameters` bound to `$1`, `$2`… (nil is NULL).
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresRows {
        let copies: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for copy in copies { free(copy) } }
        let result: OpaquePointer? = copies.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(buffer.count, 1)) { values in
                PQexecParams(handle, sql, Int32(parameters.count), nil, parameters.isEmpty ? nil : values, nil, nil, 0)
            }
        }
        return try finished(result)
    }

    /// The rows of a statement's `result`, or its error.
    private func finished(_ result: OpaquePointer?) throws(PostgresError) -> PostgresRows {
        guard let result else {
            throw PostgresError(sqlState: nil, message: Self.trimmed(PQerrorMessage(handle)))
        }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(result)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            let message = primary ?? Self.trimmed(PQresultErrorMessage(result))
            PQclear(result)
            throw PostgresError(sqlState: state, message: message.isEmpty ? Self.trimmed(PQerrorMessage(handle)) : message)
        }
    }

    /// A statement parameter: text (nil is NULL), or bytes sent as they are (a `bytea` value).
    public enum Value {
        case text(String?)
        case bytes([UInt8])
    }

    /// Runs one statement with `values` bound to `$1`, `$2`…; bytes travel in binary form, unescaped.
    @discardableResult
    public func execute(_ sql: String, values: [Value]) throws(PostgresError) -> PostgresRows {
        var buffers: [UnsafeMutableRawPointer?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for value in values {
            switch value {
            case .text(let text):
                buffers.append(text.map { UnsafeMutableRawPointer(strdup($0)!) })
                lengths.append(0)
                formats.append(0)
            case .bytes(let bytes):
                let copy = malloc(max(bytes.count, 1))!
                bytes.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: bytes.count) } }
                buffers.append(copy)
                lengths.append(Int32(bytes.count))
                formats.append(1)
            }
        }
        defer { for buffer in buffers { free(buffer) } }
        let pointers: [UnsafePointer<CChar>?] = buffers.map { $0.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) } }
        let result: OpaquePointer? = PQexecParams(handle, sql, Int32(values.count), nil, pointers, lengths, formats, 0)
        return try finished(result)
    }

    /// Runs `body` in a transaction: committed if it returns, rolled back if it throws. Inside a
    /// transaction already (a pinned connection, `PostgresPool.withPinnedConnection`), it is a
    /// savepoint of that one: released if `body` returns, rolled back to if it throws, and committed
    /// or not with the transaction around it.
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let nested = PQtransactionStatus(handle) == PQTRANS_INTRANS
        try execute(nested ? "SAVEPOINT chronicle_nested" : "BEGIN")
        do {
            let value = try body(self)
            try execute(nested ? "RELEASE SAVEPOINT chronicle_nested" : "COMMIT")
            return value
        } catch {
            _ = try? execute(nested ? "ROLLBACK TO SAVEPOINT chronicle_nested" : "ROLLBACK")
            throw error
        }
    }

    /// Waits up to `milliseconds` for notifications on the channels this connection `LISTEN`s to,
    /// and returns their payloads (empty when none came); throws once the connection is lost.
    public func notifications(waitingMilliseconds milliseconds: Int32) throws(PostgresError) -> [String] {
        var found = takeNotifications()
        guard found.isEmpty else { return found }
        var poller = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard poller.fd >= 0 else { throw PostgresError(sqlState: nil, message: "the connection has no socket") }
        let ready = poll(&poller, 1, milliseconds)
        if ready < 0 && errno != EINTR { throw PostgresError(sqlState: nil, message: "poll: \(String(cString: strerror(errno)))") }
        guard ready > 0 else { return [] }
        guard PQconsumeInput(handle) == 1 else {
            throw PostgresError(sqlState: nil, message: Self.trimmed(PQerrorMessage(handle)))
        }
        found = takeNotifications()
        return found
    }

    private func takeNotifications() -> [String] {
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        return payloads
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "" }
        return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Connections shared by a process's threads: `withConnection` lends one (opening it when none is
/// free and fewer than `size` are open, waiting otherwise) and takes it back. A connection that
/// failed is reset before it is lent again.
public final class PostgresPool: @unchecked Sendable {
    public let conninfo: String
    public let size: Int
    /// Each connection's `statement_timeout` (nil: PostgreSQL's own, none by default).
    public let statementTimeoutMilliseconds: Int?
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    /// The connections `withPinnedConnection` lent, by the thread they are pinned to.
    private var pinned: [pthread_t: PostgresConnection] = [:]
    private var open = 0
    private var waited = 0

    public init(_ conninfo: String, size: Int = 8, statementTimeoutMilliseconds: Int? = nil) {
        self.conninfo = conninfo
        self.size = max(1, size)
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
    }

    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        if let connection = pinnedConnection() { return try body(connection) }
        let connection = try take()
        defer { give(connection) }
        return try body(connection)
    }

    /// Lends a connection as `withConnection` does, and lends the same one to every
    /// `withConnection` this thread calls until `body` returns: what `body` does through other
    /// parts of the server (blobs, accounts) runs in the transaction it holds open, and needs no
    /// second connection (which a pool of one would never have free).
    public func withPinnedConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        if let connection = pinnedConnection() { return try body(connection) }
        let connection = try take()
        let thread = pthread_self()
        condition.lock()
        pinned[thread] = connection
        condition.unlock()
        defer {
            condition.lock()
            pinned[thread] = nil
            condition.unlock()
            give(connection)
        }
        return try body(connection)
    }

    private func pinnedConnection() -> PostgresConnection? {
        condition.lock()
        defer { condition.unlock() }
        return pinned.isEmpty ? nil : pinned[pthread_self()]
    }

    private func take() throws -> PostgresConnection {
        condition.lock()
        if idle.isEmpty && open >= size { waited += 1 }
        while idle.isEmpty && open >= size { condition.wait() }
        if let connection = idle.popLast() {
            condition.unlock()
            if !connection.isHealthy { connection.reset() }
            return connection
        }
        open += 1
        condition.unlock()
        do {
            return try PostgresConnection(conninfo, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    /// Connections open now, how many of them are idle, and how many times a caller waited for one.
    public var usage: (open: Int, idle: Int, waited: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (open, idle.count, waited)
    }

    private func give(_ connection: PostgresConnection) {
        condition.lock()
        idle.append(connection)
        condition.signal()
        condition.unlock()
    }
}
