import Foundation

/// What a snapshot says about itself before its rows.
public struct SnapshotHeader: Sendable, Equatable {
    public var libraryID: UUID
    /// The state includes every confirmed op up to and including this seq.
    public var seq: Int64
    public var schemaName: String
    public var schemaVersion: Int
    public var schemaFingerprint: String
    public var tableCount: Int
}

/// Receives a snapshot as it is read: the header once, then each table followed by its rows.
/// Nothing reaches a visitor before the bytes it comes from were read and checked, and each
/// call happens once; an error thrown by the visitor stops the read and passes through.
public protocol SnapshotVisitor {
    mutating func header(_ header: SnapshotHeader) throws
    mutating func table(_ name: String, columns: [String], rowCount: Int) throws
    mutating func row(_ values: [Value]) throws
}

extension SnapshotVisitor {
    /// Hands a snapshot already in memory to the visitor, as a read of its bytes would.
    public mutating func visit(_ snapshot: Snapshot) throws {
        try header(SnapshotHeader(libraryID: snapshot.libraryID, seq: snapshot.seq, schemaName: snapshot.schemaName,
                                  schemaVersion: snapshot.schemaVersion, schemaFingerprint: snapshot.schemaFingerprint,
                                  tableCount: snapshot.tables.count))
        for table in snapshot.tables {
            try self.table(table.name, columns: table.columns, rowCount: table.rows.count)
            for values in table.rows { try row(values) }
        }
    }
}

/// Reads a snapshot body (`Schemas/snapshot/snapshot-v1.md`) from pieces of any size, as they
/// arrive from a decompressor, holding only the piece being read and the row in progress.
/// It refuses exactly what `SnapshotCodec.decodeBody` refuses (that one is built on it).
public struct SnapshotBodyReader {
    let limits: SnapshotCodec.Limits
    /// The body's whole length when known (a body in memory): counts are checked against it.
    let totalBytes: Int?
    private var buffer: [UInt8] = []
    private var start = 0
    /// The body offset of `buffer[0]`.
    private var base = 0
    private enum State { case header, table, rows(left: Int, columns: Int), done }
    private var state = State.header
    private var tablesLeft = 0
    private var names = Set<String>()
    /// Rows handed out at most per read of the buffer.
    private static let rowRun = 512

    public init(limits: SnapshotCodec.Limits = SnapshotCodec.Limits(), totalBytes: Int? = nil) {
        self.limits = limits
        self.totalBytes = totalBytes
    }

    /// Bytes read so far.
    public var offset: Int { base + start }

