import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

extension Simulator {
    /// What one safety-phase step does.
    enum Action {
        case write, sync, search, serverOp, resolveConflict
        case restartServer, crash, goOffline, comeOnline, toggleDiskFull, jumpClock, clashEntityID, clashOpID
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
        let device = random.pick(devices)
        let action = chooseAction(for: device)
        var acting: SimulatedDevice? = device
        switch action {
        case .write: try write(on: device, count: random.between(1...5))
        case .sync: try await sync(device)
        case .search: try search(on: device)
        case .serverOp: try serverOp(); acting = nil
        case .resolveConflict: try resolveConflict(on: device)
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
        let weights: [(Action, Double)] = [(.write, 45), (.sync, 40), (.search, 4), (.serverOp, 3),
                                           (.resolveConflict, schema.entities.contains { $0.fields.contains { $0.rule == .mergeOrAsk } } ? 3 : 0)]
        return weights[random.weighted(weights.map(\.1))].0
    }

    // MARK: - Work

    /// Writes `count` random ops; each one must show at once, and a refused one must leave nothing behind.
    func write(on device: SimulatedDevice, count: Int) throws {
        for _ in 0..<count {
            guard let planned = try workload.plan(on: device.store) else { continue }
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
            if let problem = try workload.ownWriteProblem(op, before: planned.before, on: store) {
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
        let report = await device.sync()
        syncRounds += 1
        guard await device.transport.settle() else {
            throw Violation("the engine fetches every page it asked for", "\(device.name) left a prefetched pull unanswered")
        }
        log.record("\(device.name) sync: \(describe(report))")
        if device.transport.takeCrashRequest() {
            log.record("\(device.name) restarts after its crash")
            try device.crashAndRestart()
        }
        return report
    }

    func describe(_ report: SyncReport) -> String {
        let outcome = switch report.outcome {
        case .synced: "synced"
        case .offline(let reason): "offline (\(sanitize(reason)))"
        case .blocked(let reason): "BLOCKED (\(sanitize(reason)))"
        }
        return "\(outcome), pushed \(report.pushed), rejected \(report.rejected), pulled \(report.pulled)"
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
        let open = try device.store.conflicts()
        guard !open.isEmpty else { return try write(on: device, count: 1) }
        let conflict = random.pick(open)
        let value = random.chance(0.5) ? conflict.replaced : conflict.kept
        do {
            let op = try device.store.resolve(conflict, with: value)
            device.remember(op)
            opsWritten += 1
            log.record("\(device.name) resolves \(conflict.entity).\(conflict.field) of \(conflict.entityID.lowercased.prefix(8)) as #\(op.deviceSeq)")
            if let problem = try workload.ownWriteProblem(op, before: nil, on: device.store) {
                throw Violation("a device always reads its own writes", "\(device.name) resolving a conflict: \(problem)")
            }
        } catch let error as ChronicleError {
            writesRefused += 1
            log.record("\(device.name) cannot resolve a conflict now: \(error.code)")
        }
    }

    // MARK: - Faults

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
        let creates = workload.plainCreates
        guard !creates.isEmpty else { return }
        let spec = random.pick(creates)
        let id = random.uuid()
        log.fault(.entityIDClash, "\(first.name) and \(second.name) both create \(spec.entity) \(id.lowercased.prefix(8))")
        for device in [first, second] {
            defer { device.ids.clearForced() }
            guard let planned = try workload.plan(spec, on: device.store) else { continue }
            device.ids.force([id])
            if let op = try write(planned, on: device), op.entityID != id {
                throw Violation("a create takes the id its generator gives", "\(device.name) created \(op.entityID.lowercased), not \(id.lowercased)")
            }
        }
    }

    /// A device writes a create whose op id another device already used for an op the server holds:
    /// refused (`op_id_conflict`), and its follow-up edit of that entity after it (`unknown_entity`).
    func clashOpID(_ device: SimulatedDevice) throws {
        if tolerated.contains(.opIDConflictLeavesDeviceSeqBehind) {
            log.record("no op id clash: it would wedge the device (\(KnownBug.opIDConflictLeavesDeviceSeqBehind))")
            return
        }
        let owners = devices.filter { $0 !== device }
        guard !owners.isEmpty else { return }
        let owner = random.pick(owners)
        // An op the server holds but this device has not pulled yet: its store would refuse an op id
        // it already holds in its own log, so the clash could never reach the server.
        let cursor = try device.store.cursor()
        let taken = owner.writtenOrder.filter { id in
            invariants.logged(id).map { $0.device == owner.deviceID && $0.seq > cursor } ?? false
        }
        let creates = workload.plainCreates
        guard !taken.isEmpty, !creates.isEmpty else { return }
        let opID = random.pick(taken)
        let spec = random.pick(creates)
        guard let planned = try workload.plan(spec, on: device.store) else { return }
        log.fault(.opIDClash, "\(device.name) reuses \(owner.name)'s op id \(opID.lowercased.prefix(8)) for a \(spec.type)")
        defer { device.ids.clearForced() }
        device.ids.force([random.uuid(), opID])
        guard let op = try write(planned, on: device) else { return }
        if op.opID != opID {
            throw Violation("an op takes the id its generator gives", "\(device.name) wrote op \(op.opID.lowercased), not \(opID.lowercased)")
        }
        // An edit of the entity that will never exist on the server.
        let edits = workload.deviceOps.filter { $0.entity == spec.entity && ($0.action == .set || $0.action == .add || $0.action == .delete) }
        if !edits.isEmpty, let follow = try workload.plan(random.pick(edits), on: device.store, entityHint: op.entityID) {
            try write(follow, on: device)
        }
    }
}
