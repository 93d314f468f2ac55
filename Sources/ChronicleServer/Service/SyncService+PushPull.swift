import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

// Pushes ordered into a library, and pulls answered from it or parked until ops arrive.
extension SyncService {
    /// Orders a pushed segment. Blocks on the library's writer; answers op by op. A push that
    /// would leave a gap in its device's sequence first waits, blocking this thread, up to
    /// `limits.pushGapWaitMilliseconds` for the device's push ahead of it (see there).
    public func pushNow(_ segment: Segment, token: String) throws(ProtocolError) -> PushResponse {
        try pushNow(segment, token: token, gapWaitMilliseconds: limits.pushGapWaitMilliseconds)
    }

    func pushNow(_ segment: Segment, token: String, gapWaitMilliseconds: Int) throws(ProtocolError) -> PushResponse {
        let start = DispatchTime.now().uptimeNanoseconds
        let (identity, library) = try authorize(token, library: segment.libraryID)
        guard !segment.isConfirmed else {
            throw ProtocolError(400, .alreadyConfirmed, "A pushed segment carries unconfirmed ops; this one has server sequences.")
        }
        guard segment.ops.count <= limits.pushOpsMax else {
            throw ProtocolError(413, .tooManyOps, "A push holds at most \(limits.pushOpsMax) ops (expected ≤ \(limits.pushOpsMax), actual \(segment.ops.count)).")
        }
        let headBefore = library.head
        let response = try pushWaitingForGaps(segment.ops, from: identity.deviceID, into: library, milliseconds: gapWaitMilliseconds)
        var accepted = 0, duplicate = 0, rejected = 0
        for result in response.results {
            switch result.outcome {
            case .accepted: accepted += 1
            case .duplicate: duplicate += 1
            case .rejected: rejected += 1
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        metrics.ops(accepted: accepted, duplicate: duplicate, rejected: rejected)
        metrics.pushed(seconds: seconds)
        log.log("push", ["library": .text(library.libraryID.lowercased), "device": .text(identity.deviceID.lowercased),
                         "ops": .integer(Int64(segment.ops.count)), "accepted": .integer(Int64(accepted)),
                         "duplicate": .integer(Int64(duplicate)), "rejected": .integer(Int64(rejected)),
                         "head": .integer(response.head), "ms": .real((seconds * 1e6).rounded() / 1e3)])
        if response.head > headBefore {
            wake(library.libraryID)
            maintenance.markChanged(library.libraryID)
        }
        if accepted > 0 { tellExtensions(accepted: response.results, of: segment.ops, library: library.libraryID) }
        return response
    }

    /// Reads a page of the log after `cursor`; with a wait and nothing new, parks
    /// until a push lands or the wait runs out, then answers (possibly empty).
    /// `completion` runs exactly once, on some thread.
    /// - Returns: for a parked request, a ticket that answers it early (with what is there now).
    @discardableResult
    public func pull(library id: UUID, after cursor: Int64, limit: Int?, waitMilliseconds: Int, token: String,
                     completion: @escaping @Sendable (Result<PullPage, ProtocolError>) -> Void) -> PullTicket? {
        let start = DispatchTime.now().uptimeNanoseconds
        let library: ServerLibrary
        let limit = limit ?? limits.pullOpsDefault
        do {
            (_, library) = try authorize(token, library: id)
            guard cursor >= 0 else { throw ProtocolError(400, .badCursor, "The cursor must be 0 or more; got \(cursor).") }
            guard limit >= 1, limit <= limits.pullOpsMax else {
                throw ProtocolError(400, .limitTooLarge, "A pull returns 1 to \(limits.pullOpsMax) ops (expected ≤ \(limits.pullOpsMax), actual \(limit)).")
            }
            guard waitMilliseconds >= 0, waitMilliseconds <= limits.waitMillisecondsMax else {
                throw ProtocolError(400, .waitTooLong, "A pull may wait 0 to \(limits.waitMillisecondsMax) ms (expected ≤ \(limits.waitMillisecondsMax), actual \(waitMilliseconds)).")
            }
            let head = try library.caughtUpHead()
            guard cursor <= head else {
                var ahead = ProtocolError(409, ProtocolError.Code.cursorAhead, "The cursor \(cursor) is past this library's last op \(head): the store was synced with another server or the server lost data (restored from a backup).")
                ahead.serverHead = head
                throw ahead
            }
        } catch let error as ProtocolError {
            completion(.failure(error))
            return nil
        } catch {
            completion(.failure(ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)))
            return nil
        }

        let answer: @Sendable () -> Void = { [self] in
            let result = Result { () throws(ProtocolError) -> PullPage in try page(library, after: cursor, limit: limit) }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if case .success(let page) = result { metrics.pulled(ops: page.segment.ops.count, seconds: seconds) }
            completion(result)
        }
        guard waitMilliseconds > 0 else { answer(); return nil }

        // Register, then re-check the head: a push that committed before the registration is
        // seen by the check, and one after it wakes the waiter, so no wake-up is lost. The check
        // runs outside the registry's lock: for a library ordered in PostgreSQL it asks there.
        let waiterID: Int = waiters.withLock { registry in
            let id = registry.nextID
            registry.nextID += 1
            registry.byLibrary[library.libraryID, default: [:]][id] = Waiter(after: cursor, fire: answer)
            return id
        }
        if library.head > cursor, waiters.withLock({ $0.byLibrary[library.libraryID]?.removeValue(forKey: waiterID) }) != nil {
            answer()   // taken back before any wake-up fired it
            return nil
        }
        metrics.waiting(1)
        let release: @Sendable () -> Void = { [self] in
            let expired = waiters.withLock { $0.byLibrary[library.libraryID]?.removeValue(forKey: waiterID) }
            if let expired {
                metrics.waiting(-1)
                metrics.longPollsEnded(1, byPush: false)
                expired.fire()
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(waitMilliseconds)) { [workers] in workers.async(release) }
        return PullTicket(release)
    }

    func wake(_ library: UUID) {
        let ready = waiters.withLock { registry -> [Waiter] in
            guard let parked = registry.byLibrary.removeValue(forKey: library) else { return [] }
            return Array(parked.values)
        }
        guard !ready.isEmpty else { return }
        metrics.waiting(-ready.count)
        metrics.longPollsEnded(ready.count, byPush: true)
        for waiter in ready { workers.async { waiter.fire() } }
    }

    /// Answers every parked pull (each with what its library holds now): another server may have
    /// written to any library unseen.
    func wakeAll() {
        let libraries = waiters.withLock { Array($0.byLibrary.keys) }
        for library in libraries { wake(library) }
    }

    func page(_ library: ServerLibrary, after cursor: Int64, limit: Int) throws(ProtocolError) -> PullPage {
        do {
            let (ops, head, encoded, afterOpID) = try library.pull(after: cursor, limit: limit, alignToSegments: true)
            let segment = try Segment(libraryID: library.libraryID, ops: ops)
            let next = ops.last?.serverSeq ?? cursor
            var page = PullPage(segment: segment, nextCursor: next, more: next < head, head: head, snapshotSeq: try library.latestSnapshotSeq(),
                                encoded: encoded)
            page.afterOpID = afterOpID
            page.incarnation = library.incarnation
            page.stateCarriedOverAt = library.stateCarriedOverAt
            return page
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(library.libraryID.lowercased)", library: library.libraryID, error)
        }
    }
}
