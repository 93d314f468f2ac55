import CSQLite

/// An error reported by SQLite: the extended result code, SQLite's message and
/// the SQL that failed. Arguments are kept out of the description so personal
/// data does not leak into logs.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let extendedCode: Int32
    public let message: String
    public let sql: String?

    public var primaryCode: Int32 { extendedCode & 0xFF }

    public var description: String {
        var text = "SQLite error \(extendedCode) (\(String(cString: sqlite3_errstr(extendedCode)))): \(message)"
        if let sql { text += " — while running: \(sql.count > 300 ? String(sql.prefix(300)) + "…" : sql)" }
        return text
    }

    public var isDiskFull: Bool { primaryCode == SQLITE_FULL }
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }
    public var isConstraint: Bool { primaryCode == SQLITE_CONSTRAINT }
    /// The file is damaged: a page SQLite reads is malformed (`SQLITE_CORRUPT`), or what should be
    /// a database page is not one (`SQLITE_NOTADB`, met past the header of a damaged file).
    public var isCorrupt: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }
}
