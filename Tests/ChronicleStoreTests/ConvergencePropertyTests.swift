import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing
import ChronicleTesting

/// Random op sequences of every type, with this device's pending ops rebased
/// under random confirmed batches from other devices and the server: after
/// every batch the incremental projection must equal a full replay.
@Suite struct ConvergencePropertyTests {
    /// Seeds per run; CHRONICLE_PROPERTY_SEEDS raises it for a longer soak.
    static let seedCount = Int(ProcessInfo.processInfo.environment["CHRONICLE_PROPERTY_SEEDS"] ?? "") ?? 1000

    @Test func incrementalDigestEqualsRebuildForRandomHistories() throws {
        var checks = 0
        for seed in 1...UInt64(Self.seedCount) {
            checks += try runScenario(seed: seed, steps: 40).comparisons
        }
        #expect(checks > Self.seedCount, "every seed compared digests at least once")
    }

    /// The field-service schema: merge-or-ask notes and their conflict records, counters, sets.
    @Test func fieldServiceHistoriesConvergeToo() throws {
        var checks = 0, conflicts = 0
        for seed in 1...UInt64(max(50, Self.seedCount / 5)) {
            let result = try runScenario(seed: seed, steps: 40, schema: .fieldService)
            checks += result.comparisons
            conflicts += result.conflicts
        }
        #expect(checks > 50)
        #expect(conflicts > 0, "the histories include concurrent edits of merge-or-ask fields")
    }

