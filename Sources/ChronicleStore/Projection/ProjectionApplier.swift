import ChronicleCore

/// How an apply keeps a store's search indexes.
package enum SearchIndexing: Sendable, Equatable {
    /// Each op's index entries are brought up to date in the same transaction (a local write,
    /// a pulled page, a row rebased on top of the confirmed state).
    case incremental
    /// The indexes are stale and were emptied; they are built again in one pass when the bulk
    /// apply that emptied them closes (`DeviceStore.finishBulk`).
    case deferred
    /// The tables have no search indexes to keep: the server's library files, scratch copies,
    /// and a rebuild, which builds its indexes after the replay.
    case none
}

/// The one way ops reach a projection's tables: every writer (a device's local write, a pulled
/// page, bulk catch-up, a rebuild or a migration's replay, the server's library files) makes one
/// for its transaction, applies its ops through it, and calls `finish` before committing.
///
/// An op is applied by its materializer's steps (built here, or ahead: `apply(_:steps:)`); an op
/// of the log this build cannot read is set aside in `chronicle_unreadable`, never lost and never
/// blocking the ops behind it. With `.incremental` indexing, the search index entries each op
/// changes are noted and written by `finish` in ascending rowid order (`SearchIndexer`).
package struct ProjectionApplier {
    package let indexing: SearchIndexing
    private let materializer: Materializer
    private let indexer: SearchIndexer?
    private let db: Database
    /// The index entries noted so far (`.incremental` only).
    private let batch: SearchIndexer.Batch?

    /// An applier that keeps no search indexes (`.none`): the server's library files and scratch tables.
    package init(_ materializer: Materializer, in db: Database) {
        self.init(materializer, indexer: nil, indexing: .none, in: db)
    }

    /// An applier for a device store's tables. `indexer` is needed for `.incremental`.
    init(_ materializer: Materializer, indexer: SearchIndexer?, indexing: SearchIndexing, in db: Database) {
        precondition(indexing != .incremental || indexer != nil, "incremental indexing needs the store's indexer")
        self.materializer = materializer
        self.indexer = indexer
        self.indexing = indexing
        self.db = db
        self.batch = indexing == .incremental ? SearchIndexer.Batch() : nil
    }

    /// Applies one op (its steps built here).
    package func apply(_ op: Op) throws {
        try apply(op, steps: materializer.steps(for: op))
    }

    /// Applies one op whose steps were built ahead (`materializer.steps(for: op)`, on another thread).
    func apply(_ op: Op, steps: [SQLStep]) throws {
        guard let indexer, let batch else { return try run(op, steps) }
        try indexer.around(op, materializer.schema.currentSpec(of: op), in: db, batch: batch) { try run(op, steps) }
    }

    /// Runs `body`, which rewrites an entity's rows wholesale (putting its confirmed state back
    /// before a rebase), keeping the search indexes in step.
    func rewriting(entity: String, id: String, _ body: () throws -> Void) throws {
        guard let indexer, let batch else { return try body() }
        try indexer.aroundEntity(entity, id, in: db, batch: batch, body)
    }

    /// Writes the index entries the applied ops changed. Call it once, before the transaction commits.
    func finish() throws {
        if let indexer, let batch { try indexer.flush(batch, in: db) }
    }

    private func run(_ op: Op, _ steps: [SQLStep]) throws {
        if steps.isEmpty, let seq = op.serverSeq {
            do {
                _ = try materializer.schema.upcast(op)
            } catch {
                try db.statement("INSERT OR REPLACE INTO \(ProjectionSchema.quoted(ProjectionSchema.unreadableTable))(server_seq, op_id, type, code, message) VALUES (?1, ?2, ?3, ?4, ?5)")
                    .execute([.integer(seq), .text(op.opID.lowercased), .text(op.typeAndVersion), .text(error.code.rawValue), .text(error.message)])
            }
        }
        for step in steps {
            try db.statement(step.sql).execute(step.arguments)
        }
    }
}
