import ChronicleCore
import ChronicleStore
import Foundation

extension SyncService {
    /// One pass over the libraries whose deletion the operator asked for (`Accounts+Deletions.swift`):
    /// each is closed and its files deleted, unless a request, a parked pull or a compaction still
    /// holds it; then its parked pulls are woken (they answer and let go) and it is tried again on
    /// the next pass. Until its file is gone the library is never opened again. Errors are logged,
    /// never thrown. Returns the libraries deleted.
    @discardableResult
    public func runLibraryDeletions() -> [UUID] {
        let pending: [UUID]
        let owned: Set<UUID>
        do {
            pending = try accounts.pendingLibraryDeletions()
            guard !pending.isEmpty else { return [] }
            owned = Set(try accounts.libraries().map(\.libraryID))
        } catch {
            return []   // the accounts file cannot be read: `/healthz` says so already
        }
        var deleted: [UUID] = []
        for id in pending {
            // Never asked for a library a user owns (both refuse it); a file made by hand could be.
            if owned.contains(id) {
                log.log("library_delete_refused", ["library": .text(id.lowercased), "error": .text("a user owns it")])
                continue
            }
            guard libraries.withLock({ $0.closeForDeletion(id) }) else {
                wake(id)   // parked pulls answer and let go of it; deleted on a later pass
                continue
            }
            snapshotFrames.withLock { _ = $0.removeValue(forKey: id) }
            startImages.withLock { _ = $0.removeValue(forKey: id) }
            do {
                let existed = try shared?.deleteLibrary(id) ?? Accounts.deleteLibraryFiles(dataDirectory: dataDirectory, library: id)
                try accounts.libraryDeleted(id)
                libraries.withLock { $0.deleted(id) }
                health.forget(library: id)
                deleted.append(id)
                log.log("library_deleted", ["library": .text(id.lowercased), "file": .text(Accounts.libraryPath(dataDirectory, id)),
                                            "existed": .bool(existed)])
            } catch {
                // Kept closed and asked for: the next pass tries again.
                log.log("library_delete_failed", ["library": .text(id.lowercased), "error": .text("\(error)")])
            }
        }
        return deleted
    }
}
