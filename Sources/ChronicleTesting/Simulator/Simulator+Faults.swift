import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation

/// The faults the simulator injects between actions (the network's are the transport's).
extension Simulator {
    /// Fills the device's disk (its file capped at the pages it has now) or frees it.
    func toggleDiskFull(_ device: SimulatedDevice) throws {
        if device.diskFullPages == nil {
            let pages = try device.store.pageCount()
            try device.store.limitFileSize(pages: pages)
            device.diskFullPages = pages
            log.fault(.diskFull, "\(device.name)'s disk is full")
        } else {
            try device.store.limitFileSize(pages: nil)
            device.diskFullPages = nil
            log.record("\(device.name)'s disk has room again")
        }
    }

    /// Backs the device's store up, or, when it has a backup, puts the backup in the store's place
    /// (`SimulatedDevice.restoreBackup`): its next pushes reuse deviceSeqs the server holds.
    func backupOrRestore(_ device: SimulatedDevice) throws {
        if device.backup == nil {
            try device.takeBackup()
            log.record("\(device.name)'s store is backed up (\(device.writtenOrder.count) ops written so far)")
            return
        }
        let (lost, back) = try device.restoreBackup { self.invariants.logged($0)?.device == device.deviceID }
        // Ops given up as lost with the server's data that the backup still holds can be sent again.
        opsLostWithServer -= back
        log.fault(.restoredFromBackup, "\(device.name)'s store is restored from its backup; \(lost) ops written since and never pushed are gone with the file"
                  + (back > 0 ? "; \(back) it had given up as lost with the server's data come back with it" : ""))
    }

    /// Breaks a page of the device's store and salvages it (`SimulatedDevice.damageAndSalvage`).
    func damageAndSalvage(_ device: SimulatedDevice) throws {
        let tables = ["chronicle_log_blocks", "chronicle_outbox", "chronicle_segments", schema.entities[0].table]
        let table = random.pick(tables)
        guard let (report, lost) = try device.damageAndSalvage(table, pick: { self.random.below($0) },
                                                                serverHolds: { self.invariants.logged($0)?.device == device.deviceID }) else {
            log.record("\(device.name)'s \(table) has no page to damage")
            return
        }
        // Its ops the server lost (restored from a backup) whose only copy was on the broken page
        // are gone from everywhere now (a readable copy past the kept history was queued again).
        try forgetOpsLostForGood(device)
        let unreadable = report.tables.flatMap(\.unreadable).reduce(0) { $0 + $1.count }
        log.fault(.storeDamaged, "\(device.name)'s store has a page of \(table) broken and is salvaged: \(unreadable) row ids unreadable, "
                  + "history kept through seq \(report.confirmedKept) of \(report.confirmedBefore), \(report.pendingKept) queued ops kept, "
                  + "\(lost) lost with the page, \(report.requeued) of its own queued again")
    }

    /// Backs the server's data directory up (`ServerBackup`, as `chronicle server backup` does),
    /// or, when it has a backup, puts the backup in its place and starts the server on it: the ops
    /// it ordered since are gone from it. The invariants go back to what they were at the backup;
    /// the lost ops are remembered, so that a device still holding them as confirmed is not taken
    /// for one that lost them, until the liveness phase, where every one must be back in the log.
    func backupOrRestoreServer() throws {
        guard let atBackup = serverBackup else {
            try server.takeBackup()
            serverBackup = invariants.copy()
            log.record("the server's data directory is backed up at head \(invariants.head)")
            return
        }
        let lost = invariants.log.dropFirst(Int(atBackup.head)).map(\.opID)
        serverReader = nil
        try server.restoreBackup()
        let head = try serverLostHistory(lost, invariantsNow: atBackup,
                                         "a server restored from a backup holds what it held then", "at the backup it was")
        log.fault(.serverRestoredFromBackup, "the server is restored from its backup at head \(head): the \(lost.count) ops it ordered since are gone from it")
        // A device that signed in after the backup (`FaultPlan.newDeviceRate`) is unknown to the restored
        // server, which refuses its token: its person signs in again, as the app asks.
        for device in devices where (try? server.service.accounts.authenticate(device.transport.token)) == nil {
            let token = try server.service.accounts.registerDevice(user: "sim", password: Self.password, deviceID: device.deviceID).token
            device.transport.setToken(token)
            log.record("\(device.name) signs in again: the restored server does not know it")
        }
    }

    /// Breaks a page of the server's library file and salvages it with the server stopped
    /// (`SimulatedServer.damageAndSalvage`): its history past the first unreadable op is gone from
    /// it, as after a restore from a backup taken at that point, and the invariants go back to
    /// that point. The lost ops are remembered as for a restore: every one a device still holds
    /// must be back in the log by the end.
    func damageLibrary() throws {
        let tables = ["chronicle_log", "chronicle_log", "chronicle_segments", "chronicle_rejected_ops", "chronicle_devices"]
        let table = random.pick(tables)
        serverReader = nil
        let report = try server.damageAndSalvage(library: libraryID, table: table, pick: { self.random.below($0) })
        let lost = invariants.log.dropFirst(Int(report.headKept)).map(\.opID)
        _ = try serverLostHistory(lost, invariantsNow: try invariants.truncated(to: report.headKept),
                                  "a salvaged library holds its history up to the first unreadable op", "salvage kept")
        let unreadable = report.tables.flatMap(\.unreadable).reduce(0) { $0 + $1.count }
        log.fault(.libraryDamaged, "the server's library has a page of \(table) broken and is salvaged: \(unreadable) row ids unreadable, "
                  + "history kept through seq \(report.headKept) of \(report.headBefore), \(report.refusalsDropped) refusals dropped, "
                  + "\(lost.count) ops gone from it")
    }

