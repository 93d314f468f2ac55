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
        let fresh = try library.pull(after: invariants.head, limit: Int(Int32.max)).ops
        try invariants.absorb(fresh)
        if library.head != invariants.head {
            throw Violation("serverSeq gap-free (1…head)", "the head is \(library.head) but the log holds \(invariants.head) ops")
        }
        try invariants.check(log.drainAnswers())
        try invariants.checkProjection(serverReader!)
        if recheckWholeLog { try invariants.recheck(library.allOps()) }
    }

    /// The device that acted: `verify()` passes (integrity_check, FTS5 integrity-check, log
    /// invariants, digest equals a replay); its outbox is its own ops in deviceSeq order;
    /// none of its ops vanished.
    func checkDevice(_ device: SimulatedDevice) throws {
        let store = device.store
        let report = try store.verify()
        let pending = try store.pendingOps()
        var failed = report.checks.filter { !$0.passed }
        if tolerated.contains(.verifyFlagsOutboxGapAfterRejection),
           let index = failed.firstIndex(where: { $0.name == "log invariants" && $0.detail == "outbox device_seq has gaps" }) {
            try checkOutboxGapsAreSettled(device, pending: pending)
            failed.remove(at: index)
            knownBugsSeen[.verifyFlagsOutboxGapAfterRejection, default: 0] += 1
        }
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
    }

    /// What `verify()` should check of the outbox instead of contiguity: it only loses ops the
    /// server settled, so every deviceSeq missing between its first op and the last one written
    /// is in the confirmed log or in the rejected list.
    func checkOutboxGapsAreSettled(_ device: SimulatedDevice, pending: [Op]) throws {
        guard let first = pending.first?.deviceSeq else { return }
        let last = try device.store.status().lastDeviceSeq
        let queued = Set(pending.map(\.deviceSeq))
        let rejected = Set(try device.store.notices(limit: Int(Int32.max)).map(\.op.deviceSeq))
        let confirmed = Set(try device.store.confirmedOps().filter { $0.deviceID == device.deviceID }.map(\.deviceSeq))
        for seq in first...max(first, last) where !queued.contains(seq) && !rejected.contains(seq) && !confirmed.contains(seq) {
            throw Violation("the outbox only loses ops the server settled", "\(device.name): #\(seq) is neither queued, confirmed nor rejected")
        }
    }

    /// Every op a device wrote is in the server log, still queued, or in its rejected list.
    func checkNothingVanished(_ device: SimulatedDevice, pending: [Op]) throws {
        let queued = Set(pending.map(\.opID))
        let rejected = Set(try device.store.notices(limit: Int(Int32.max)).map(\.op.opID))
        for opID in device.writtenOrder {
            if invariants.logged(opID)?.device == device.deviceID || queued.contains(opID) || rejected.contains(opID) { continue }
            let op = device.written[opID]!
            throw Violation("no op a device wrote ever vanishes",
                            "\(device.name) #\(op.deviceSeq) \(op.typeAndVersion) (op \(opID.lowercased)) is not in the server log, the outbox or the rejected list")
        }
    }
}
