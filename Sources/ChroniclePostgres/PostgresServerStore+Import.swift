import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// A lone server's libraries moved into PostgreSQL (`chronicle server move-to-postgres`): each
/// library file's history goes in whole, as the servers sharing PostgreSQL would have written it.
extension PostgresServerStore {
    /// What `importLibrary` did.
    public enum ImportOutcome: Sendable, Equatable {
        /// Copied, with this many ops (in segments and in the log) and ids of ops before where history begins.
        case copied(ops: Int64, droppedOpIDs: Int64)
        /// PostgreSQL held it already, with the same incarnation and head (a move run again after
        /// it was interrupted): nothing was written.
        case alreadyThere
    }

    /// Copies `source` (a lone server's library file, no server running on it) into PostgreSQL in
    /// one transaction: the library's row with the file's incarnation (devices see the same history
    /// and go on from their cursors); its sealed segments as they are, chained as they were; where
    /// history was dropped past the horizon, the snapshot there and the ids of the ops before it;
    /// the log after the segments; every refusal given; each device's last answered deviceSeq.
    /// The guard triggers check it as it goes in. Refused (`store_exists`), writing nothing, where
    /// PostgreSQL holds the library with another history. `progress` is called with the ops copied
    /// and the ops to copy.
    public func importLibrary(_ source: ServerLibrary, progress: ((Int64, Int64) -> Void)? = nil) throws -> ImportOutcome {
        let header = try source.exportHeader()
        let key = source.libraryID.lowercased
        return try pool.withConnection { pg in
            try pg.transaction { pg -> ImportOutcome in
                if try Self.holdsAlready(source, header: header, key: key, pg) { return .alreadyThere }
                try Self.insertLibraryRow(source, header: header, key: key, pg)
                var tally = ImportTally(total: header.head - header.historyBase, progress: progress)
                tally.report()
                let dropped = try Self.copyDroppedHistory(source, header: header, key: key, pg)
                let sealed = try Self.copySealedSegments(source, header: header, key: key, pg, tally: &tally)
                try Self.copyLog(source, after: sealed, header: header, key: key, pg, tally: &tally)
                for row in try source.rejectedOps() { try PostgresLibrary.insertRejected(row, library: key, generation: 1, pg) }
                for device in try source.deviceSeqs() {
                    try PostgresLibrary.recordDevice(device.id, device.lastDeviceSeq, library: key, generation: 1, pg)
                }
                return .copied(ops: tally.copied, droppedOpIDs: dropped)
            }
        }
    }

    /// The ops an import has copied so far, reported to its `progress` with the ops to copy.
    private struct ImportTally {
        let total: Int64
        let progress: ((Int64, Int64) -> Void)?
        var copied: Int64 = 0

        init(total: Int64, progress: ((Int64, Int64) -> Void)?) {
            self.total = total
            self.progress = progress
        }

        /// Calls `progress` with the ops copied and the ops to copy.
        func report() { progress?(copied, total) }

        /// Counts `ops` more ops copied and reports it.
        mutating func add(_ ops: Int64) {
            copied += ops
            report()
        }
    }

    /// Whether PostgreSQL holds library `key` already with `source`'s history (the same incarnation
    /// and head: a move run again); `store_exists` where it holds it with another. Locks its row.
    private static func holdsAlready(_ source: ServerLibrary, header: ServerLibrary.ExportHeader, key: String,
                                     _ pg: PostgresConnection) throws -> Bool {
        let existing = try pg.execute("SELECT incarnation, head FROM chronicle_libraries WHERE library_id = $1 FOR UPDATE", [key])
        guard existing.count == 1 else { return false }
        let (incarnation, head) = (try existing.string(0, 0), try existing.int(0, 1))
        guard incarnation == source.incarnation.lowercased, head == header.head else {
            throw ChronicleError(.storeExists, "PostgreSQL already holds library \(key), with another history (incarnation \(incarnation), head \(head); this file: incarnation \(source.incarnation.lowercased), head \(header.head)); nothing was copied for it. Was it moved before and written to since, or is this the wrong data directory?")
        }
        return true
    }

