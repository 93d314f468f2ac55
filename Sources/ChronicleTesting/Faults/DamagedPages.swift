import ChronicleCore
import ChronicleStore
import Foundation

/// Pages of an SQLite file (a device store, a library file, an accounts file), damaged the way a
/// failing disk does: the page's bytes overwritten. Shared by the salvage and health tests.
public enum DamagedPages {
    /// Merges the WAL into the file, so that the pages on disk are the store's.
    public static func checkpoint(_ path: String) throws {
        let db = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }())
        _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) }
    }

    /// The file's page size.
    public static func pageSize(_ path: String) throws -> Int {
        let db = try Database(path: path, options: { var o = Database.Options(); o.readOnly = true; return o }())
        return Int(try db.scalarInt("PRAGMA page_size") ?? 4096)
    }

    /// The first page of `table`'s b-tree.
    public static func rootPage(of table: String, in path: String) throws -> Int {
        let db = try Database(path: path, options: { var o = Database.Options(); o.readOnly = true; return o }())
        guard let root = try db.scalarInt("SELECT rootpage FROM sqlite_schema WHERE name = ?1", [.text(table)]) else {
            throw ChronicleError(.invalidValue, "\(path) has no table \(table).")
        }
        return Int(root)
    }

    /// The children of an interior page, in key order (the file format's b-tree pages: type 5
    /// for a table, 2 for an index or a `WITHOUT ROWID` table; the cell count at offset 3, the
    /// right-most child at 8, the cell pointers from 12, each cell starting with its child).
    public static func children(of page: Int, in path: String) throws -> [Int] {
        let size = try pageSize(path)
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        let start = (page - 1) * size
        let header = start + (page == 1 ? 100 : 0)
        guard bytes[header] == 5 || bytes[header] == 2 else { return [] }
        func u16(_ at: Int) -> Int { Int(bytes[at]) << 8 | Int(bytes[at + 1]) }
        func u32(_ at: Int) -> Int { Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) }
        let cells = u16(header + 3)
        return (0..<cells).map { u32(start + u16(header + 12 + 2 * $0)) } + [u32(header + 8)]
    }

    /// Overwrites the header of `page` (its first bytes after the file header on page 1).
    public static func damage(page: Int, in path: String) throws {
        let size = try pageSize(path)
        guard let handle = FileHandle(forUpdatingAtPath: path) else {
            throw ChronicleError(.fileUnreadable, "\(path) cannot be opened for writing.")
        }
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64((page - 1) * size + (page == 1 ? 100 : 0)))
        handle.write(Data(repeating: 0xEE, count: 16))
    }

    /// A leaf page from the middle of `table`, damaged; the table must span several pages.
    public static func damageMiddleLeaf(of table: String, in path: String) throws {
        var page = try rootPage(of: table, in: path)
        var children = try children(of: page, in: path)
        guard children.count >= 3 else {
            throw ChronicleError(.invalidValue, "\(table) spans fewer than three pages; it needs more rows to damage a leaf in its middle.")
        }
        // Down the middle to a leaf: a table of wide rows (a `WITHOUT ROWID` one keeps whole
        // rows in its interior pages too) is more than two levels deep.
        while !children.isEmpty {
            page = children[children.count / 2]
            children = try Self.children(of: page, in: path)
        }
        try damage(page: page, in: path)
    }
}
