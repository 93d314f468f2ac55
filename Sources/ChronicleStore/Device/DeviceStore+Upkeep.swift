import ChronicleCore
import Foundation

/// What a store needs done before use beyond opening it (`DeviceStore.upkeepDue()`), or what
/// `DeviceStore.performUpkeep(progress:)` did.
public struct StoreUpkeep: Sendable, Equatable {
    /// A change of the store's schema: the projection is rebuilt from the log in the new shape.
    public struct SchemaChange: Sendable, Equatable {
        /// The schema version the projection was built with.
        public var from: Int64
        /// The version the store was opened with.
        public var to: Int
    }

    /// The schema changed since the projection was built (reads and writes wait for the rebuild).
    public var schemaChange: SchemaChange?
    /// A bulk apply was interrupted before it built the search indexes again: searches miss what
    /// it brought until they are rebuilt (the next write would do it first).
    public var searchIndexesStale = false
    /// Search indexes an earlier build defined otherwise, made again this build's way. Until then
    /// they answer every query the same, only slower.
    public var redefinedSearchIndexes: [String] = []
    /// Phrase indexes the store lacks (stores made before format v6) are made; they and any not
    /// yet complete are filled in the background, and searches read phrases from the word indexes
    /// until they are.
    public var phraseIndexesToFill = false
    /// A downloaded start image the store never adopted, left beside it, is removed.
    public var leftoverStartImage = false

    /// Nothing to do.
    public var isEmpty: Bool {
        schemaChange == nil && !searchIndexesStale && redefinedSearchIndexes.isEmpty && !phraseIndexesToFill && !leftoverStartImage
    }

    /// One line per item, in the order `performUpkeep` takes them.
    public var steps: [String] {
        var steps: [String] = []
        if let change = schemaChange {
            steps.append("schema v\(change.from) → v\(change.to): rebuild the projection and its search indexes from the log")
        }
        if searchIndexesStale { steps.append("build the search indexes an interrupted catch-up left stale") }
        if !redefinedSearchIndexes.isEmpty {
            steps.append("make the search indexes \(redefinedSearchIndexes.joined(separator: ", ")) again this build's way")
        }
        if phraseIndexesToFill { steps.append("fill the phrase indexes in the background") }
        if leftoverStartImage { steps.append("remove a downloaded start image that was never adopted") }
        return steps
    }
}

extension DeviceStore {
    /// What `performUpkeep` would do to this store now. Reads only.
    public func upkeepDue() throws -> StoreUpkeep {
        var due = StoreUpkeep()
        let (fingerprint, version) = try readers.read { db in
            (try LogTables.meta("schema_fingerprint", in: db).textValue, try LogTables.meta("schema_version", in: db).integerValue ?? 0)
        }
        if fingerprint != schema.fingerprint {
            due.schemaChange = StoreUpkeep.SchemaChange(from: version, to: schema.version)
        } else {
            // A rebuild for the schema builds all of these anew.
            due.searchIndexesStale = try readers.read { db in try needsSearchIndexRebuild(in: db) } && !bulkInProgress.withLock { $0 }
            due.redefinedSearchIndexes = try redefinedSearchIndexes()
        }
        due.phraseIndexesToFill = try readers.read { db in
            try phraseIndexesMissing(in: db) || !phraseIndexes.allSatisfy { try $0.watermark(in: db) == PhraseIndex.complete }
        }
        due.leftoverStartImage = hasLeftoverStartImage()
        return due
    }

    /// Does what the store needs before use (`upkeepDue`): rebuilds the projection for a changed
    /// schema (with `progress`; the longest step), builds search indexes an interrupted bulk apply
    /// left stale, makes redefined search indexes again, starts filling phrase indexes in the
    /// background, and removes a leftover start image. Returns what it did. Each step is its own
    /// transaction: interrupted, the next call carries on. Making a redefined index or a phrase
    /// index is best effort (on a full disk it is left for the next call; the old index answers
    /// the same); the rest throws.
    @discardableResult
    public func performUpkeep(progress: ProgressHandler? = nil) throws -> StoreUpkeep {
        var done = StoreUpkeep()
        let due = try upkeepDue()
        if let change = due.schemaChange {
            // Ops of earlier versions are upcast as they are read; the new schema is recorded in the same transaction.
            try rebuild(progress: progress)
            done.schemaChange = change
        }
        if due.searchIndexesStale {
            // What a write outside a bulk apply does first (nothing while one runs).
            _ = try writeTransaction(spillToFiles: true) { db in try prepareSearchIndexing(in: db) }
            done.searchIndexesStale = true
        }
        if !due.redefinedSearchIndexes.isEmpty, let made = try? recreateRedefinedSearchIndexes() {
            done.redefinedSearchIndexes = made
        }
        if due.phraseIndexesToFill, (try? openPhraseIndexes()) != nil {
            done.phraseIndexesToFill = true
        }
        if due.leftoverStartImage {
            removeLeftoverStartImage()
            done.leftoverStartImage = true
        }
        return done
    }
}
