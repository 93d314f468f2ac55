import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

extension Simulator {
    /// What one safety-phase step does.
    enum Action {
        case write, sync, search, serverOp, resolveConflict, compactServer, compactDevice
        case restartServer, crash, goOffline, comeOnline, toggleDiskFull, jumpClock, clashEntityID, clashOpID, backupOrRestore, backupOrRestoreServer
        case damageAndSalvage, damageLibrary, file, newDevice
    }

    /// One safety-phase step: time passes, a device acts (or a fault strikes), invariants are checked.
    func step(_ step: Int) async throws {
        begin("step \(step)")
        time.advance(milliseconds: random.chance(0.05) ? random.between64(3_600_000, 10 * 86_400_000) : random.between64(1, 300_000))
        for device in devices {
            if let until = device.offlineUntilStep, until < step {
                device.offlineUntilStep = nil
                device.transport.setOffline(false)
                log.record("\(device.name) back online")
            }
        }
        // Only where the plan has app updates, so that the seeds without them draw as they always did.
        if plan.appUpdateRate > 0, serverOnOldApp || !devicesOnAnOldApp.isEmpty, random.chance(plan.appUpdateRate) {
            if serverOnOldApp {
                try updateServer()
            } else if let old = devicesOnAnOldApp.first {
                try updateApp(old)
                try checkDevice(old)
            }
        }
        let device = random.pick(devices)
        let action = chooseAction(for: device)
        var acting: SimulatedDevice? = device
        switch action {
        case .write: try write(on: device, count: random.between(1...5))
        case .sync: try await sync(device)
        case .search: try search(on: device)
        case .serverOp: try serverOp(); acting = nil
        case .resolveConflict: try resolveConflict(on: device)
        case .compactServer: try compactServer(); acting = nil
        case .compactDevice: try compact(device)
        case .restartServer:
            log.fault(.serverRestart, "the server restarts")
            try server.restart()
            acting = nil
        case .crash:
            log.fault(.deviceCrash, "\(device.name) crashes between actions")
            try device.crashAndRestart()
        case .goOffline:
            let until = step + random.between(1...max(1, plan.offlineStepsMax))
            device.offlineUntilStep = until
            device.transport.setOffline(true)
            log.fault(.offline, "\(device.name) offline until step \(until)")
        case .comeOnline:
            device.offlineUntilStep = nil
            device.transport.setOffline(false)
            log.record("\(device.name) back online early")
        case .toggleDiskFull: try toggleDiskFull(device)
        case .jumpClock: jumpClock(device)
        case .clashEntityID: try clashEntityID(device)
        case .clashOpID: try clashOpID(device)
        case .backupOrRestore: try backupOrRestore(device)
        case .backupOrRestoreServer: try backupOrRestoreServer(); acting = nil
        case .damageAndSalvage: try damageAndSalvage(device)
        case .damageLibrary: try damageLibrary(); acting = nil
        case .file: try await addOrFetchFile(on: device)
        case .newDevice: try await joinNewDevice(); acting = nil
        }
        try checkServer(recheckWholeLog: step % 25 == 0)
        if let acting { try checkDevice(acting) }
    }

    /// Faults first, each with its own rate; otherwise ordinary work.
    func chooseAction(for device: SimulatedDevice) -> Action {
        if random.chance(plan.serverRestartRate) { return .restartServer }
        if random.chance(plan.crashRate) { return .crash }
        if random.chance(plan.offlineRate) { return device.isOffline ? .comeOnline : .goOffline }
        if random.chance(plan.diskFullRate) || (device.diskFullPages != nil && random.chance(0.1)) { return .toggleDiskFull }
        if random.chance(plan.clockJumpRate) { return .jumpClock }
        if random.chance(plan.entityIDClashRate) { return .clashEntityID }
        if random.chance(plan.opIDClashRate) { return .clashOpID }
        // Only where the plan has it, so that the seeds without it draw as they always did.
        if plan.restoreRate > 0, random.chance(plan.restoreRate) { return .backupOrRestore }
        if plan.serverRestoreRate > 0, random.chance(plan.serverRestoreRate) { return .backupOrRestoreServer }
        if plan.damageRate > 0, random.chance(plan.damageRate) { return .damageAndSalvage }
        if plan.libraryDamageRate > 0, random.chance(plan.libraryDamageRate) { return .damageLibrary }
        if plan.fileRate > 0, random.chance(plan.fileRate) { return .file }
        if plan.newDeviceRate > 0, devices.count < Self.devicesMax, random.chance(plan.newDeviceRate) { return .newDevice }
        let weights: [(Action, Double)] = [(.write, 45), (.sync, 40), (.search, 4), (.serverOp, 3), (.compactServer, 1.5), (.compactDevice, 1.5),
                                           (.resolveConflict, schema.entities.contains { $0.fields.contains { $0.rule == .mergeOrAsk } } ? 3 : 0)]
        return weights[random.weighted(weights.map(\.1))].0
    }

