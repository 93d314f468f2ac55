import Foundation
import Testing

/// The store is an ordinary SQLite database: the stock `sqlite3` shell reads
/// the projection and queries the FTS5 indexes with no Chronicle code involved.
@Suite struct SQLiteShellTests {
    @Test func plainSQLiteShellReadsProjectionAndSearchIndexes() throws {
        let t = try Tool()
        try t.ok("init")
        let article = try t.id("save", "https://example.com/tunnels", "--title", "Reading in tunnels")
        try t.ok("tag", article, "commute")
        try t.ok("highlight", article, "--quote", "signal drops in the tunnel")
        let shell = URL(fileURLWithPath: "/usr/bin/sqlite3")
        try #require(FileManager.default.isExecutableFile(atPath: shell.path), "the sqlite3 shell is installed by the test script")

        let rows = try Tool.exec(shell, ["-readonly", t.store, "SELECT id, title FROM article; SELECT value FROM article_tags;"])
        #expect(rows.status == 0, "\(rows.stderr)")
        #expect(rows.stdout == "\(article)|Reading in tunnels\ncommute\n")

        let fts = try Tool.exec(shell, ["-readonly", t.store, """
            SELECT a.id FROM article_fts JOIN article a ON a.rowid = article_fts.rowid WHERE article_fts MATCH 'tunnels';
            SELECT h.article_id FROM highlight_fts JOIN highlight h ON h.rowid = highlight_fts.rowid WHERE highlight_fts MATCH 'signal';
            SELECT count(*) FROM chronicle_outbox;
            PRAGMA integrity_check;
            """])
        #expect(fts.status == 0, "\(fts.stderr)")
        #expect(fts.stdout == "\(article)\n\(article)\n3\nok\n")
    }
}