    /// Takes the next piece of the body and hands what it completes to `visitor`.
    public mutating func feed<V: SnapshotVisitor>(_ piece: UnsafeRawBufferPointer, into visitor: inout V) throws {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            base += start
            start = 0
        }
        buffer.append(contentsOf: piece)
        try read(final: false, into: &visitor)
    }

    /// Says the body is all in: throws if it stopped early.
    public mutating func finish<V: SnapshotVisitor>(into visitor: inout V) throws {
        try read(final: true, into: &visitor)
        guard case .done = state else {
            throw ChronicleError(.malformedSnapshot, "The snapshot ends early, at byte \(offset).")
        }
    }

    private enum Unit {
        case header(SnapshotHeader)
        case table(String, [String], Int)
        case rows([[Value]])
    }

    private mutating func read<V: SnapshotVisitor>(final: Bool, into visitor: inout V) throws {
        while true {
            if case .done = state {
                if start < buffer.count {
                    throw ChronicleError(.malformedSnapshot, "The snapshot is malformed at byte \(offset): \(buffer.count - start) bytes follow the last table.")
                }
                return
            }
            guard let unit = try nextUnit(final: final) else { return }
            switch unit {
            case .header(let header):
                try visitor.header(header)
            case .table(let name, let columns, let rowCount):
                try visitor.table(name, columns: columns, rowCount: rowCount)
            case .rows(let rows):
                for row in rows { try visitor.row(row) }
            }
        }
    }

    /// The next whole unit from the buffer, or nil when more bytes are needed.
    private mutating func nextUnit(final: Bool) throws -> Unit? {
        let (limits, total, base, start, state, tablesLeft) = (self.limits, self.totalBytes, self.base, self.start, self.state, self.tablesLeft)
        var names = self.names
        let parsed: (Unit, Int, State, Int)? = try buffer.withUnsafeBytes { raw throws in
            var r = ByteReader(UnsafeRawBufferPointer(rebasing: raw[start...]), subject: "snapshot", code: .malformedSnapshot)
            r.base = base + start
            // What the rest of the body can still hold: counts beyond it are refused before allocating.
            func left(_ r: ByteReader) -> Int { (total ?? limits.maxDecodedBytes) - (r.base + r.offset) }
            do {
                switch state {
                case .header:
                    let header = try Self.header(&r, limits: limits)
                    let next: State = header.tableCount == 0 ? .done : .table
                    return (.header(header), r.offset, next, header.tableCount)
                case .table:
                    let name = try r.utf8(try r.count("a table name's length", atMost: 1024), "a table name")
                    guard !names.contains(name) else { throw r.error("table \(name) appears twice") }
                    let columnCount = try r.count("a column count", atMost: limits.maxColumns)
                    guard columnCount > 0 else { throw r.error("table \(name) has no columns") }
                    var columns: [String] = []
                    for _ in 0..<columnCount { columns.append(try r.utf8(try r.count("a column name's length", atMost: 1024), "a column name")) }
                    // Each value takes at least one byte.
                    let rowCount = try r.count("a row count", atMost: min(limits.maxRows, max(0, left(r)) / columnCount))
                    names.insert(name)
                    let next: State = rowCount > 0 ? .rows(left: rowCount, columns: columnCount) : (tablesLeft == 1 ? .done : .table)
                    return (.table(name, columns, rowCount), r.offset, next, rowCount > 0 ? tablesLeft : tablesLeft - 1)
                case .rows(let rowsLeft, let columnCount):
                    var rows: [[Value]] = []
                    var end = 0
                    while rows.count < Self.rowRun && rows.count < rowsLeft {
                        do {
                            rows.append(try Self.row(&r, columns: columnCount, left: left))
                            end = r.offset
                        } catch where r.ranShort && !final && !rows.isEmpty {
                            break   // hand out the whole rows; the next piece completes this one
                        }
                    }
                    let remaining = rowsLeft - rows.count
                    let next: State = remaining > 0 ? .rows(left: remaining, columns: columnCount) : (tablesLeft == 1 ? .done : .table)
                    return (.rows(rows), end, next, remaining > 0 ? tablesLeft : tablesLeft - 1)
                case .done:
                    return nil
                }
            } catch where r.ranShort && !final {
                return nil
            }
        }
        guard let (unit, length, next, nextTablesLeft) = parsed else { return nil }
        self.start += length
        self.state = next
        self.tablesLeft = nextTablesLeft
        self.names = names
        return unit
    }

    private static func header(_ r: inout ByteReader, limits: SnapshotCodec.Limits) throws(ChronicleError) -> SnapshotHeader {
        for byte in SnapshotCodec.magic where try r.u8("the magic") != byte {
            throw ChronicleError(.malformedSnapshot, "This is not a Chronicle snapshot (it does not start with \"CHSN\").")
        }
        let version = try r.u16("the format version")
        guard version <= SnapshotCodec.formatVersion else {
            throw ChronicleError(.futureSnapshotVersion, "The snapshot uses format version \(version), but this build reads up to \(SnapshotCodec.formatVersion). Update Chronicle to read it.")
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
        return SnapshotHeader(libraryID: library, seq: seq, schemaName: schemaName, schemaVersion: Int(schemaVersion),
                              schemaFingerprint: fingerprint, tableCount: tableCount)
    }

    @inline(__always)
    private static func row(_ r: inout ByteReader, columns: Int, left: (ByteReader) -> Int) throws(ChronicleError) -> [Value] {
        var row: [Value] = []
        row.reserveCapacity(columns)
        for _ in 0..<columns {
            switch try r.u8("a value tag") {
            case 0: row.append(.null)
            case 1: row.append(.integer(try r.varInt("an integer")))
            case 2:
                let d = try r.float64("a real")
                guard d.isFinite else { throw r.error("a real that is not finite") }
                row.append(.real(d))
            case 3: row.append(.text(try r.utf8(try r.count("a text length", atMost: max(0, left(r))), "a text value")))
            case let tag: throw r.error("unknown value tag \(tag)")
            }
        }
        return row
    }
}
