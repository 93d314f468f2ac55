/// Every kind of fault the simulator injects, as counted in a `SimulationReport`.
public enum FaultKind: String, CaseIterable, Sendable, Comparable, CustomStringConvertible {
    /// A request lost on the way: it never reaches the server.
    case requestDropped
    /// The server did the work (a push committed) but its answer was lost: the device sees a timeout.
    case responseDropped
    /// A push delivered twice (a retransmission the network duplicated).
    case duplicated
    /// An old push retransmitted later, after newer ones went through.
    case reordered
    /// A device cut off from the network for a long stretch.
    case offline
    /// A device process killed and restarted: its objects dropped, its store reopened from the file.
    case deviceCrash
    /// A device killed right after the server committed its push, before it recorded the answer.
    case crashAfterCommit
    /// The server process restarted over the same data directory.
    case serverRestart
    /// Two devices creating the same entity id: the second create is refused (`entity_exists`).
    case entityIDClash
    /// A device reusing another device's op id: refused (`op_id_conflict`), and what it wrote on the
    /// entity it created is refused after it (`unknown_entity`).
    case opIDClash
    /// A device's disk fills up: writes fail with `disk_full` and nothing is corrupted; lifted later.
    case diskFull
    /// A device clock jumping backwards or forwards.
    case clockJump
    /// A device's store replaced by a backup of it taken earlier (a phone restored from its last
    /// backup) while the server kept what it had synced since: what it wrote after the backup and
    /// never pushed is gone with the file; its new ops reuse deviceSeqs the server already holds
    /// and are numbered again after the server's (`device_seq_reused`).
    case restoredFromBackup
    /// The server's data directory replaced by a backup of it taken earlier (`ServerBackup`): the
    /// ops it ordered since are gone from it, while devices that synced them still hold them. Each
    /// such device finds out on its next pull (`cursor_ahead`, or another op at its cursor), goes
    /// back to where the two agree and pushes its own lost ops again.
    case serverRestoredFromBackup
    /// A device running the app's previous version (the schema's previous version) updated
    /// mid-run: until then it writes ops of that version and sets aside what it cannot read;
    /// updated, it opens its store with the current schema, migrating it (from a snapshot of the
    /// old shape where its history begins at one).
    case appUpdated
    /// A page of a device's store broken (a leaf of its log, outbox, sealed segments or an entity
    /// table, overwritten as a failing disk leaves it) and the store salvaged (`DeviceStore.salvage`):
    /// queued ops on the page are lost unless the server already holds them, confirmed history
    /// past it is pulled again.
    case storeDamaged
    /// A page of the server's library file broken (a leaf of its log, sealed segments, refusals or
    /// devices' numbers) and the library salvaged with the server stopped (`ServerLibrary.salvage`):
    /// its history past the first unreadable op is gone from it, as after a restore from a backup
    /// taken then, and the devices that hold those ops push their own again.
    case libraryDamaged
    /// A new device signed in mid-run: its store has never held anything, so it starts from the
    /// server's start image where the server built one after compacting (else from the snapshot
    /// or the whole log). With the crash rate it is killed while taking the image, after a step
    /// the seed picks: opened again, its store is the empty one or the whole image, never between.
    case newDevice

    public var description: String { rawValue }

    public static func < (lhs: FaultKind, rhs: FaultKind) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
