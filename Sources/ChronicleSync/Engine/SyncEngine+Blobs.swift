import ChronicleCore
import ChronicleStore
import Foundation

/// Blobs: the store's queue of files added here goes up after each round's ops, a chunk at a
/// time, each upload going on from what the server holds (so one cut off, on this device or on
/// another server, resumes); files other devices added come down when asked for, in ranges.
extension SyncEngine {
    /// Uploads the queued blobs, oldest first. A transient failure ends the uploads for this round
    /// (the next goes on from what the server holds); a refusal takes that blob out of the queue.
    func uploadBlobs(_ report: inout SyncReport) async {
        let queued: [BlobInfo]
        do {
            queued = try store.queuedBlobs()
        } catch {
            report.blobError = "The local store failed: \(error)"
            return
        }
        for info in queued {
            let failure: SyncError
            do {
                let sent = try await upload(info)
                report.blobBytesSent += sent
                // A file the server held whole already (another device's, or one asked about again
                // after a restore) was not uploaded by this round.
                if sent > 0 || info.length == 0 { report.blobsUploaded += 1 }
                continue
            } catch {
                failure = error
            }
            switch failure {
            case .transient(let reason, _):
                report.blobError = reason
                return
            case .terminal(let refusal) where refusal.code == .blobsNotCarried:
                return   // a transport that carries none: they stay queued
            case .terminal(let refusal):
                let reason = "\(info.ref) cannot be uploaded: \(refusal.message) [\(refusal.code)]"
                do {
                    try store.recordBlobRefused(info.ref, reason: reason)
                    report.blobsRefused += 1
                } catch {
                    report.blobError = "The local store failed: \(error)"
                    return
                }
            }
        }
    }

    /// Sends one blob from what the server holds of it to its end; returns the bytes sent.
    private func upload(_ info: BlobInfo) async throws(SyncError) -> Int64 {
        var status = try await transport.blobStatus(info.ref)
        var sent: Int64 = 0
        var restarts = 0
        while !status.complete {
            let offset = status.received
            let bytes: [UInt8]
            do {
                guard let read = try store.blobBytes(info.ref, offset: offset, count: BlobLimits.transferBytes) else {
                    throw SyncError.terminal(ProtocolError(409, .blobNotHeld, "This store no longer holds \(info.ref) from offset \(offset)."))
                }
                bytes = read
            } catch let error as SyncError {
                throw error
            } catch {
                throw .transient(reason: "The local store failed: \(error)", retryAfterSeconds: nil)
            }
            do {
                status = try await transport.putBlob(info.ref, length: info.length, offset: offset, bytes: bytes)
                sent += Int64(bytes.count)
                configuration.blobUploadProgress?(info.ref, status.received, info.length)
            } catch {
                // What the server holds is the truth an upload goes on from; the store keeps it only
                // for `blobs()` to show (a write with its own sync per chunk would halve the rate).
                if case .transient = error { try? store.recordBlobUploaded(info.ref, serverHolds: status.received, complete: false) }
                // Another device (or an answer lost on the way) moved what the server holds: ask again.
                guard case .terminal(let refusal) = error, refusal.code == .blobOffsetMismatch, restarts < 3 else { throw error }
                restarts += 1
                status = try await transport.blobStatus(info.ref)
                continue
            }
        }
        do {
            try store.recordBlobUploaded(info.ref, serverHolds: info.length, complete: true)
        } catch {
            throw .transient(reason: "The local store failed: \(error)", retryAfterSeconds: nil)
        }
        return sent
    }

    /// Makes sure the store holds blob `ref` whole, fetching what it lacks from the server in
    /// ranges, each going on from what the store holds (a fetch cut off resumes). Transient
    /// failures are retried with backoff (up to `Configuration.retriesPerRoundMax` without
    /// progress); a blob the server does not hold whole yet is `blob_not_found` or
    /// `blob_incomplete` (its device has not uploaded it yet), thrown as a terminal `SyncError`.
    /// `progress(held, length)` is called after each range is kept.
    @discardableResult
    public nonisolated func fetchBlob(_ ref: BlobRef, progress: (@Sendable (Int64, Int64) -> Void)? = nil) async throws(SyncError) -> BlobInfo {
        var failures = 0
        var corrupt = 0
        while true {
            do {
                let held = try store.blobInfo(ref)
                if let held, held.isHeld { return held }
                let offset = held?.received ?? 0
                let range = try await transport.blobRange(ref, offset: offset, count: BlobLimits.transferBytes)
                guard range.offset == offset, range.length >= offset + Int64(range.bytes.count), !range.bytes.isEmpty || range.length == 0 else {
                    throw SyncError.transient(reason: "The server answered a range of \(ref) that does not continue the \(offset) bytes held.", retryAfterSeconds: nil)
                }
                let now = try store.appendFetchedBlob(ref, length: range.length, offset: offset, bytes: range.bytes)
                progress?(now, range.length)
                if now == 0 && range.length > 0 {
                    // The whole came, and did not hash to its address: fetched again, once.
                    corrupt += 1
                    if corrupt > 1 {
                        throw SyncError.terminal(ProtocolError(422, .blobDigestMismatch, "The bytes the server sent for \(ref) do not hash to it, twice."))
                    }
                }
                failures = 0
            } catch let error as SyncError {
                // As a round does: a server that asks for a longer wait than the backoff's cap (a
                // damaged files file says 5 minutes) is reported at once, not waited for.
                guard case .transient(_, let retryAfter) = error, failures < configuration.retriesPerRoundMax, !Task.isCancelled,
                      (retryAfter ?? 0) * 1000 <= Double(configuration.backoffMaxMilliseconds) else { throw error }
                failures += 1
                try? await Task.sleep(nanoseconds: UInt64(backoffMilliseconds(attempt: failures, retryAfterSeconds: retryAfter)) * 1_000_000)
            } catch {
                throw .transient(reason: "The local store failed: \(error)", retryAfterSeconds: nil)
            }
        }
    }
}
