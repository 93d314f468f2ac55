import ChronicleCore
import ChronicleStore

/// What the server's blob collection (`SyncService.collectUnnamedBlobs`) reads of a library.
extension ServerLibrary {
    /// The files this library's projection names (hex digests, `BlobNames`) and the seq it
    /// was read at, in one read transaction. Where this file follows an upstream, it catches up first.
    public func blobNames(deletedBefore: Int64?) throws -> (names: Set<String>, seq: Int64) {
        try catchUp()
        return try read { db in   // one read transaction
            (try BlobNames.named(in: db, projection: projection, deletedBefore: deletedBefore), try Self.head(in: db))
        }
    }

    /// Runs `body` while pushes to this library wait, handing it the files named by ops confirmed
    /// after `seq` (by any text value of their payloads): what a push made between a `blobNames`
    /// read and a deletion would otherwise miss. Where an upstream decides the order, pushes through
    /// every server sharing it wait (`LibraryUpstream.whileOrderWaits`), and the ops are all it has
    /// confirmed.
    public func whilePushesWait<T>(namedAfter seq: Int64, _ body: (Set<String>) throws -> T) throws -> T {
        guard let upstream else { return try whileWriterWaits(namedAfter: seq, body) }
        return try upstream.whileOrderWaits(self) { try whileWriterWaits(namedAfter: seq, body) }
    }

    private func whileWriterWaits<T>(namedAfter seq: Int64, _ body: (Set<String>) throws -> T) throws -> T {
        try writer.withLock { _ in
            var named: Set<String> = []
            func note(_ op: Op) {
                for value in op.payload.values {
                    if let text = value.textValue, let ref = BlobRef(text) { named.insert(ref.hex) }
                }
            }
            // Read here rather than through `pull`, which catches up and so takes the writer.
            try read { db in
                let sealed = try LogTables.sealedUpTo(in: db)
                if seq < sealed {
                    try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: seq, upTo: sealed) { note($0) }
                }
                try db.statement("SELECT \(LogTables.logColumns) FROM chronicle_log WHERE server_seq > ?1 ORDER BY server_seq")
                    .forEach([.integer(max(seq, sealed))]) { note(try LogTables.logOp($0, libraryID: libraryID)) }
            }
            return try body(named)
        }
    }
}
