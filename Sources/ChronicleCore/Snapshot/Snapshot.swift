import Foundation

/// The projection's canonical state at a server seq: every projection table's
/// rows, in primary-key order, with their SQLite types. Loading a snapshot and
/// replaying the ops after `seq` gives exactly what a replay from the first op
/// gives (same state digest). Format: `Schemas/snapshot/snapshot-v1.md`.
public struct Snapshot: Sendable, Equatable {
    /// One projection table's rows, in primary-key order.
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

/// Writes a snapshot's body as its rows come, without holding them as values: what
/// `SnapshotCodec.encodeBody` writes for the same rows, byte for byte. A store reads a
/// whole library's projection into one this way. The caller gives each table's row count
/// before its rows, then exactly that many rows of the table's width, value by value.
public struct SnapshotBodyWriter {
    private var w: ByteWriter
    private var tablesLeft: Int
    private var valuesLeft = 0

    public init(libraryID: UUID, seq: Int64, schemaName: String, schemaVersion: Int, schemaFingerprint: String,
                tableCount: Int, capacity: Int = 1 << 16) {
        w = ByteWriter(capacity: capacity)
        for byte in SnapshotCodec.magic { w.u8(byte) }
        w.u16(SnapshotCodec.formatVersion)
        w.u16(0)
        w.uuid(libraryID)
        w.varInt(seq)
        w.lengthPrefixedUTF8(schemaName)
        w.varUInt(UInt64(schemaVersion))
        w.lengthPrefixedUTF8(schemaFingerprint)
        w.varUInt(UInt64(tableCount))
        tablesLeft = tableCount
    }

    public mutating func table(_ name: String, columns: [String], rowCount: Int) {
        precondition(valuesLeft == 0 && tablesLeft > 0, "snapshot body: a table begun before the last one's rows were all written, or one too many")
        tablesLeft -= 1
        w.lengthPrefixedUTF8(name)
        w.varUInt(UInt64(columns.count))
        for column in columns { w.lengthPrefixedUTF8(column) }
        w.varUInt(UInt64(rowCount))
        valuesLeft = rowCount * columns.count
    }

    @inline(__always)
    public mutating func value(_ value: Value) {
        precondition(valuesLeft > 0, "snapshot body: more values than the table's rows hold")
        valuesLeft -= 1
        switch value {
        case .null: w.u8(0)
        case .integer(let i): w.u8(1); w.varInt(i)
        case .bool(let b): w.u8(1); w.varInt(b ? 1 : 0)
        case .real(let d): w.u8(2); w.float64(d)
        case .text(let s): w.u8(3); w.lengthPrefixedUTF8(s)
        }
    }

    /// The body. Every table announced was written whole.
    public consuming func finish() -> [UInt8] {
        precondition(valuesLeft == 0 && tablesLeft == 0, "snapshot body: fewer tables or rows than announced")
        return w.bytes
    }
}

/// Encodes snapshots as a compact binary body inside an LZ4 frame with a content
/// checksum (so `lz4 -d` opens it), and decodes them refusing anything malformed.
public enum SnapshotCodec {
    public static let formatVersion: UInt16 = 1
    public static let mediaType = "application/vnd.chronicle.snapshot"
    static let magic: [UInt8] = Array("CHSN".utf8)

    /// The most a snapshot may hold before it is refused as malformed: bytes, tables, columns, rows.
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
        var writer = SnapshotBodyWriter(libraryID: snapshot.libraryID, seq: snapshot.seq, schemaName: snapshot.schemaName,
                                        schemaVersion: snapshot.schemaVersion, schemaFingerprint: snapshot.schemaFingerprint,
                                        tableCount: snapshot.tables.count, capacity: 64 + snapshot.rowCount * 64)
        for table in snapshot.tables {
            writer.table(table.name, columns: table.columns, rowCount: table.rows.count)
            for row in table.rows {
                precondition(row.count == table.columns.count, "snapshot row width differs from its table's columns")
                for value in row { writer.value(value) }
            }
        }
        return writer.finish()
    }

    public static func decodeBody(_ bytes: [UInt8], limits: Limits = Limits()) throws(ChronicleError) -> Snapshot {
        var collector = Collector()
        var reader = SnapshotBodyReader(limits: limits, totalBytes: bytes.count)
        do {
            try bytes.withUnsafeBytes { raw in
                try reader.feed(raw, into: &collector)
                try reader.finish(into: &collector)
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.malformedSnapshot, "The snapshot could not be read: \(error)")
        }
        guard let header = collector.header else {
            throw ChronicleError(.malformedSnapshot, "The snapshot ends before its header.")
        }
        return Snapshot(libraryID: header.libraryID, seq: header.seq, schemaName: header.schemaName, schemaVersion: header.schemaVersion,
                        schemaFingerprint: header.schemaFingerprint, tables: collector.tables)
    }

    /// Gathers a whole snapshot in memory.
    private struct Collector: SnapshotVisitor {
        var header: SnapshotHeader?
        var tables: [Snapshot.Table] = []

        mutating func header(_ header: SnapshotHeader) throws {
            self.header = header
            tables.reserveCapacity(header.tableCount)
        }

        mutating func table(_ name: String, columns: [String], rowCount: Int) throws {
            var table = Snapshot.Table(name: name, columns: columns, rows: [])
            table.rows.reserveCapacity(rowCount)
            tables.append(table)
        }

        mutating func row(_ values: [Value]) throws {
            tables[tables.count - 1].rows.append(values)
        }
    }

