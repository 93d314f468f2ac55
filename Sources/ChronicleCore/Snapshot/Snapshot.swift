import Foundation

/// The projection's canonical state at a server seq: every projection table's
/// rows, in primary-key order, with their SQLite types. Loading a snapshot and
/// replaying the ops after `seq` gives exactly what a replay from the first op
/// gives (same state digest). Format: `Schemas/snapshot/snapshot-v1.md`.
public struct Snapshot: Sendable, Equatable {
    public struct Table: Sendable, Equatable {
        public var name: String
        public var columns: [String]
        public var rows: [[Value]]

        public init(name: String, columns: [String], rows: [[Value]]) {
            self.name = name
            self.columns = columns
            self.rows = rows
        }
    }

    public var libraryID: UUID
    /// The state includes every confirmed op up to and including this seq, and nothing after it.
    public var seq: Int64
    public var schemaName: String
    public var schemaVersion: Int
    public var schemaFingerprint: String
    public var tables: [Table]

    public init(libraryID: UUID, seq: Int64, schemaName: String, schemaVersion: Int, schemaFingerprint: String, tables: [Table]) {
        self.libraryID = libraryID
        self.seq = seq
        self.schemaName = schemaName
        self.schemaVersion = schemaVersion
        self.schemaFingerprint = schemaFingerprint
        self.tables = tables
    }

    public var rowCount: Int { tables.reduce(0) { $0 + $1.rows.count } }
}

extension ChronicleError.Code {
    public static let malformedSnapshot = ChronicleError.Code(rawValue: "malformed_snapshot")
    public static let futureSnapshotVersion = ChronicleError.Code(rawValue: "future_snapshot_version")
}

/// Encodes snapshots as a compact binary body inside an LZ4 frame with a content
/// checksum (so `lz4 -d` opens it), and decodes them refusing anything malformed.
public enum SnapshotCodec {
    public static let formatVersion: UInt16 = 1
    public static let mediaType = "application/vnd.chronicle.snapshot"
    static let magic: [UInt8] = Array("CHSN".utf8)

    public struct Limits: Sendable {
        public var maxDecodedBytes = 1 << 30
        public var maxTables = 1_000
        public var maxColumns = 1_000
        public var maxRows = 100_000_000
        public init() {}
    }

    public static func encode(_ snapshot: Snapshot) -> [UInt8] { LZ4Frame.compress(encodeBody(snapshot)) }

    public static func decode(_ bytes: [UInt8], limits: Limits = Limits()) throws(ChronicleError) -> Snapshot {
        let body = try LZ4Frame.decompress(bytes, maxBytes: limits.maxDecodedBytes)
        return try decodeBody(body, limits: limits)
    }

    public static func encodeBody(_ snapshot: Snapshot) -> [UInt8] {
        var w = ByteWriter(capacity: 64 + snapshot.rowCount * 64)
        for byte in magic { w.u8(byte) }
        w.u16(formatVersion)
        w.u16(0)
        w.uuid(snapshot.libraryID)
        w.varInt(snapshot.seq)
        w.lengthPrefixedUTF8(snapshot.schemaName)
        w.varUInt(UInt64(snapshot.schemaVersion))
        w.lengthPrefixedUTF8(snapshot.schemaFingerprint)
        w.varUInt(UInt64(snapshot.tables.count))
        for table in snapshot.tables {
            w.lengthPrefixedUTF8(table.name)
            w.varUInt(UInt64(table.columns.count))
            for column in table.columns { w.lengthPrefixedUTF8(column) }
            w.varUInt(UInt64(table.rows.count))
            for row in table.rows {
                precondition(row.count == table.columns.count, "snapshot row width differs from its table's columns")
                for value in row {
                    switch value {
                    case .null: w.u8(0)
                    case .integer(let i): w.u8(1); w.varInt(i)
                    case .bool(let b): w.u8(1); w.varInt(b ? 1 : 0)
                    case .real(let d): w.u8(2); w.float64(d)
                    case .text(let s): w.u8(3); w.lengthPrefixedUTF8(s)
                    }
                }
            }
        }
        return w.bytes
    }

