import ChronicleCore
import ChronicleStore
import ChronicleSync
import Foundation

/// One device in a simulation: its store file, clock, id source and network,
/// and — while its process is up — the `DeviceStore` and `SyncEngine` objects.
/// A crash drops those objects and reopens the store from its file: committed
/// work is kept, anything in flight is lost.
final class SimulatedDevice {
    let index: Int
    let name: String
    let deviceID: UUID
    let path: String
    let clock: SimulatedClock
    let ids: SimulatedIDGenerator
    let transport: SimulatedTransport
    let configuration: SyncEngine.Configuration
    private var process: (store: DeviceStore, engine: SyncEngine)?
    /// The schema of the app version this device runs: the run's, or its previous version until
    /// the app is updated (`updateApp`). The store is opened with it after a crash or a restore.
    private(set) var schema: Schema

    var store: DeviceStore {
        guard let process else { preconditionFailure("\(name) is between a crash and its restart") }
        return process.store
    }

    var engine: SyncEngine {
        guard let process else { preconditionFailure("\(name) is between a crash and its restart") }
        return process.engine
    }

    /// Offline until this step (inclusive), if offline.
    var offlineUntilStep: Int?
    /// The file-size cap standing for a full disk, if the disk is full.
    var diskFullPages: Int?
    /// Every op this device's store accepted, by op id, and in the order written.
    private(set) var written: [UUID: Op] = [:]
    private(set) var writtenOrder: [UUID] = []

    init(index: Int, name: String, store: DeviceStore, clock: SimulatedClock, ids: SimulatedIDGenerator,
         transport: SimulatedTransport, configuration: SyncEngine.Configuration) {
        self.index = index
        self.name = name
        self.deviceID = store.deviceID
        self.path = store.path
        self.clock = clock
        self.ids = ids
        self.transport = transport
        self.configuration = configuration
        self.schema = store.schema
        self.process = (store, Self.makeEngine(store, transport, configuration))
    }

    /// The app is updated to a version with `newer`: the process ends, and the store is opened
    /// with the new schema (which migrates it); a full disk stays full.
    func updateApp(to newer: Schema) throws {
        schema = newer
        try crashAndRestart()
    }

    static func makeEngine(_ store: DeviceStore, _ transport: SimulatedTransport, _ configuration: SyncEngine.Configuration) -> SyncEngine {
        // One push in flight at a time: the simulation is deterministic because the engine makes
        // one call at a time (`SimulatedTransport`). A fixed jitter: rounds never sleep in the
        // simulator anyway (no retries within a round).
        var configuration = configuration
        configuration.pushRequestsInFlightMax = 1
        return SyncEngine(store: store, transport: transport, configuration: configuration, random: { 0.5 })
    }

    func remember(_ op: Op) {
        if written.updateValue(op, forKey: op.opID) == nil { writtenOrder.append(op.opID) }
    }

    /// Ops no longer expected anywhere (lost with the server's data, their content already gone here).
    func forget(_ ids: [UUID]) {
        for id in ids {
            if let op = written.removeValue(forKey: id) { givenUp[id] = (op, true) }
        }
        writtenOrder.removeAll { written[$0] == nil }
    }

    /// Ops this device wrote that were given up as gone (`forget`, or with the file in
    /// `restoreBackup`), and whether they were counted as lost with the server's data. A copy can
    /// still bring one back: a push request still on the network that reaches the server late
    /// (`SimulatedTransport`'s replays), or a backup of the store taken while it was queued.
    private(set) var givenUp: [UUID: (op: Op, withServer: Bool)] = [:]

    /// Ops of `givenUp` that came back (queued again here, or in the server's log as this
    /// device's): expected again. Returns how many were counted as lost with the server's data.
    func takeBack(_ ids: [UUID]) -> Int {
        var withServer = 0
        for id in ids {
            guard let (op, counted) = givenUp.removeValue(forKey: id) else { continue }
            if counted { withServer += 1 }
            if written.updateValue(op, forKey: id) == nil { writtenOrder.append(id) }
        }
        return withServer
    }

    /// Ops this device wrote that a restore of its store took from it while the server held them
    /// (they come back with a pull). Should the server lose one before this device pulls it
    /// back, no copy is left to send again (`Simulator.forgetOpsRestoredAway`).
    private(set) var restoredAway = Set<UUID>()

    /// Ops of `restoredAway` that a pull brought back.
    func heldAgain(_ ids: [UUID]) { restoredAway.subtract(ids) }

    /// A copy of the store taken by `takeBackup`, and the ops written by then that it holds, in order.
    private(set) var backup: (path: String, written: [Op])?

    /// Copies the store aside (`VACUUM INTO`), as a phone's backup does. The copy holds every op
    /// written by then except those an earlier restore took from the file and no pull has
    /// brought back yet (`restoredAway`): should the server lose one of those, a restore of this
    /// copy does not bring it back either.
    func takeBackup() throws {
        let copy = path + ".backup"
        try? FileManager.default.removeItem(atPath: copy)
        try Database(path: path).execute("VACUUM INTO '\(copy)'")
        backup = (copy, writtenOrder.filter { !restoredAway.contains($0) }.compactMap { written[$0] })
    }