    /// The server (started again) no longer holds the ops `lost`: the invariants become
    /// `invariantsNow` (what they were when its log ended where it ends now), a backup taken
    /// before is gone, and the lost ops are remembered, so that a device still holding them as
    /// confirmed is not taken for one that lost them. Returns the server's head, checked against
    /// the invariants' (`invariant`; `was` names where that head came from).
    func serverLostHistory(_ lost: [UUID], invariantsNow: ServerInvariants, _ invariant: String, _ was: String) throws -> Int64 {
        serverBackup = nil
        invariants = invariantsNow
        opsLostByServer.formUnion(lost)
        for device in devices { try forgetOpsRestoredAway(from: device, lostByServer: Set(lost)) }
        // Lost ops whose content their author no longer holds are gone at once, before the author's
        // next round: a check after its next write must not expect them (seed 114 of 2,000 steps).
        for device in devices { try forgetOpsLostForGood(device) }
        try openServerReader()
        let head = try server.service.library(libraryID).head
        if head != invariants.head {
            throw Violation(invariant, "its head is \(head); \(was) \(invariants.head)")
        }
        return head
    }

    /// Moves the device's clock (or, one time in ten, the server's) by seconds to years, either way.
    func jumpClock(_ device: SimulatedDevice) {
        let magnitude: Int64 = switch random.below(4) {
        case 0: random.between64(1, 60_000)
        case 1: random.between64(60_000, 3_600_000)
        case 2: random.between64(3_600_000, 30 * 86_400_000)
        default: random.between64(30 * 86_400_000, 3 * 365 * 86_400_000)
        }
        let delta = random.chance(0.5) ? -magnitude : magnitude
        if random.chance(0.1) {
            server.clock.jump(byMilliseconds: delta)
            log.fault(.clockJump, "the server's clock jumps \(delta / 1000) s")
        } else {
            device.clock.jump(byMilliseconds: delta)
            log.fault(.clockJump, "\(device.name)'s clock jumps \(delta / 1000) s")
        }
    }

    /// Two devices create the same entity id before either syncs: the second create to reach
    /// the server is refused (`entity_exists`).
    func clashEntityID(_ first: SimulatedDevice) throws {
        let others = devices.filter { $0 !== first }
        guard let second = others.isEmpty ? nil : random.pick(others) else { return }
        let creates = workload(for: first).plainCreates
        guard !creates.isEmpty else { return }
        let spec = random.pick(creates)
        let id = random.uuid()
        log.fault(.entityIDClash, "\(first.name) and \(second.name) both create \(spec.entity) \(id.lowercased.prefix(8))")
        for device in [first, second] {
            defer { device.ids.clearForced() }
            // The create of that entity type in the app version the device runs.
            let work = workload(for: device)
            guard let own = work.plainCreates.first(where: { $0.type == spec.type }) ?? work.plainCreates.first(where: { $0.entity == spec.entity }),
                  let planned = try work.plan(own, on: device.store) else { continue }
            device.ids.force([id])
            if let op = try write(planned, on: device), op.entityID != id {
                throw Violation("a create takes the id its generator gives", "\(device.name) created \(op.entityID.lowercased), not \(id.lowercased)")
            }
        }
    }

    /// A device writes a create whose op id another device already used for an op the server holds:
    /// refused (`op_id_conflict`), and its follow-up edit of that entity after it (`unknown_entity`).
    func clashOpID(_ device: SimulatedDevice) throws {
        // An op another device wrote that the server holds but this device has not pulled yet, or
        // that is still queued on its device (this device's store would refuse an op id it already
        // holds in its log, so that clash could never reach the server); never the same one twice
        // on one device (a device whose id source repeats itself is broken beyond what
        // op_id_conflict is there for). Whichever reaches the server second is refused.
        let cursor = try device.store.cursor()
        var candidates: [(owner: SimulatedDevice, opID: UUID)] = []
        for owner in devices where owner !== device {
            let queued = Set(try owner.store.pendingOps().map(\.opID))
            // (Not one this device's store holds confirmed at another seq, which a server restored
            // from a backup and given the op again at a later seq can make look unpulled.)
            for id in owner.writtenOrder where device.written[id] == nil {
                if try device.store.confirmedSeq(of: id) != nil { continue }
                if let logged = invariants.logged(id) {
                    if logged.device == owner.deviceID, logged.seq > cursor { candidates.append((owner, id)) }
                } else if queued.contains(id) {
                    candidates.append((owner, id))
                }
            }
        }
        let work = workload(for: device)
        let creates = work.plainCreates
        guard !candidates.isEmpty, !creates.isEmpty else {
            log.record("\(device.name) finds no op id to clash with (\(candidates.count) candidates)")
            return
        }
        let (owner, opID) = random.pick(candidates)
        let spec = random.pick(creates)
        guard let planned = try work.plan(spec, on: device.store) else { return }
        log.fault(.opIDClash, "\(device.name) reuses \(owner.name)'s op id \(opID.lowercased.prefix(8)) for a \(spec.type)")
        defer { device.ids.clearForced() }
        device.ids.force([random.uuid(), opID])
        guard let op = try write(planned, on: device) else { return }
        if op.opID != opID {
            throw Violation("an op takes the id its generator gives", "\(device.name) wrote op \(op.opID.lowercased), not \(opID.lowercased)")
        }
        // An edit of the entity that will never exist on the server.
        let edits = work.deviceOps.filter { $0.entity == spec.entity && ($0.action == .set || $0.action == .add || $0.action == .delete) }
        if !edits.isEmpty, let follow = try work.plan(random.pick(edits), on: device.store, entityHint: op.entityID) {
            try write(follow, on: device)
        }
    }
}