    public static func decodeBody(_ bytes: [UInt8], limits: Limits = Limits()) throws(ChronicleError) -> Snapshot {
        do {
            return try bytes.withUnsafeBytes { raw throws(ChronicleError) -> Snapshot in
                var r = ByteReader(raw, subject: "snapshot", code: .malformedSnapshot)
                for byte in magic where try r.u8("the magic") != byte {
                    throw ChronicleError(.malformedSnapshot, "This is not a Chronicle snapshot (it does not start with \"CHSN\").")
                }
                let version = try r.u16("the format version")
                guard version <= formatVersion else {
                    throw ChronicleError(.futureSnapshotVersion, "The snapshot uses format version \(version), but this build reads up to \(formatVersion). Update Chronicle to read it.")
                }
                guard version >= 1 else { throw r.error("format version 0 does not exist") }
                let flags = try r.u16("the flags")
                guard flags == 0 else { throw r.error("unknown flags \(flags)") }
                let library = try r.uuid("the library id")
                let seq = try r.varInt("the seq")
                guard seq >= 0 else { throw r.error("a negative seq \(seq)") }
                let schemaName = try r.utf8(try r.count("the schema name's length", atMost: 256), "the schema name")
                let schemaVersion = try r.varUInt("the schema version")
                guard schemaVersion <= UInt64(Int32.max) else { throw r.error("schema version \(schemaVersion) is out of range") }
                let fingerprint = try r.utf8(try r.count("the fingerprint's length", atMost: 256), "the fingerprint")
                let tableCount = try r.count("the table count", atMost: limits.maxTables)
                var tables: [Snapshot.Table] = []
                tables.reserveCapacity(tableCount)
                var names = Set<String>()
                for _ in 0..<tableCount {
                    let name = try r.utf8(try r.count("a table name's length", atMost: 1024), "a table name")
                    guard names.insert(name).inserted else { throw r.error("table \(name) appears twice") }
                    let columnCount = try r.count("a column count", atMost: limits.maxColumns)
                    guard columnCount > 0 else { throw r.error("table \(name) has no columns") }
                    var columns: [String] = []
                    for _ in 0..<columnCount { columns.append(try r.utf8(try r.count("a column name's length", atMost: 1024), "a column name")) }
                    // Each value takes at least one byte: a row count the remaining bytes cannot hold is refused before allocating.
                    let rowCount = try r.count("a row count", atMost: min(limits.maxRows, r.remaining / columnCount))
                    var rows: [[Value]] = []
                    rows.reserveCapacity(rowCount)
                    for _ in 0..<rowCount {
                        var row: [Value] = []
                        row.reserveCapacity(columnCount)
                        for _ in 0..<columnCount {
                            switch try r.u8("a value tag") {
                            case 0: row.append(.null)
                            case 1: row.append(.integer(try r.varInt("an integer")))
                            case 2:
                                let d = try r.float64("a real")
                                guard d.isFinite else { throw r.error("a real that is not finite") }
                                row.append(.real(d))
                            case 3: row.append(.text(try r.utf8(try r.count("a text length", atMost: r.remaining), "a text value")))
                            case let tag: throw r.error("unknown value tag \(tag)")
                            }
                        }
                        rows.append(row)
                    }
                    tables.append(Snapshot.Table(name: name, columns: columns, rows: rows))
                }
                guard r.isAtEnd else { throw r.error("\(r.remaining) bytes follow the last table") }
                return Snapshot(libraryID: library, seq: seq, schemaName: schemaName, schemaVersion: Int(schemaVersion),
                                schemaFingerprint: fingerprint, tables: tables)
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.malformedSnapshot, "The snapshot could not be read: \(error)")
        }
    }
}
