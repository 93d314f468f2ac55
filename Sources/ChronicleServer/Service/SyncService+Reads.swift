import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

// Verdicts, snapshots and start images: what a device reads besides the log.
extension SyncService {
    public func verdictNow(library id: UUID, entity: UUID, token: String) throws(ProtocolError) -> Verdict {
        let (_, library) = try authorize(token, library: id)
        do {
            return try library.verdict(entity)
        } catch let error as ProtocolError {
            throw error   // the shared store unreachable (503), say
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
    }

    /// The library's newest snapshot frame and its seq, as an array of its own (in-process callers).
    public func snapshotNow(library id: UUID, token: String) throws(ProtocolError) -> (seq: Int64, frame: [UInt8]) {
        let (seq, frame) = try sharedSnapshotNow(library: id, token: token)
        return (seq, frame.bytes)
    }

    /// The library's newest snapshot frame and its seq, shared by every response sending it at
    /// the same time: ten devices starting from a 55 MB snapshot at once hold one copy, not ten
    /// (plus libmicrohttpd's own copy of each). Read straight from its row into that copy.
    public func sharedSnapshotNow(library id: UUID, token: String) throws(ProtocolError) -> (seq: Int64, frame: SharedBytes) {
        let (_, library) = try authorize(token, library: id)
        do {
            // One lock for every library's frames: a read takes tens of milliseconds, and starts
            // from a snapshot are rare next to pulls and pushes.
            return try snapshotFrames.withLock { frames in
                let newest = try library.latestSnapshotSeq()
                if let newest, let cached = frames[id], cached.seq == newest, let frame = cached.frame {
                    return (newest, frame)
                }
                guard let found = try library.latestSnapshot(into: { count in
                    let frame = SharedBytes(count: count)
                    return (frame, frame.unsafeStorage)
                }) else {
                    throw ProtocolError(404, .noSnapshot, "Library \(id.lowercased) has no snapshot yet; pull from seq 0.")
                }
                frames = frames.filter { $0.value.frame != nil }   // entries whose frame is gone
                frames[id] = SharedSnapshotFrame(seq: found.seq, frame: found.storage)
                return (found.seq, found.storage)
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
    }

    /// The library's start image (`StartImageInfo`), mapped from its file, if there is one of
    /// its newest snapshot made for this store format and schema; else `404 no_start_image`
    /// (the device starts from the snapshot instead).
    public func startImageNow(library id: UUID, token: String, storeFormat: Int64, schemaFingerprint: String) throws(ProtocolError)
        -> (info: StartImageInfo, bytes: SharedBytes) {
        let (_, library) = try authorize(token, library: id)
        let now = DispatchTime.now().uptimeNanoseconds
        // A mapping unused for a minute goes (it holds the file's blocks even once the file is replaced or deleted).
        let cached = startImages.withLock { images in
            images = images.filter { now - $1.checked < 60_000_000_000 }
            return images[id]
        }
        if let cached, now - cached.checked < 1_000_000_000,
           cached.info.storeFormat == storeFormat, cached.info.schemaFingerprint == schemaFingerprint {
            return (cached.info, cached.bytes)
        }
        let found: StartImageInfo?
        do {
            found = try library.currentStartImage()
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
        guard let info = found else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased) has no start image of its newest snapshot; start from the snapshot.")
        }
        guard info.storeFormat == storeFormat, info.schemaFingerprint == schemaFingerprint else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased)'s start image is of store format v\(info.storeFormat) and \(info.schemaName) v\(info.schemaVersion), not the device's; start from the snapshot.")
        }
        // Replaced by a rename while mapped, the old file's pages stay readable until the answer is sent.
        if let cached, cached.info == info {
            startImages.withLock { $0[id] = (info, cached.bytes, now) }
            return (info, cached.bytes)
        }
        guard let bytes = SharedBytes(mapping: library.startImagePath), bytes.count == Int(info.imageBytes) else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased)'s start image is being replaced; start from the snapshot.")
        }
        startImages.withLock { $0[id] = (info, bytes, now) }
        return (info, bytes)
    }


    /// Sets a library's plan tier with a server-authored op and wakes its parked pulls.
    @discardableResult
    public func setPlan(library id: UUID, plan: String) throws -> Op {
        let op = try library(id).setPlan(plan)
        log.log("plan", ["library": .text(id.lowercased), "plan": .text(plan), "seq": .integer(op.serverSeq ?? 0)])
        wake(id)
        maintenance.markChanged(id)
        return op
    }
}
