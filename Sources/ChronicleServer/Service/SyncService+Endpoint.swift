import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

// `SyncEndpoint` for callers in the same process (tests, the simulator, the in-memory transport).
extension SyncService {
    public func snapshot(library: UUID, token: String) async throws(ProtocolError) -> [UInt8] {
        try snapshotNow(library: library, token: token).frame
    }

    public func startImage(library: UUID, storeFormat: Int64, schemaFingerprint: String, token: String) async throws(ProtocolError) -> [UInt8]? {
        do {
            return try startImageNow(library: library, token: token, storeFormat: storeFormat, schemaFingerprint: schemaFingerprint).bytes.bytes
        } catch where error.code == .noStartImage {
            return nil
        }
    }

    /// The library's push; one that would leave a gap in its device's sequence waits up to
    /// `milliseconds` (holding no lock, blocking this thread) for a push to commit, and is
    /// tried again. Past the wait it is refused as before.
    func pushWaitingForGaps(_ ops: [Op], from device: UUID, into library: ServerLibrary,
                                    milliseconds: Int) throws(ProtocolError) -> PushResponse {
        var wait = GapWait(milliseconds: milliseconds, metrics: metrics)
        while true {
            let generation = library.pushGeneration
            do {
                let response = try library.push(ops, from: device)
                wait.ended(filled: true)
                return response
            } catch let error where wait.holds(after: error) {
                library.waitForPush(after: generation, nanoseconds: wait.nanosecondsLeft)
            } catch {
                wait.ended(filled: false)
                throw error
            }
        }
    }

    /// `pushNow`, except that the wait for a device's push ahead (see `pushNow`) suspends the
    /// task instead of blocking its thread.
    public func push(_ segment: Segment, token: String) async throws(ProtocolError) -> PushResponse {
        let library = try authorize(token, library: segment.libraryID).1
        var wait = GapWait(milliseconds: limits.pushGapWaitMilliseconds, metrics: metrics)
        while true {
            let generation = library.pushGeneration
            do {
                let response = try pushNow(segment, token: token, gapWaitMilliseconds: 0)
                wait.ended(filled: true)
                return response
            } catch let error where wait.holds(after: error) {
                // Polled: in-process callers only (tests, the simulator, benchmarks); HTTP requests block in pushNow.
                while library.pushGeneration == generation, wait.nanosecondsLeft > 0 {
                    try? await Task.sleep(nanoseconds: 1_000_000)
                }
            } catch {
                wait.ended(filled: false)
                throw error
            }
        }
    }

    /// Cancelling the calling task answers a parked pull at once.
    public func pull(library: UUID, after cursor: Int64, limit: Int, waitMilliseconds: Int, token: String) async throws(ProtocolError) -> PullPage {
        let holder = Locked<(ticket: PullTicket?, cancelled: Bool)>((nil, false))
        let result: Result<PullPage, ProtocolError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ticket = pull(library: library, after: cursor, limit: limit, waitMilliseconds: waitMilliseconds, token: token) { result in
                    continuation.resume(returning: result)
                }
                let cancelNow = holder.withLock { state -> Bool in
                    state.ticket = ticket
                    return state.cancelled
                }
                if cancelNow { ticket?.answerNow() }
            }
        } onCancel: {
            holder.withLock { state -> PullTicket? in
                state.cancelled = true
                return state.ticket
            }?.answerNow()
        }
        return try result.get()
    }

    public func verdict(library: UUID, entity: UUID, token: String) async throws(ProtocolError) -> Verdict {
        try verdictNow(library: library, entity: entity, token: token)
    }
}
