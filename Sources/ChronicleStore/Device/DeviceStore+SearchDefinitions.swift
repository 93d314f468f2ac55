import ChronicleCore
import Foundation

extension DeviceStore {
    /// Makes every search index that this build defines otherwise again, and refills it.
    ///
    /// An FTS5 table's definition (tokenizer, prefix indexes) is derived from the schema and
    /// from this build (`ProjectionSchema.searchTableStatement`), not recorded in the store format: a
    /// store made by an earlier build can hold an index defined the earlier way (without the
    /// prefix index of 4 over documents). `performUpkeep` calls this: such an index is
    /// dropped, created with this build's definition and filled from its content view, all in
    /// one transaction, so a process killed half-way (or a disk that fills up) leaves the old
    /// index, which answers every query the same, and the next upkeep does it again. Nothing
    /// else changes: the content, the log and the other indexes stay as they are. Returns the
    /// indexes made again.
    @discardableResult
    func recreateRedefinedSearchIndexes() throws -> [String] {
        let names = Set(try redefinedSearchIndexes())
        guard !names.isEmpty else { return [] }
        let redefined = projection.searchIndexes.filter { names.contains($0.index.index) }
        try writeTransaction(spillToFiles: true) { db in
            let premium = try db.scalarInt("SELECT \(projection.premiumCondition)") == 1
            for (entity, index) in redefined {
                try db.execute("DROP TABLE \(ProjectionSchema.quoted(index.index))")
                try db.execute(projection.searchTableStatement(index, in: entity))
                try db.execute(ProjectionSchema.searchRankSQL(index))
                for sql in Self.searchIndexRebuildSQL(index.index, gatedOff: index.requiresPremium && !premium) {
                    try db.execute(sql)
                }
            }
        }
        return redefined.map(\.index.index)
    }

    /// The search indexes this store holds defined otherwise than this build defines them.
    func redefinedSearchIndexes() throws -> [String] {
        let stored = Dictionary(try readers.read { db in
            try db.query("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'") {
                ($0.text(0), $0.text(1))
            }
        }, uniquingKeysWith: { first, _ in first })
        return projection.searchIndexes.filter { entity, index in
            guard let sql = stored[index.index] else { return false }
            return sql != projection.searchTableStatement(index, in: entity)
        }.map(\.index.index)
    }
}
