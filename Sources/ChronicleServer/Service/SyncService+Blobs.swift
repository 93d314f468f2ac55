import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// Blobs (`BlobRef`): a library's large files, uploaded in chunks that resume where they
/// stopped and downloaded in ranges, beside the ops and never in their way. Kept by `blobs`.
extension SyncService {
    public func blobStatusNow(library: UUID, blob: BlobRef, token: String) throws(ProtocolError) -> BlobStatus {
        _ = try identify(token, library: library)
        return try blobs.status(library: library, blob: blob)
    }

    public func putBlobNow(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8], token: String) throws(ProtocolError) -> BlobStatus {
        let identity = try identify(token, library: library)
        let status = try blobs.put(library: library, blob: blob, length: length, offset: offset, bytes: bytes)
        metrics.blobBytes(received: bytes.count, sent: 0)
        if status.complete && offset + Int64(bytes.count) == length {
            log.log("blob_uploaded", ["library": .text(library.lowercased), "device": .text(identity.deviceID.lowercased),
                                      "blob": .text(blob.description), "bytes": .integer(length)])
        }
        return status
    }

    public func blobRangeNow(library: UUID, blob: BlobRef, offset: Int64, count: Int, token: String) throws(ProtocolError) -> BlobRange {
        _ = try identify(token, library: library)
        let range = try blobs.range(library: library, blob: blob, offset: offset, count: count)
        metrics.blobBytes(received: 0, sent: range.bytes.count)
        return range
    }

    /// Deletes uploads left unfinished for longer than `maintenancePolicy.abandonedUploadSeconds`
    /// (the maintenance thread runs it every `horizonCheckSeconds`); returns how many.
    @discardableResult
    public func sweepAbandonedUploads() -> Int {
        guard let seconds = maintenancePolicy.abandonedUploadSeconds else { return 0 }
        let before = clock.nowMilliseconds() - Int64(seconds * 1000)
        do {
            let dropped = try blobs.dropAbandonedUploads(before: before)
            if dropped > 0 { log.log("blob_uploads_abandoned", ["dropped": .integer(Int64(dropped)), "older_than_s": .real(seconds)]) }
            return dropped
        } catch {
            log.log("blob_sweep_failed", ["error": .text("\(error)")])
            return 0
        }
    }

    /// Deletes the files no row names any more (`maintenancePolicy.unnamedBlobSeconds`; the
    /// maintenance thread runs it every `blobCollectionSeconds`): in each library, the complete
    /// files completed longer ago than that which no row of the projection names, rows
    /// soft-deleted longer ago than that not counting (`BlobNames`). The projection is read
    /// first; then, while pushes to the library wait, the ops confirmed since spare what they
    /// name, and the rest are deleted. Returns the files and bytes deleted.
    @discardableResult
    public func collectUnnamedBlobs() -> (blobs: Int, bytes: Int64) {
        guard let seconds = maintenancePolicy.unnamedBlobSeconds else { return (0, 0) }
        let before = clock.nowMilliseconds() - Int64(seconds * 1000)
        var total = (blobs: 0, bytes: Int64(0))
        let libraries: [UUID]
        do { libraries = try blobs.libraries() } catch {
            log.log("blob_collection_failed", ["error": .text("\(error)")])
            return total
        }
        for id in libraries {
            do {
                let candidates = try blobs.completed(library: id, before: before)
                if candidates.isEmpty { continue }
                let library: ServerLibrary
                do { library = try self.library(id) } catch {
                    if error.code == .unknownLibrary { continue }   // its blobs go with it (`runLibraryDeletions`)
                    throw error
                }
                let (names, seq) = try library.blobNames(deletedBefore: before)
                let unnamed = candidates.keys.filter { !names.contains($0) }
                if unnamed.isEmpty { continue }
                let (count, bytes) = try library.whilePushesWait(namedAfter: seq) { namedSince in
                    let doomed = unnamed.filter { !namedSince.contains($0) }.sorted()
                    return (doomed.count, try blobs.delete(library: id, blobs: doomed))
                }
                if count > 0 {
                    try blobs.giveSpaceBack(library: id)   // after the pushes go on: a rewrite may take a while
                    total.blobs += count
                    total.bytes += bytes
                    log.log("blobs_collected", ["library": .text(id.lowercased), "blobs": .integer(Int64(count)), "bytes": .integer(bytes),
                                                "unnamed_for_s": .real(seconds)])
                }
            } catch {
                log.log("blob_collection_failed", ["library": .text(id.lowercased), "error": .text("\(error)")])
            }
        }
        return total
    }

    public func blobStatus(library: UUID, blob: BlobRef, token: String) async throws(ProtocolError) -> BlobStatus {
        try blobStatusNow(library: library, blob: blob, token: token)
    }

    public func putBlob(library: UUID, blob: BlobRef, length: Int64, offset: Int64, bytes: [UInt8], token: String) async throws(ProtocolError) -> BlobStatus {
        try putBlobNow(library: library, blob: blob, length: length, offset: offset, bytes: bytes, token: token)
    }

    public func blobRange(library: UUID, blob: BlobRef, offset: Int64, count: Int, token: String) async throws(ProtocolError) -> BlobRange {
        try blobRangeNow(library: library, blob: blob, offset: offset, count: count, token: token)
    }
}