    /// The library's row: the file's incarnation, head, sealed end and where its history begins.
    private static func insertLibraryRow(_ source: ServerLibrary, header: ServerLibrary.ExportHeader, key: String,
                                         _ pg: PostgresConnection) throws {
        try pg.execute("""
            INSERT INTO chronicle_libraries(library_id, incarnation, schema_name, created_at, head, head_time, generation,
                                            sealed_through, sealed_digest, history_base, history_dropped_at)
            VALUES ($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, $4, $5, 1, $6, $7, $6, $8)
            """, [key, source.incarnation.lowercased, source.schema.name, String(header.head), String(header.headTime),
                  String(header.historyBase), header.sealedDigestAtBase, header.historyDroppedAt.map { String($0) }])
    }

    /// Where history begins past the horizon: the snapshot there, and the ids of the ops before it.
    /// Returns how many ids were copied.
    private static func copyDroppedHistory(_ source: ServerLibrary, header: ServerLibrary.ExportHeader, key: String,
                                           _ pg: PostgresConnection) throws -> Int64 {
        var dropped: Int64 = 0
        guard header.historyBase > 0 else { return dropped }
        guard let snapshot = try source.snapshot(at: header.historyBase) else {
            throw ChronicleError(.invariantViolated, "Library \(key)'s history begins after seq \(header.historyBase), but its file holds no snapshot there; nothing was copied for it. Check it with `chronicle server verify`.")
        }
        try PostgresLibrary.insertSnapshot(snapshot.frame, at: header.historyBase, stateDigest: snapshot.stateDigest, library: key, pg)
        var after: Int64 = 0
        while true {
            let batch = try source.droppedOps(after: after, through: header.historyBase, limit: 20_000)
            guard let last = batch.last else { break }
            try PostgresLibrary.insertDropped(batch, library: key, pg)
            dropped += Int64(batch.count)
            after = last.serverSeq
        }
        return dropped
    }

    /// The sealed segments, each continuing the last (the trigger checks), then the sealed end moved
    /// past it. Returns the seq they end at, which must be the file's.
    private static func copySealedSegments(_ source: ServerLibrary, header: ServerLibrary.ExportHeader, key: String,
                                           _ pg: PostgresConnection, tally: inout ImportTally) throws -> Int64 {
        var sealed = header.historyBase
        while true {
            let segments = try source.sealedSegments(after: sealed, limit: 8)
            guard !segments.isEmpty else { break }
            for segment in segments {
                let body = try LZ4Frame.decompress(segment.frame, maxBytes: SegmentCodec.Limits().maxDecodedBytes)
                guard LogTables.chainDigest(previous: segment.previousDigest, body: body) == segment.digest else {
                    throw ChronicleError(.invariantViolated, "Library \(key)'s sealed segment \(segment.firstSeq)…\(segment.lastSeq) does not match its digest; nothing was copied for it. Check the file with `chronicle server verify`.")
                }
                try PostgresLibrary.insertSegment(segment.frame, first: segment.firstSeq, last: segment.lastSeq, digest: segment.digest,
                                                  previousDigest: segment.previousDigest, bodyBytes: body.count, library: key, pg)
                try pg.execute("UPDATE chronicle_libraries SET sealed_through = $2, sealed_digest = $3 WHERE library_id = $1",
                               [key, String(segment.lastSeq), segment.digest])
                sealed = segment.lastSeq
                tally.add(segment.lastSeq - segment.firstSeq + 1)
            }
        }
        guard sealed == header.sealedThrough else {
            throw ChronicleError(.invariantViolated, "Library \(key)'s sealed segments end at seq \(sealed), but its file says \(header.sealedThrough); nothing was copied for it. Check it with `chronicle server verify`.")
        }
        return sealed
    }

    /// The log after the sealed segments (`sealed`), without a gap, up to the file's head.
    private static func copyLog(_ source: ServerLibrary, after sealed: Int64, header: ServerLibrary.ExportHeader, key: String,
                                _ pg: PostgresConnection, tally: inout ImportTally) throws {
        var head = sealed
        while true {
            let ops = try source.loggedOps(after: head, limit: 5_000)
            guard let last = ops.last?.serverSeq else { break }
            guard ops.first?.serverSeq == head + 1, last == head + Int64(ops.count) else {
                throw ChronicleError(.invariantViolated, "Library \(key)'s log does not run on from seq \(head) without a gap; nothing was copied for it. Check it with `chronicle server verify`.")
            }
            try PostgresLibrary.insertLog(ops[...], library: key, pg)
            head = last
            tally.add(Int64(ops.count))
        }
        guard head == header.head else {
            throw ChronicleError(.invariantViolated, "Library \(key)'s log ends at seq \(head), short of its head \(header.head); nothing was copied for it.")
        }
    }
}