    // MARK: - Work

    /// Writes `count` random ops; each one must show at once, and a refused one must leave nothing behind.
    func write(on device: SimulatedDevice, count: Int) throws {
        for _ in 0..<count {
            guard let planned = try workload(for: device).plan(on: device.store) else { continue }
            try write(planned, on: device)
        }
    }

    /// One write, with its checks. Returns the op if the store took it.
    @discardableResult
    func write(_ planned: PlannedWrite, on device: SimulatedDevice) throws -> Op? {
        let store = device.store
        let lastSeq = try store.status().lastDeviceSeq
        do {
            let op = try store.write(planned.type, entity: planned.entity, payload: planned.payload)
            device.remember(op)
            opsWritten += 1
            log.record("\(device.name) wrote #\(op.deviceSeq) \(PlannedWrite(type: op.type, entity: op.entityID, payload: op.payload))")
            if op.deviceSeq != lastSeq + 1 {
                throw Violation("deviceSeq is gap-free per device", "\(device.name) wrote #\(op.deviceSeq) after #\(lastSeq)")
            }
            if let problem = try workload(for: device).ownWriteProblem(op, before: planned.before, on: store) {
                throw Violation("a device always reads its own writes", "\(device.name) #\(op.deviceSeq) \(op.typeAndVersion): \(problem)")
            }
            return op
        } catch let error as ChronicleError {
            writesRefused += 1
            log.record("\(device.name) refused \(planned): \(error.code)")
            if error.code == .diskFull && device.diskFullPages == nil {
                throw Violation("disk_full only when the disk is full", "\(device.name): \(error.message)")
            }
            if try store.status().lastDeviceSeq != lastSeq {
                throw Violation("a refused write leaves nothing behind", "\(device.name) refused \(planned.type) (\(error.code)) but its deviceSeq moved")
            }
            return nil
        }
    }

    /// One sync round; a crash decided by the network restarts the device afterwards.
    @discardableResult
    func sync(_ device: SimulatedDevice) async throws -> SyncReport {
        try forgetOpsLostForGood(device)
        let segmentsBefore = (try? device.store.segments().count) ?? 0
        let report = await device.sync()
        syncRounds += 1
        opsRenumbered += report.renumbered
        if report.rewound != nil { rewinds += 1 }
        if report.startedFromImage { startsFromImage += 1 }
        // A sync adds segments only by keeping bulk catch-up pages sealed (a snapshot start drops some).
        segmentsSealedOnArrival += max(0, ((try? device.store.segments().count) ?? 0) - segmentsBefore)
        guard await device.transport.settle() else {
            throw Violation("every call to the server returns", "\(device.name): a call made during its round was still running seconds after the round")
        }
        log.record("\(device.name) sync: \(describe(report))")
        try checkSyncState(device, after: report)
        // Ops a restore of the store took from it that a pull brought back are held again: from
        // here on the device must keep them, whatever the server loses.
        if !device.restoredAway.isEmpty {
            try device.heldAgain(device.restoredAway.filter { try device.store.confirmedSeq(of: $0) != nil })
        }
        if device.transport.takeCrashRequest() {
            log.record("\(device.name) restarts after its crash")
            try device.crashAndRestart()
        }
        return report
    }

