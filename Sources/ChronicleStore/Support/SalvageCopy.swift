import ChronicleCore
import Foundation

/// The steps every salvage takes, whatever kind of store it keeps (a device's, a server's
/// library): a damaged file attached read-only to a new one, its tables copied range by range
/// around the pages SQLite cannot read, its sealed segments checked link by link, and the new
/// file closed into one and put in the damaged one's place.
package enum SalvageCopy {
    /// One entry of the damaged file's list of tables, indexes and triggers.
    package struct SchemaObject {
        package var type: String
        package var name: String
        package var table: String
        package var sql: String
        package var withoutRowID: Bool { sql.uppercased().contains("WITHOUT ROWID") }
    }

    /// A sealed segment as stored (its frame is read when it is checked, one at a time).
    package struct StoredSegment {
        package var first: Int64
        package var last: Int64
        package var digest: String
        package var previous: String
    }

    /// The frame of every salvage. `path` must be a file that begins as every SQLite database
    /// does (otherwise it is not a damaged store but something else: `missing` and `notSQLite`
    /// say so). `build` makes the new file at the path it is given, from the damaged one, and
    /// checks it; the new file is then closed into one and put in the damaged one's place, or,
    /// for a dry run, deleted. Returns where the damaged file (with its WAL) went, or "" after a
    /// dry run. Where `build` fails, the damaged file is left as it was and the attempt deleted,
    /// but for one that failed its checks (`invariant_violated`), kept to be looked at.
    package static func salvage(_ path: String, missing: String, notSQLite: String, dryRun: Bool,
                        build: (String) throws -> Void) throws -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw ChronicleError(.storeMissing, missing)
        }
        guard isSQLiteFile(path) else { throw ChronicleError(.notAChronicleStore, notSQLite) }
        let salvaged = path + ".salvage"
        do {
            try build(salvaged)
            try closeIntoOneFile(salvaged, damaged: path)
            guard let handle = FileHandle(forUpdatingAtPath: salvaged) else {
                throw ChronicleError(.database, "Cannot open \(salvaged) to flush it to disk; \(path) was left as it was.")
            }
            try handle.synchronize()
            try handle.close()
        } catch let error as ChronicleError where error.code == .invariantViolated {
            throw error
        } catch {
            removeFiles(salvaged)
            throw error
        }
        if dryRun {
            removeFiles(salvaged)
            return ""
        }
        return try replace(path, with: salvaged)
    }

    /// Whether the file begins as every SQLite database does; a file that does not is not a
    /// damaged store but something else.
    private static func isSQLiteFile(_ path: String) -> Bool {
        let header = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: path)).read(upToCount: 16)) ?? nil
        return header == Data("SQLite format 3\u{0}".utf8)
    }

    /// A new file at `salvaged` (anything there before removed), with the damaged file attached
    /// to it read-only as `damaged`, and the damaged file's list of objects. `beyondSalvage` makes
    /// the error for a file whose very list of tables cannot be read.
    package static func open(_ path: String, into salvaged: String,
                     beyondSalvage: (String, SQLiteError) -> ChronicleError) throws -> (Database, [SchemaObject]) {
        removeFiles(salvaged)
        var options = Database.Options()
        options.synchronousFull = false
        let out = try Database(path: salvaged, options: options)
        // The copy is a scratch file until it has passed its checks, and it is flushed to disk
        // before it takes the damaged file's place (`salvage`): its many small commits (a range
        // of keys each) need not each wait for the disk. A statement that fails still rolls back
        // alone (the journal is kept, in memory).
        try out.execute("PRAGMA journal_mode = MEMORY")
        try out.execute("PRAGMA synchronous = OFF")
        let uri = "file:" + (path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path) + "?mode=ro"
        do {
            try run("ATTACH DATABASE ?1 AS damaged", in: out, [.text(uri)])
        } catch let error as SQLiteError where error.isCorrupt {
            throw beyondSalvage("even its header and list of tables cannot be read", error)
        }
        do {
            let objects = try query("SELECT type, name, tbl_name, sql FROM damaged.sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid", in: out) {
                SchemaObject(type: $0.text(0), name: $0.text(1), table: $0.text(2), sql: $0.text(3))
            }
            return (out, objects)
        } catch let error as SQLiteError where error.isCorrupt {
            throw beyondSalvage("even its list of tables cannot be read", error)
        }
    }

    /// Tables the projection derives from the log (rebuilt, never copied): the rebuild drops and
    /// makes them again. Everything else named `chronicle_*` is the store's own (a device's
    /// `chronicle_shadowed` is copied too: the store's format makes it, and the rebuild empties and refills it).
    package static func isDerived(_ table: String) -> Bool {
        table.hasPrefix("chronicle_shadow_") || [ProjectionSchema.conflictsTable, ProjectionSchema.unreadableTable].contains(table)
    }

    /// A table keyed otherwise than by row id (`WITHOUT ROWID`): copied in one statement, or,
    /// where SQLite cannot read all of it, a range of keys at a time (`copyByKey`).
    package static func copyWhole(_ table: String, in out: Database, alphabet: [UInt8] = textAlphabet) throws -> SalvageReport.Table {
        let quoted = ProjectionSchema.quoted(table)
        do {
            try run("INSERT INTO main.\(quoted) SELECT * FROM damaged.\(quoted)", in: out)
            return SalvageReport.Table(name: table, rowsCopied: Int64(out.changes), unreadable: [], lostWhole: false)
        } catch let error as SQLiteError where error.isCorrupt {
            return try copyByKey(table, in: out, alphabet: alphabet)
        }
    }

    /// A range of keys [low, high) (high nil: no end), `depth` levels down; `splits`: whether
    /// it holds keys longer than `low` that a further level tells apart.
    private struct KeyRange {
        var low: [UInt8]
        var high: [UInt8]?
        var depth: Int
        var splits: Bool
    }

    /// The characters a split of a key range follows: the keys of the store's own tables keyed
    /// otherwise than by row id are ids (lowercase hex and dashes) or blobs of them. A table
    /// keyed by other text (a server's user names) is copied with the characters its keys use,
    /// given in ascending byte order (a key with others is still copied, in the range it sorts in).
    package static let textAlphabet = Array("-0123456789abcdef".utf8)

    /// Copies a `WITHOUT ROWID` table by ranges of its first key column. A range SQLite cannot
    /// read is split at the next character (text keys: an id's; blob keys: every byte value)
    /// into ranges that together cover it, and each is tried in turn. A range none of whose parts
    /// can be read (it lies within a broken page, or the pages above the leaves are broken) is
    /// not split further; the others are, character by character, down to the keys' length, so
    /// that only the rows on broken pages are left out. What cannot be read is reported as the
    /// ranges of keys it covers, adjacent ones joined.
    static func copyByKey(_ table: String, in out: Database, alphabet: [UInt8] = textAlphabet) throws -> SalvageReport.Table {
        var result = SalvageReport.Table(name: table, rowsCopied: 0, unreadable: [], lostWhole: false)
        guard let copier = try KeyedCopy(table, in: out, alphabet: alphabet) else {
            result.lostWhole = true
            return result
        }
        // Keys below every text key's first character (or an empty blob) sort first: the range
        // from nothing to the first bound covers them.
        let top = copier.parts(KeyRange(low: [], high: nil, depth: 0, splits: true))
        var pending = Array(top.reversed())
        var failedAtTop = 0
        // Unreadable ranges in key order; one that starts where the one before ends joins it.
        var lost: [(low: [UInt8], high: [UInt8]?)] = []
        while let r = pending.popLast() {
            if let count = try copier.copy(r.low, r.high) {
                result.rowsCopied += count
                continue
            }
            if r.depth == 1 { failedAtTop += 1 }
            // Split where some parts read: that finds the broken leaves. Where none does, or
            // deep enough, the range is reported as it is.
            let inner = r.splits && r.depth < copier.depthMax ? copier.parts(r) : []
            if try inner.contains(where: { try copier.readable($0.low, $0.high) }) {
                pending += inner.reversed()
            } else if let previous = lost.last, previous.high == r.low {
                lost[lost.count - 1].high = r.high
            } else {
                lost.append((r.low, r.high))
            }
        }
        result.unreadableKeys = lost.map { "from '\(copier.shown($0.low))' to " + ($0.high.map { "'\(copier.shown($0))'" } ?? "the end") }
        if result.rowsCopied == 0, failedAtTop == top.count {
            result.lostWhole = true
            result.unreadableKeys = []
        }
        return result
    }

    /// Copies a `WITHOUT ROWID` table's rows by ranges of its first key column (`copyByKey`).
    private struct KeyedCopy {
        let quoted: String
        let out: Database
        let alphabet: [UInt8]
        /// Whether the key is a blob (else text).
        let blob: Bool
        let column: String
        /// Ids made from the clock share their first characters (a UUIDv7's are its time): a range
        /// is split as deep as its keys go (text: a character a level; blobs: half a byte, so a
        /// level is sixteen ranges rather than 256), but only where some of its parts read.
        var depthMax: Int { blob ? 32 : 36 }

        /// Nil where the table's columns or its key cannot be read.
        init?(_ table: String, in out: Database, alphabet: [UInt8]) throws {
            quoted = ProjectionSchema.quoted(table)
            let columns: [(name: String, type: String, pk: Int64)]
            do {
                columns = try query("PRAGMA damaged.table_info(\(quoted))", in: out) { ($0.text(1), $0.text(2).uppercased(), $0.int(5)) }
            } catch let error as SQLiteError where error.isCorrupt {
                return nil
            }
            guard let key = columns.filter({ $0.pk > 0 }).min(by: { $0.pk < $1.pk }) else { return nil }
            // Bounds are written into the statement as literals: only this alphabet's characters (or
            // hex digits) ever make them.
            precondition(!alphabet.contains(UInt8(ascii: "'")) && alphabet == alphabet.sorted(), "a key alphabet is sorted and has no quote")
            self.out = out
            self.alphabet = alphabet
            blob = key.type.contains("BLOB")
            column = ProjectionSchema.quoted(key.name)
        }

        func literal(_ bytes: [UInt8]) -> String {
            blob ? "x'" + Hex.encode(bytes) + "'" : "'" + String(decoding: bytes, as: UTF8.self) + "'"
        }

        /// A key as a report shows it.
        func shown(_ bytes: [UInt8]) -> String { blob ? Hex.encode(bytes) : String(decoding: bytes, as: UTF8.self) }

        func range(_ low: [UInt8], _ high: [UInt8]?) -> String {
            "\(column) >= \(literal(low))" + (high.map { " AND \(column) < \(literal($0))" } ?? "")
        }

        /// Copies the keys in [low, high) (high nil: no end); nil where SQLite cannot read them.
        func copy(_ low: [UInt8], _ high: [UInt8]?) throws -> Int64? {
            do {
                try run("INSERT INTO main.\(quoted) SELECT * FROM damaged.\(quoted) WHERE \(range(low, high))", in: out)
                return Int64(out.changes)
            } catch let error as SQLiteError where error.isCorrupt {
                return nil
            }
        }

        /// Whether SQLite can read the keys of [low, high), copying nothing.
        func readable(_ low: [UInt8], _ high: [UInt8]?) throws -> Bool {
            do {
                _ = try scalar("SELECT count(*) FROM damaged.\(quoted) WHERE \(range(low, high))", in: out)
                return true
            } catch let error as SQLiteError where error.isCorrupt {
                return false
            }
        }

        /// The parts of a range, together covering it: first the keys that are `low` itself (or
        /// continue below the first split), then one part a character (or half-byte) value.
        func parts(_ r: KeyRange) -> [KeyRange] {
            let bounds: [[UInt8]]
            if !blob {
                bounds = alphabet.map { r.low + [$0] }
            } else if r.depth % 2 == 0 {
                bounds = (0..<16).map { r.low + [UInt8($0 << 4)] }
            } else {
                // `low` ends in a byte whose high half this range fixed: split on its low half.
                let head = Array(r.low.dropLast()), high = r.low.last! & 0xf0
                bounds = (1..<16).map { head + [high | UInt8($0)] }
            }
            let starts = [r.low] + bounds
            let evenBlob = blob && r.depth % 2 == 0
            return starts.indices.map { i in
                KeyRange(low: starts[i], high: i + 1 < starts.count ? starts[i + 1] : r.high, depth: r.depth + 1,
                         splits: i > 0 || (blob && !evenBlob))
            }
        }
    }

    /// Row ids copied per statement while the pages read well.
    static let chunk: Int64 = 4_096

    /// A row-id table, copied a range of row ids at a time. A range SQLite cannot read is split in
    /// two until each unreadable part is a single row id; those are reported, merged into ranges.
    /// `bound`: the highest row id the table can hold, searched up to where its last page cannot
    /// be read and none of its indexes says where it ends.
    package static func copyByRowID(_ table: String, in out: Database, indexes: [String], bound: Int64) throws -> SalvageReport.Table {
        let quoted = ProjectionSchema.quoted(table)
        var result = SalvageReport.Table(name: table, rowsCopied: 0, unreadable: [], lostWhole: false)
        // The ends are found through the table's first and last pages, or else through an index
        // (which holds every row id too); failing both, the row ids from 1 to `bound` are searched.
        guard let first = try rowIDEnd("min", of: quoted, indexes: indexes, in: out) ?? Optional(1),
              let last = try rowIDEnd("max", of: quoted, indexes: indexes, in: out) ?? Optional(bound), first <= last else { return result }
        // Ranges still to copy, the next one last.
        var pending: [ClosedRange<Int64>] = []
        var low = last
        while true {
            let high = low
            low = max(first, high - (chunk - 1))
            pending.append(low...high)
            if low == first { break }
            low -= 1
        }
        while let range = pending.popLast() {
            if let count = try copyRange(range, of: quoted, in: out) {
                result.rowsCopied += count
            } else if range.lowerBound == range.upperBound {
                let id = range.lowerBound
                if let previous = result.unreadable.last, previous.upperBound == id - 1 {
                    result.unreadable[result.unreadable.count - 1] = previous.lowerBound...id
                } else {
                    result.unreadable.append(id...id)
                }
            } else {
                let middle = range.lowerBound + (range.upperBound - range.lowerBound) / 2
                pending.append((middle + 1)...range.upperBound)
                pending.append(range.lowerBound...middle)
            }
        }
        return result
    }

    /// `min(rowid)` or `max(rowid)` of a damaged table, read from the table or else from one of
    /// its indexes; `.some(nil)` for an empty table, nil where none of them can be read.
    private static func rowIDEnd(_ function: String, of quoted: String, indexes: [String], in out: Database) throws -> Int64?? {
        for source in [""] + indexes.map({ " INDEXED BY \(ProjectionSchema.quoted($0))" }) {
            do {
                return .some(try scalar("SELECT \(function)(rowid) FROM damaged.\(quoted)\(source)", in: out))
            } catch let error as SQLiteError where error.isCorrupt || !source.isEmpty {
                continue   // an index SQLite will not scan for it is passed over too
            }
        }
        return nil
    }

    /// Copies the rows of `range`; nil (and nothing copied) if SQLite cannot read it.
    private static func copyRange(_ range: ClosedRange<Int64>, of quoted: String, in out: Database) throws -> Int64? {
        do {
            try run("INSERT INTO main.\(quoted) SELECT * FROM damaged.\(quoted) WHERE rowid BETWEEN ?1 AND ?2", in: out,
                    [.integer(range.lowerBound), .integer(range.upperBound)])
            return Int64(out.changes)
        } catch let error as SQLiteError where error.isCorrupt {
            return nil
        }
    }

    /// `execute`, `query` and `scalarInt` with an untyped throw, so that callers can catch one kind
    /// of SQLite error (a typed `catch … where` here crashes the Swift 6.3 compiler).
    package static func run(_ sql: String, in db: Database, _ arguments: [Value] = []) throws {
        try db.execute(sql, arguments)
    }

    package static func query<T>(_ sql: String, in db: Database, _ arguments: [Value] = [], _ row: (Row) throws -> T) throws -> [T] {
        try db.query(sql, arguments, row)
    }

    package static func scalar(_ sql: String, in db: Database, _ arguments: [Value] = []) throws -> Int64? {
        try db.scalarInt(sql, arguments)
    }

    /// The sealed segments kept (copied into `db`), in order.
    package static func segments(in db: Database) throws -> [StoredSegment] {
        try db.query("SELECT first_seq, last_seq, digest, previous_digest FROM chronicle_segments ORDER BY first_seq") { row in
            StoredSegment(first: row.int(0), last: row.int(1), digest: row.text(2), previous: row.text(3))
        }
    }

    /// A segment's ops, where its frame decompresses, its body matches its digest, and it is of
    /// `libraryID` and covers the seqs it is stored under; nil otherwise.
    package static func sound(_ segment: StoredSegment, libraryID: UUID?, in db: Database) -> Segment? {
        guard let frame = try? db.query("SELECT body FROM chronicle_segments WHERE first_seq = ?1", [.integer(segment.first)], { row in
                  row.withBytes(0) { Array($0) } }).first,
              let body = try? LZ4Frame.decompress(frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes),
              LogTables.chainDigest(previous: segment.previous, body: body) == segment.digest,
              let decoded = try? SegmentCodec.decodeBody(body), decoded.libraryID == libraryID,
              decoded.firstSeq == segment.first, decoded.lastSeq == segment.last else { return nil }
        return decoded
    }

    /// The sealed segments that follow each other from `base` on, each sound and chained to the
    /// one before; `each` sees every kept segment's ops. Returns the last seq they reach (`base`
    /// if none).
    package static func keptSegments(_ segments: [StoredSegment], from base: Int64, libraryID: UUID?, in db: Database,
                             _ each: (Segment) throws -> Void) throws -> Int64 {
        var kept = base
        var previous: String?
        for segment in segments {
            guard segment.first == kept + 1, previous.map({ $0 == segment.previous }) ?? true,
                  let decoded = sound(segment, libraryID: libraryID, in: db) else { break }
            try each(decoded)
            kept = segment.last
            previous = segment.digest
        }
        return kept
    }

    /// Merges the new file's WAL into it and leaves it one file (rollback journal mode; the next
    /// open turns WAL back on), so that it can be renamed. SQLite changes the journal mode only
    /// when no other connection has the file open: that also makes sure every connection of the
    /// store just used is closed (a closing store's own threads let go of it soon).
    private static func closeIntoOneFile(_ path: String, damaged: String) throws {
        for attempt in 0..<100 {
            do {
                var options = Database.Options()
                options.create = false
                options.busyTimeoutMilliseconds = 50
                let db = try Database(path: path, options: options)
                if try db.scalarText("PRAGMA journal_mode = DELETE") == "delete" { return }
            } catch let error as SQLiteError where error.isBusy {
                // Another connection is still closing.
            }
            if attempt < 99 { Thread.sleep(forTimeInterval: 0.05) }
        }
        throw ChronicleError(.database, "The salvaged copy at \(path) is still open elsewhere after 5 s; \(damaged) was left as it was.")
    }

    /// Sets the damaged file (WAL first: a stale WAL beside the new file would be read as the new
    /// file's) aside as `<path>.damaged-<time>` and puts the salvaged one in its place. Returns
    /// where the damaged file went.
    private static func replace(_ path: String, with salvaged: String) throws -> String {
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let aside = "\(path).damaged-\(stamp)"
        let files = FileManager.default
        for suffix in ["-wal", "-shm"] where files.fileExists(atPath: path + suffix) {
            try files.moveItem(atPath: path + suffix, toPath: aside + suffix)
        }
        try files.moveItem(atPath: path, toPath: aside)
        try files.moveItem(atPath: salvaged, toPath: path)
        for suffix in ["-wal", "-shm"] { try? files.removeItem(atPath: salvaged + suffix) }
        return aside
    }

    package static func removeFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }
}