    /// Returns how many digest comparisons it made. A failure names the seed.
    func runScenario(seed: UInt64, steps: Int, schema: Schema = .readItLater) throws -> (comparisons: Int, conflicts: Int) {
        let f = try Fixture(schema: schema, seed: seed)
        let rng = SeededIDGenerator(seed: seed &* 7919)
        func roll(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }
        let remoteDevices = [rng.makeUUID(), rng.makeUUID(), Op.serverDeviceID]
        let server = ServerLog(library: f.store.libraryID, seed: seed ^ 0x5EED_5EED_5EED)
        var serverLog: [Op] = []         // the server's total order
        var delivered = 0                // how much of it this device has applied
        var pushed = 0                   // how many of this device's ops the server holds
        var known: [String: [UUID]] = [:]  // entity type → ids the server has seen created
        let words = ["offline", "sync", "plane", "tunnel", "swift", "log", "merge", "field", "ünïcode", "🎉"]
        var comparisons = 0

        func payload(for type: String, spec: OpTypeSpec) -> Payload {
            var p = Payload()
            let entity = f.store.schema.entity(spec.entity)!
            var names = spec.fields
            if spec.action == .set {
                for i in names.indices.reversed() { names.swapAt(i, roll(i + 1)) }
                names = Array(names.prefix(1 + roll(2)))
            }
            for name in names where spec.required.contains(name) || roll(2) == 0 || spec.action == .set {
                let field = entity.field(name)!
                switch field.type {
                case .url: p[name] = .text("https://example.com/\(words[roll(words.count)])/\(roll(100))")
                case .text:
                    if let allowed = field.enumValues { p[name] = .text(allowed[roll(allowed.count)]) }
                    else { p[name] = .text("\(words[roll(words.count)]) \(words[roll(words.count)])") }
                case .integer, .timestamp: p[name] = .integer(Int64(roll(1000)))
                case .real: p[name] = .real(field.maximum == 1 ? Double(roll(101)) / 100 : Double(roll(3600)))
                case .boolean: p[name] = .bool(roll(2) == 0)
                case .id:
                    let target = field.references!
                    guard let ids = known[target], !ids.isEmpty else { return [:] }
                    p[name] = .text(ids[roll(ids.count)].lowercased)
                }
            }
            if let key = spec.valueKey {
                if spec.action == .increment { p[key] = .integer(Int64(roll(10)) - 5) }
                else if entity.field(spec.field!)!.type == .id {
                    guard let ids = known[entity.field(spec.field!)!.references ?? "article"], !ids.isEmpty else { return [:] }
                    p[key] = .text(ids[roll(ids.count)].lowercased)
                } else { p[key] = .text(words[roll(4)]) }
            }
            return p
        }

        func randomOp() -> (OpTypeSpec, UUID?, Payload) {
            let ops = f.store.schema.ops
            let spec = ops[roll(ops.count)]
            let target: UUID? = spec.action == .create ? nil
                : spec.entity == "library" ? f.store.libraryID
                : known[spec.entity].flatMap { $0.isEmpty ? nil : $0[roll($0.count)] }
            return (spec, target, payload(for: spec.type, spec: spec))
        }

        for _ in 0..<steps {
            switch roll(10) {
            case 0...3:  // this device writes; refusals (deleted rows, bad refs) are fine
                let (spec, target, p) = randomOp()
                if spec.action != .create && target == nil { continue }
                if let op = try? f.store.write(spec.type, entity: target, payload: p), spec.action == .create {
                    known[spec.entity, default: []].append(op.entityID)
                }
            case 4...6:  // another device (or the server) writes; the server orders it
                let (spec, target, p) = randomOp()
                if spec.action != .create && target == nil { continue }
                let device = spec.type == "article.parsed" || spec.type == "library.plan" ? Op.serverDeviceID : remoteDevices[roll(2)]
                let entity = target ?? rng.makeUUID()
                if spec.action == .create { known[spec.entity, default: []].append(entity) }
                var op = server.op(spec.type, entity: entity, from: device, payload: p,
                                   deviceTime: server.time + Int64(roll(600_000)) - 300_000)
                op.baseSeq = Int64(roll(Int(server.seq)))   // written offline a while ago: concurrent with what came since
                serverLog.append(op)
            case 7:  // the server receives a prefix of this device's outbox
                let pending = try f.store.pendingOps().filter { $0.deviceSeq > Int64(pushed) }
                for op in pending.prefix(1 + roll(4)) {
                    serverLog.append(server.confirm(op))
                    pushed = Int(op.deviceSeq)
                }
            default:  // this device pulls a batch
                guard delivered < serverLog.count else { continue }
                let end = min(serverLog.count, delivered + 1 + roll(6))
                let slice = Array(serverLog[delivered..<end])
                if roll(3) == 0 {
                    // Bulk mode: several transactions, search indexes rebuilt at the end.
                    let cut = roll(slice.count + 1)
                    try f.store.applyConfirmedInBulk([Array(slice[..<cut]), Array(slice[cut...])])
                } else {
                    try f.store.applyConfirmed(slice)
                }
                delivered = end
                let incremental = try f.store.digest()
                let replay = try f.store.replayDigest()
                #expect(incremental == replay, "seed \(seed): incremental digest differs from a replay after pulling to seq \(end)")
                if incremental != replay { return (comparisons, 0) }
                if roll(4) == 0 {
                    // Search indexes match their content tables (FTS5 integrity-check), mid-history too.
                    let failed = try f.store.verify().checks.filter { !$0.passed }
                    #expect(failed.isEmpty, "seed \(seed): \(failed.map { "\($0.name): \($0.detail)" })")
                    if !failed.isEmpty { return (comparisons, 0) }
                }
                comparisons += 1
            }
        }
        // Drain: everything pushed and pulled, then a real rebuild agrees too.
        for op in try f.store.pendingOps() where op.deviceSeq > Int64(pushed) { serverLog.append(server.confirm(op)) }
        if delivered < serverLog.count { try f.store.applyConfirmed(Array(serverLog[delivered...])) }
        #expect(try f.store.status().unsentOps == 0, "seed \(seed): every op was confirmed")
        let failed = try f.store.verify().checks.filter { !$0.passed }
        #expect(failed.isEmpty, "seed \(seed): \(failed.map { "\($0.name): \($0.detail)" })")
        let before = try f.store.digest()
        let rebuilt = try f.store.rebuild()
        #expect(before == rebuilt.digest, "seed \(seed): rebuild changed the digest")
        comparisons += 1
        return (comparisons, try f.store.conflicts(includeResolved: true).count)
    }
}