    /// Reads a snapshot's frame piece by piece, handing its header, tables and rows to
    /// `visitor` as they are decoded: memory stays flat however large the snapshot is. The
    /// frame's content checksum is checked at its end, so a visitor writing rows somewhere
    /// must keep them provisional (a transaction) until this returns. Returns the header.
    @discardableResult
    public static func read<V: SnapshotVisitor>(_ frame: SnapshotFrame, limits: Limits = Limits(), into visitor: inout V) throws -> SnapshotHeader {
        try read(pieces: { try frame.forEachPiece($0) }, limits: limits, into: &visitor)
    }

    /// `read(_ frame:…)` for a frame that `pieces` hands over in order, piece by piece (a
    /// frame stored in a database row, read with incremental blob I/O).
    @discardableResult
    public static func read<V: SnapshotVisitor>(pieces: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void, limits: Limits = Limits(),
                                                into visitor: inout V) throws -> SnapshotHeader {
        let stream = LZ4FrameStream(maxBytes: limits.maxDecodedBytes)
        var reader = SnapshotBodyReader(limits: limits)
        var header: SnapshotHeader?
        var recorder = HeaderRecorder(inner: visitor)
        defer { visitor = recorder.inner }
        try pieces { piece in
            try stream.feed(piece) { body in try reader.feed(body, into: &recorder) }
        }
        try stream.finish { body in try reader.feed(body, into: &recorder) }
        try reader.finish(into: &recorder)
        header = recorder.header
        guard let header else { throw ChronicleError(.malformedSnapshot, "The snapshot ends before its header.") }
        return header
    }

    /// The header alone, read from the frame's start (the rest is not decoded or checked).
    public static func header(of frame: SnapshotFrame, limits: Limits = Limits()) throws -> SnapshotHeader {
        try header(pieces: { try frame.forEachPiece($0) }, limits: limits)
    }

    /// The header alone, from a frame `pieces` hands over in order (reading stops once it is decoded).
    public static func header(pieces: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void, limits: Limits = Limits()) throws -> SnapshotHeader {
        struct Found: Error { let header: SnapshotHeader }
        struct Stop: SnapshotVisitor {
            mutating func header(_ header: SnapshotHeader) throws { throw Found(header: header) }
            mutating func table(_ name: String, columns: [String], rowCount: Int) throws {}
            mutating func row(_ values: [Value]) throws {}
        }
        var stop = Stop()
        do {
            _ = try read(pieces: pieces, limits: limits, into: &stop)
        } catch let found as Found {
            return found.header
        }
        throw ChronicleError(.malformedSnapshot, "The snapshot ends before its header.")
    }

    /// Passes everything on, keeping the header.
    private struct HeaderRecorder<Inner: SnapshotVisitor>: SnapshotVisitor {
        var inner: Inner
        var header: SnapshotHeader?
        mutating func header(_ header: SnapshotHeader) throws {
            self.header = header
            try inner.header(header)
        }
        mutating func table(_ name: String, columns: [String], rowCount: Int) throws { try inner.table(name, columns: columns, rowCount: rowCount) }
        mutating func row(_ values: [Value]) throws { try inner.row(values) }
    }
}

/// A snapshot as it travels and is kept: its LZ4 frame, in memory or in a file (a download,
/// so a large one never sits in memory whole). Core reads no files: a frame kept elsewhere
/// comes through a ``SnapshotFrameSource`` (the store's `SnapshotFile`).
public struct SnapshotFrame: Sendable {
    /// Where the frame's bytes are: in memory, or read from a source a piece at a time.
    public enum Storage: Sendable {
        case bytes([UInt8])
        /// Read a piece at a time from where it is kept.
        case source(any SnapshotFrameSource)
    }

    public let storage: Storage

    public init(bytes: [UInt8]) { storage = .bytes(bytes) }
    public init(source: any SnapshotFrameSource) { storage = .source(source) }
    public init(_ snapshot: Snapshot) { storage = .bytes(SnapshotCodec.encode(snapshot)) }

    /// The frame's length in bytes.
    public func byteCount() throws -> Int {
        switch storage {
        case .bytes(let bytes): return bytes.count
        case .source(let source): return try source.byteCount()
        }
    }

    /// Hands the frame's bytes to `body` in pieces of at most `pieceBytes` (valid only during each call).
    public func forEachPiece(pieceBytes: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch storage {
        case .bytes(let bytes):
            try bytes.withUnsafeBytes { raw in
                var start = 0
                while start < raw.count {
                    let end = min(raw.count, start + pieceBytes)
                    try body(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
                    start = end
                }
            }
        case .source(let source):
            try source.forEachPiece(pieceBytes: pieceBytes, body)
        }
    }

    /// The whole snapshot in memory (tests and small libraries; large ones are read with `SnapshotCodec.read`).
    public func decode(limits: SnapshotCodec.Limits = SnapshotCodec.Limits()) throws -> Snapshot {
        switch storage {
        case .bytes(let bytes): return try SnapshotCodec.decode(bytes, limits: limits)
        case .source:
            var bytes: [UInt8] = []
            try forEachPiece { bytes.append(contentsOf: $0) }
            return try SnapshotCodec.decode(bytes, limits: limits)
        }
    }

    /// Lets go of where the frame is kept (a temporary download is removed).
    public func discard() {
        if case .source(let source) = storage { source.discard() }
    }
}

/// Where a snapshot's frame is kept outside memory, read a piece at a time.
public protocol SnapshotFrameSource: Sendable {
    /// The frame's length in bytes.
    func byteCount() throws -> Int
    /// Hands the frame's bytes to `body` in pieces of at most `pieceBytes`, in order.
    func forEachPiece(pieceBytes: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws
    /// Lets go of the frame (a temporary file is removed).
    func discard()
}
