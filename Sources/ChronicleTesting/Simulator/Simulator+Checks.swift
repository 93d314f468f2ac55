import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation

extension Simulator {
    /// The server's invariants, after every step: the log's new ops, the answers given
    /// since the last check, the projection against the rule model; now and then the
    /// whole log against what was seen before.
    func checkServer(recheckWholeLog: Bool) throws {
        let library = try server.service.library(libraryID)
        let fresh: [Op]
        do {
            fresh = try library.pull(after: invariants.head, limit: Int(Int32.max)).ops
        } catch let error as ProtocolError where error.code == .cursorTooOld {
            throw Violation("history is dropped only where every op was seen", "the log now starts past seq \(invariants.head): \(error.message)")
        }
        try invariants.absorb(fresh)
        if library.head != invariants.head {
            throw Violation("serverSeq gap-free (1…head)", "the head is \(library.head) but the log holds \(invariants.head) ops")
        }
        try invariants.check(log.drainAnswers())
        try invariants.checkProjection(serverReader!)
        if recheckWholeLog { try invariants.recheck(library.allOps(), head: library.head) }
    }

    /// The device that acted: `verify()` passes (integrity_check, FTS5 integrity-check, log
    /// invariants, digest equals a replay); its outbox is its own ops in deviceSeq order;
    /// none of its ops vanished.
    func checkDevice(_ device: SimulatedDevice) throws {
        let store = device.store
        let report = try store.verify()
        let pending = try store.pendingOps()
        // The device's state goes into the trace, so equal trace hashes mean equal states, step by step.
        log.record("\(device.name) state \(report.digest.prefix(12)), queued \(pending.map { "#\($0.deviceSeq)" }.joined(separator: " "))")
        try takeBackOpsThatCameBack(device, pending: pending)
        let failed = report.checks.filter { !$0.passed }
        if !failed.isEmpty {
            throw Violation("verify() passes on the device that acted",
                            "\(device.name): " + failed.map { "\($0.name): \(sanitize($0.detail))" }.joined(separator: "; "))
        }
        for (earlier, later) in zip(pending, pending.dropFirst()) where later.deviceSeq <= earlier.deviceSeq {
            throw Violation("the outbox is in deviceSeq order", "\(device.name): #\(later.deviceSeq) follows #\(earlier.deviceSeq)")
        }
        for op in pending where device.written[op.opID] == nil {
            throw Violation("the outbox holds only ops the device wrote", "\(device.name) has op \(op.opID.lowercased) #\(op.deviceSeq) queued")
        }
        try checkNothingVanished(device, pending: pending)
        try checkOutboxHolesAreSettled(device, pending: pending)
    }

    /// Ops the device had given up as gone (`SimulatedDevice.givenUp`) that a copy brought back:
    /// queued here again (a rewind found them in the log after a pull), or in the server's log as
    /// this device's (a push request still on the network reached the server late). They are
    /// expected again.
    func takeBackOpsThatCameBack(_ device: SimulatedDevice, pending: [Op]) throws {
        guard !device.givenUp.isEmpty else { return }
        let back = device.givenUp.keys.filter { id in
            pending.contains { $0.opID == id } || invariants.logged(id)?.device == device.deviceID
        }.sorted { (device.givenUp[$0]!.op.deviceSeq, $0.lowercased) < (device.givenUp[$1]!.op.deviceSeq, $1.lowercased) }
        guard !back.isEmpty else { return }
        opsLostWithServer -= device.takeBack(back)
        log.record("\(device.name): \(back.count) of its ops given up as gone came back (a late request, or a backup)")
    }

    /// The outbox's holes, checked from outside the store (`verify()` checks them from inside,
    /// and since a start from a snapshot only their order): every deviceSeq missing from it,
    /// between its oldest op and the last one written, is in the server's log as this
    /// device's op or in the device's rejected list.
    func checkOutboxHolesAreSettled(_ device: SimulatedDevice, pending: [Op]) throws {
        let queued = Set(pending.map(\.opID))
        let rejected = Set(try device.store.notices(limit: Int(Int32.max)).map(\.op.opID))
        guard let first = pending.first?.deviceSeq else { return }
        for opID in device.writtenOrder {
            guard let op = device.written[opID], op.deviceSeq > first, !queued.contains(opID), !rejected.contains(opID) else { continue }
            if invariants.logged(opID)?.device != device.deviceID, try !heldAfterServerLostIt(opID, on: device) {
                throw Violation("the outbox only loses ops the server settled",
                                "\(device.name): #\(op.deviceSeq) is neither queued, in the server log, nor rejected")
            }
        }
    }

    /// Before a device's round, at a server restore and after the device compacts: its ops the
    /// server lost (restored from a backup) whose content the device itself no longer holds
    /// (dropped past its retention horizon, where only the id is left, or not yet pulled back
    /// after a start over from the server) can never be sent again. They are gone with the
    /// server's data and are no longer expected anywhere. (One the engine drops in a round is
    /// still caught: this runs before the round, not after it.)
    func forgetOpsLostForGood(_ device: SimulatedDevice) throws {
        guard !opsLostByServer.isEmpty else { return }
        let base = try device.store.historyBaseSeq()
        // An op whose content the device still holds, queued or as a refusal, can still be sent.
        let held = Set(try device.store.pendingOps().map(\.opID))
            .union(try device.store.notices(limit: Int(Int32.max)).map(\.op.opID))
        var gone: [UUID] = []
        var ownHeld: Set<UUID>?
        for id in device.writtenOrder where opsLostByServer.contains(id) && !held.contains(id) {
            guard let logged = invariants.logged(id) else {
                // Its content is gone from the device: dropped past its horizon (only the id is
                // left), or never pulled back since the device started over from the server (a
                // rewind to 0 keeps only what it still queues).
                let seq = try device.store.confirmedSeq(of: id)
                if seq.map({ $0 <= base }) ?? true { gone.append(id) }
                continue
            }
            // Another device's op took the id on the restored server (an op id clash the server
            // refused while it held this one): this device's op can reach it again only from a copy
            // of its own (a rewind queues it again, and it is refused as a clash). Without one, as
            // when it went into a snapshot the device started from, it is gone.
            guard logged.device != device.deviceID else { continue }
            if ownHeld == nil { ownHeld = Set(try device.store.confirmedOps().filter { $0.deviceID == device.deviceID }.map(\.opID)) }
            if ownHeld?.contains(id) == false { gone.append(id) }
        }
        guard !gone.isEmpty else { return }
        device.forget(gone)
        opsLostWithServer += gone.count
        log.record("\(device.name): \(gone.count) of its ops the server lost are no longer held here either (dropped past its horizon, or not pulled back since it started over); gone")
    }

    /// When the server was restored from a backup and lost `lost`: ops among them that a restore
    /// of their author's store had already taken from it (`SimulatedDevice.restoredAway`), and that
    /// it has not pulled back since, are gone from everywhere: the author has no copy to send again
    /// (another device that pulled one does not send another device's ops). They are no longer
    /// expected anywhere.
    func forgetOpsRestoredAway(from device: SimulatedDevice, lostByServer lost: Set<UUID>) throws {
        let candidates = device.writtenOrder.filter { lost.contains($0) && device.restoredAway.contains($0) }
        guard !candidates.isEmpty else { return }
        let queued = Set(try device.store.pendingOps().map(\.opID))
        let gone = try candidates.filter { try !queued.contains($0) && device.store.confirmedSeq(of: $0) == nil }
        guard !gone.isEmpty else { return }
        device.forget(gone)
        opsLostWithServer += gone.count
        log.record("\(device.name): \(gone.count) of its ops the server lost had gone with a restore of its store and were not pulled back; gone")
    }

    /// An op the server lost when it was restored from a backup, which the device still holds as
    /// confirmed (it has not pulled since): kept, during the safety phase only.
    func heldAfterServerLostIt(_ opID: UUID, on device: SimulatedDevice) throws -> Bool {
        guard excusingOpsLostByServer, opsLostByServer.contains(opID) else { return false }
        return try device.store.confirmedSeq(of: opID) != nil
    }

    /// Every op a device wrote is in the server log, still queued, or in its rejected list.
    /// (That is also what `verify()` checks of the outbox's gaps, from the device's side.)
    func checkNothingVanished(_ device: SimulatedDevice, pending: [Op]) throws {
        let queued = Set(pending.map(\.opID))
        let rejected = Set(try device.store.notices(limit: Int(Int32.max)).map(\.op.opID))
        for opID in device.writtenOrder {
            if invariants.logged(opID)?.device == device.deviceID || queued.contains(opID) || rejected.contains(opID) { continue }
            if try heldAfterServerLostIt(opID, on: device) { continue }
            let op = device.written[opID]!
            throw Violation("no op a device wrote ever vanishes",
                            "\(device.name) #\(op.deviceSeq) \(op.typeAndVersion) (op \(opID.lowercased)) is not in the server log, the outbox or the rejected list")
        }
    }
}