    /// Kills the process, puts the backup in the store's place and starts again from it: what
    /// was written after the backup is gone with the file, except what the server holds
    /// (`serverHolds`), which comes back with a pull. Ops the backup holds that were given up
    /// since (`forget`: the server lost them and this store had dropped them) come back with
    /// the file, and are expected again. A full disk is lifted (the restore freed it).
    func restoreBackup(serverHolds: (UUID) -> Bool) throws -> (lost: Int, back: Int) {
        guard let backup else { return (0, 0) }
        process = nil
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.moveItem(atPath: backup.path, toPath: path)
        self.backup = nil
        diskFullPages = nil
        let reopened = try DeviceStore.open(at: path, schema: schema, clock: clock, ids: ids)
        try reopened.performUpkeep()
        process = (reopened, Self.makeEngine(reopened, transport, configuration))
        let inBackup = Set(backup.written.map(\.opID))
        let lost = writtenOrder.filter { !inBackup.contains($0) && !serverHolds($0) }
        restoredAway.formUnion(writtenOrder.filter { !inBackup.contains($0) && serverHolds($0) })
        let back = backup.written.filter { written[$0.opID] == nil }
        for op in back { givenUp[op.opID] = nil }
        for id in lost { givenUp[id] = written.removeValue(forKey: id).map { ($0, false) } }
        // In the order written: the backup's ops first, then those written after it that are left.
        let after = writtenOrder.filter { !inBackup.contains($0) && written[$0] != nil }
        for op in back { written[op.opID] = op }
        writtenOrder = backup.written.map(\.opID).filter { written[$0] != nil } + after
        return (lost.count, back.count)
    }

    /// Kills the process, breaks a leaf page of `table` in the store's file (the `pick`-th in key
    /// order, so that the same seed breaks the same rows whatever page numbers SQLite gave them)
    /// and salvages the store (`DeviceStore.salvage`), then starts again from the salvaged store.
    /// Queued ops on the page are gone, except what the server holds (`serverHolds`), which comes
    /// back with a pull. A full disk is lifted (the salvage wrote a new file). Nil if the table
    /// has no page (the store is reopened as it was).
    func damageAndSalvage(_ table: String, pick: (Int) -> Int, serverHolds: (UUID) -> Bool) throws -> (SalvageReport, lost: Int)? {
        let queued = try store.pendingOps()
        // Nothing of the store may be left open: its WAL is merged into the file first, or the
        // page broken in the file could be read from the WAL instead.
        _ = store.waitForPhraseIndexing()
        process = nil
        let leaves: [Int64]
        do {
            let db = try Database(path: path, options: { var o = Database.Options(); o.create = false; return o }())
            let busy = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) }.first ?? 1
            guard busy == 0 else { throw Violation("a closed store's WAL merges into its file", "\(name)'s store is still open elsewhere") }
            leaves = try db.query("SELECT pageno FROM dbstat WHERE name = ?1 AND pagetype = 'leaf' ORDER BY path", [.text(table)]) { $0.int(0) }
        }
        guard !leaves.isEmpty else {
            try crashAndRestart()
            return nil
        }
        let page = leaves[pick(leaves.count)]
        let pageSize = try Database(path: path, options: { var o = Database.Options(); o.readOnly = true; return o }()).scalarInt("PRAGMA page_size") ?? 4096
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((page - 1) * pageSize))
        handle.write(Data(repeating: 0xEE, count: 16))
        try handle.close()

        let report = try DeviceStore.salvage(at: path, schema: schema, clock: clock)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: report.damagedPath + suffix) }
        diskFullPages = nil
        let reopened = try DeviceStore.open(at: path, schema: schema, clock: clock, ids: ids)
        try reopened.performUpkeep()
        process = (reopened, Self.makeEngine(reopened, transport, configuration))
        let lostSeqs = report.pendingLost
        let gone = queued.filter { op in lostSeqs.contains { $0.contains(op.deviceSeq) } }.map(\.opID)
        let lost = gone.filter { !serverHolds($0) }
        restoredAway.formUnion(gone.filter { serverHolds($0) })
        for id in lost { givenUp[id] = written.removeValue(forKey: id).map { ($0, false) } }
        writtenOrder = writtenOrder.filter { written[$0] != nil }
        return (report, lost.count)
    }

    /// Kills the process and starts it again: the store is reopened from its file with the
    /// same clock and id source; a full disk stays full.
    func crashAndRestart() throws {
        // Every object the process held is gone before the file is opened again.
        process = nil
        let reopened = try DeviceStore.open(at: path, schema: schema, clock: clock, ids: ids)
        try reopened.performUpkeep()
        if let pages = diskFullPages { try reopened.limitFileSize(pages: pages) }
        process = (reopened, Self.makeEngine(reopened, transport, configuration))
    }

    /// One sync round.
    func sync() async -> SyncReport { await engine.syncOnce() }

    var isOffline: Bool { offlineUntilStep != nil }
}
