import ChronicleCore
import ChronicleServerStore
import ChronicleStore
import Dispatch
import Foundation

/// The libraries a service holds open, least recently used first out: a server with many users
/// keeps a bounded number of SQLite connections, file descriptors and page caches, however many
/// libraries it has served since it started.
struct OpenLibraries {
    private struct Entry {
        var library: ServerLibrary
        var lastUsed: UInt64
    }

    private var byID: [UUID: Entry] = [:]
    private var uses: UInt64 = 0
    /// Libraries opened so far, again after a close included.
    private(set) var opened: UInt64 = 0

    var count: Int { byID.count }

    /// The open library, marked as just used; nil when it is not open.
    mutating func use(_ id: UUID) -> ServerLibrary? {
        guard byID[id] != nil else { return nil }
        uses &+= 1
        byID[id]!.lastUsed = uses
        return byID[id]!.library
    }

    /// Libraries being deleted (`SyncService.runLibraryDeletions`): never opened again meanwhile.
    var deleting: Set<UUID> = []
    /// Deletions finished so far: an open that read the library's owner before one finished reads it again.
    private(set) var deletions: UInt64 = 0

    /// Marks `id` as being deleted and closes it if nothing else holds it; true when it is not open.
    mutating func closeForDeletion(_ id: UUID) -> Bool {
        deleting.insert(id)
        return closeUnused(id)
    }

    /// Closes `id` if nothing else holds it; true when it is not open (any more).
    mutating func closeUnused(_ id: UUID) -> Bool {
        guard byID[id] != nil else { return true }
        guard isKnownUniquelyReferenced(&byID[id]!.library) else { return false }
        byID[id] = nil
        return true
    }

    /// `id`'s file is gone: it may be made again (given to a user again, by `add-user --library`).
    mutating func deleted(_ id: UUID) {
        deleting.remove(id)
        deletions &+= 1
    }

    /// Keeps `library` open, then closes the least recently used ones past `max` that nothing
    /// else holds: a library a request, a parked pull or a compaction still uses stays open (it
    /// is never open twice), and the count stays over `max` until it is let go.
    mutating func add(_ library: ServerLibrary, max: Int) {
        uses &+= 1
        opened &+= 1
        byID[library.libraryID] = Entry(library: library, lastUsed: uses)
        guard byID.count > max else { return }
        for id in byID.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }).map(\.key) where byID.count > max {
            guard id != library.libraryID else { continue }
            // Only this table holds it: no request can reach it but through here, under its lock.
            if isKnownUniquelyReferenced(&byID[id]!.library) { byID[id] = nil }
        }
    }
}
