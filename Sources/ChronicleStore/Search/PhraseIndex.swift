import ChronicleCore

/// The index of adjacent word pairs kept beside a search index over documents
/// (`SearchIndexSpec.holdsDocuments`: article text, transcripts) or over an entity's own rows
/// (articles' titles, authors and URLs; feeds; jobs), which answers phrases.
///
/// FTS5 answers a phrase by reading the position lists of each of its words in every row that
/// holds them all; in rows of thousands of words, for two common words, that is most of the
/// index, read twice (the newest matches, then bm25's count of all of them); in 100,000 titles,
/// `"ro ro"` read the lists of the 37,751 that hold `ro` (4–8 ms). Here the rows'
/// text is indexed a second time as word pairs (`SearchPairs`: `a b c` as `a_b b_c c_`), so
/// the phrase `"a b"` is one token, `"a b c"` the phrase `"a_b b_c"`: the same rows, as many
/// hits in each and the same row lengths, so bm25 gives the same scores. Snippets come from
/// here too, with the text read from the content view (`SearchSnippet.phraseIndexSQL`).
///
/// The table is contentless (`content=''`): it holds only the index. It may lag behind its
/// word index: it holds exactly the content rows whose rowid is at most its watermark
/// (`watermarkKey` in `chronicle_meta`; none means 0), at their current values.
/// - A write that changes an indexed row at or below the watermark changes the pairs too
///   (`SearchIndexer`); rows above it are left to the filler.
/// - The filler (`DeviceStore.startPhraseIndexing`, `fillPhraseIndexChunk`) indexes the next rows above the watermark
///   and raises it, one short transaction at a time; when none is left the watermark becomes
///   `complete` and every later row is indexed as it is written.
/// - A full build of the search indexes (rebuild, bulk apply, bootstrap) empties the pairs and
///   sets the watermark to 0 (a small library is indexed at once); so does the plan's gate for
///   premium text (triggers).
/// Searches read a phrase from the pairs only while the watermark is `complete`.
struct PhraseIndex: Sendable {
    let index: SearchIndexSpec

    /// The watermark of a phrase index that holds every row.
    static let complete = SearchPairs.phraseIndexComplete

    /// The phrase indexes of a projection: one per search index over documents or over an
    /// entity's own rows (`SearchPairs.phraseIndexTable`). Tags (a set), notes and highlights
    /// (hits counted for their article) have none: each is written with every annotation, and
    /// their phrases are cheap (short rows, few of them). The titles' phrase index costs every save
    /// of an article one more FTS5 row: measured 12-05, alternating builds, the local write's median
    /// 0.303–0.307 against 0.276–0.292 ms and p99 0.81–0.87 against 0.73–0.78 ms, where the
    /// phrases' p99 went from 6.8 to 3.1 ms.
    static func all(_ projection: ProjectionSchema) -> [PhraseIndex] {
        projection.searchIndexes.compactMap { PhraseIndex(of: $0.index) }
    }

    /// The phrase index beside `index`; nil if it has none (`SearchPairs.phraseIndexTable`).
    init?(of index: SearchIndexSpec) {
        guard SearchPairs.phraseIndexTable(of: index) != nil else { return nil }
        self.index = index
    }

    /// The FTS5 table's name: the word index's, then `_pairs`.
    var table: String { SearchPairs.phraseIndexTable(of: index)! }
    /// The `chronicle_meta` key of the watermark.
    var watermarkKey: String { SearchPairs.phraseIndexWatermarkKey(of: index) }

    private var quotedTable: String { ProjectionSchema.quoted(table) }
    private var columns: String { ProjectionSchema.searchColumns(index) }
    /// The word index's content view, quoted: the rows both indexes hold.
    var view: String { ProjectionSchema.quoted(ProjectionSchema.contentViewName(of: index)) }
    private var pairValues: [String] {
        (0..<index.fields.count).map { "\(SearchPairs.functionName)(?\($0 + 2))" }
    }

    /// The CREATE statement, as `sqlite_schema` keeps it.
    var createSQL: String {
        "CREATE VIRTUAL TABLE \(quotedTable) USING fts5(\(columns), content='', tokenize=\"\(SearchPairs.pairTokenize)\")"
    }

    /// Triggers that empty the pairs and lower the watermark to 0 when the plan's gate fills or
    /// empties the word index (premium text only); the filler then indexes what the gate let in
    /// (started by the next phrase search, or the next open).
    func triggers(_ projection: ProjectionSchema) -> [String] {
        guard index.requiresPremium else { return [] }
        // Nothing to fill when the gate left the word index empty (premium ended, or began before any text).
        let body = "INSERT INTO \(quotedTable)(\(quotedTable)) VALUES ('delete-all'); "
            + "INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES ('\(watermarkKey)', "
            + "CASE WHEN EXISTS (SELECT 1 FROM \(view)) THEN 0 ELSE \(Self.complete) END);"
        return projection.planGateEvents.map { event in
            "CREATE TRIGGER IF NOT EXISTS \(ProjectionSchema.quoted(table + "_plan_" + event.suffix)) \(event.head) BEGIN \(body) END"
        }
    }

    /// The names of `triggers`.
    func triggerNames(_ projection: ProjectionSchema) -> [String] {
        index.requiresPremium ? projection.planGateEvents.map { table + "_plan_" + $0.suffix } : []
    }

    /// `?1` rowid, `?2`… the row's values as the word index holds them → their pairs indexed.
    var insertSQL: String {
        "INSERT INTO \(quotedTable)(rowid, \(columns)) VALUES (?1, \(pairValues.joined(separator: ", ")))"
    }

    /// `?1` rowid, `?2`… the values the row was indexed with → their pairs removed (a contentless
    /// table forgets a row given exactly what it was given).
    var deleteSQL: String {
        "INSERT INTO \(quotedTable)(\(quotedTable), rowid, \(columns)) VALUES ('delete', ?1, \(pairValues.joined(separator: ", ")))"
    }

    /// `?1` watermark, `?2` how many → the next `?2` content rows above it: (rowid, bytes of text).
    var chunkSQL: String {
        "SELECT rid, \(Self.bytesSQL(index)) FROM \(view) WHERE rid > ?1 ORDER BY rid LIMIT ?2"
    }

    /// An SQL expression: a content row's bytes of text, over the index's fields.
    static func bytesSQL(_ index: SearchIndexSpec) -> String {
        index.fields.map { "coalesce(length(CAST(\(ProjectionSchema.quoted($0)) AS BLOB)), 0)" }.joined(separator: " + ")
    }

    /// `?1`…`?2` rowid range → its content rows' pairs indexed, in rowid order.
    var fillSQL: String {
        let values = index.fields.map { "\(SearchPairs.functionName)(\(ProjectionSchema.quoted($0)))" }.joined(separator: ", ")
        return "INSERT INTO \(quotedTable)(rowid, \(columns)) SELECT rid, \(values) FROM \(view) WHERE rid > ?1 AND rid <= ?2 ORDER BY rid"
    }

    /// Empties the table.
    var clearSQL: String { "INSERT INTO \(quotedTable)(\(quotedTable)) VALUES ('delete-all')" }

    /// The watermark in `db`'s view of the store.
    func watermark(in db: Database) throws -> Int64 {
        try db.statement("SELECT value FROM chronicle_meta WHERE key = ?1").map([.text(watermarkKey)]) { $0.int(0) }.first ?? 0
    }

    func setWatermark(_ value: Int64, in db: Database) throws {
        try db.statement("INSERT OR REPLACE INTO chronicle_meta(key, value) VALUES (?1, ?2)").execute([.text(watermarkKey), .integer(value)])
    }
}