    /// The store tells the truth about sync (its sync status): a round that
    /// reports `.synced` left nothing unanswered and the store caught up with the server; one
    /// that did not says why.
    func checkSyncState(_ device: SimulatedDevice, after report: SyncReport) throws {
        let state = try device.store.syncState()
        switch report.outcome {
        case .synced:
            let head = try server.service.library(libraryID).head
            if state.unacknowledged != 0 || state.lastError != nil || state.cursor != head {
                throw Violation("a synced round leaves the device caught up and nothing unanswered",
                                "\(device.name): \(state.unacknowledged) unanswered, cursor \(state.cursor) of \(head), last error \(state.lastError.map(sanitize) ?? "none")")
            }
        case .offline, .blocked:
            if state.lastError == nil || !state.isOffline {
                throw Violation("a failed round is stated as such", "\(device.name): the store records no error after \(describe(report))")
            }
        }
    }

    func describe(_ report: SyncReport) -> String {
        let outcome = switch report.outcome {
        case .synced: "synced"
        case .offline(let reason): "offline (\(sanitize(reason)))"
        case .blocked(let reason): "BLOCKED (\(sanitize(reason)))"
        }
        return "\(outcome), pushed \(report.pushed), rejected \(report.rejected), pulled \(report.pulled)"
            + (report.renumbered > 0 ? ", renumbered \(report.renumbered)" : "")
            + (report.rewound.map { ", went back to seq \($0.rewoundTo) (agreed at \($0.agreedSeq)), \($0.requeued) queued again" } ?? "")
            + (report.startedFromImage ? ", started from the start image" : "")
    }

    /// Any query is a valid search (the query language never throws at a person).
    func search(on device: SimulatedDevice) throws {
        let query = (0..<random.between(1...3)).map { _ in random.pick(SimulationWorkload.words) }.joined(separator: " ")
        do {
            let hits = try device.store.search(query)
            log.record("\(device.name) searches \(query): \(hits.count) hits")
        } catch {
            throw Violation("any text is a valid search", "\(device.name) searching \(query): \(error)")
        }
    }

    /// The server authors an op: a plan change, or parsed text for an article it has.
    func serverOp() throws {
        let service = server.service
        guard schema.plan != nil else { return }
        if random.chance(0.4) {
            let plan = random.pick(["free", "premium"])
            try service.setPlan(library: libraryID, plan: plan)
            log.record("server sets the plan to \(plan)")
            return
        }
        let articles = try serverReader!.query("SELECT id FROM article ORDER BY id") { $0.text(0) }
        guard !articles.isEmpty, let id = UUID(text: random.pick(articles)) else { return }
        let words = (0..<random.between(1...30)).map { _ in random.pick(SimulationWorkload.words) }
        try service.library(libraryID).appendServerOp("article.parsed", entity: id, payload: [
            "text": .text(words.joined(separator: " ")), "word_count": .integer(Int64(words.count)),
        ])
        log.record("server parses article \(id.lowercased.prefix(8)) (\(words.count) words)")
    }

    /// Settles a merge-or-ask conflict with a later, sequential edit.
    func resolveConflict(on device: SimulatedDevice) throws {
        // An app version whose schema has no merge-or-ask field keeps no conflicts.
        guard ProjectionSchema(schema: device.schema).hasConflicts else { return try write(on: device, count: 1) }
        let open = try device.store.conflicts()
        guard !open.isEmpty else { return try write(on: device, count: 1) }
        let conflict = random.pick(open)
        let value = random.chance(0.5) ? conflict.replaced : conflict.kept
        do {
            let op = try device.store.resolve(conflict, with: value)
            device.remember(op)
            opsWritten += 1
            log.record("\(device.name) resolves \(conflict.entity).\(conflict.field) of \(conflict.entityID.lowercased.prefix(8)) as #\(op.deviceSeq)")
            if let problem = try workload(for: device).ownWriteProblem(op, before: nil, on: device.store) {
                throw Violation("a device always reads its own writes", "\(device.name) resolving a conflict: \(problem)")
            }
        } catch let error as ChronicleError {
            writesRefused += 1
            log.record("\(device.name) cannot resolve a conflict now: \(error.code)")
        }
    }
}
