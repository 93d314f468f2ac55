import ChronicleCore
import ChronicleStore
import Foundation

/// Watches the server's log and projection across a run and checks what must
/// always hold of them:
///
/// - `serverSeq` is gap-free from 1 to the head, and the log only grows at its end;
/// - every op id is in the log once;
/// - each device's ops reach the log in `deviceSeq` order;
/// - every op the server ever answered `accepted`/`duplicate` is in the log at
///   that seq (no acknowledged op lost), and a refused op never is;
/// - forward-only fields and counters in the server's projection are what the
///   merge rules give when folded over the log by an independent model: a
///   forward-only value never moves backwards except when the same device set
///   the current value less than 5 minutes earlier by its own clock.
final class ServerInvariants {
    struct Logged {
        var opID: UUID
        var deviceID: UUID
        var deviceSeq: Int64
    }

    /// A forward-only field's state: value, who set it, and when by their clock.
    struct Forward: Equatable {
        var value: Double?
        var device: String
        var time: Int64
    }

    let schema: Schema
    private(set) var log: [Logged] = []
    /// The ops absorbed, in order (what `truncated(to:)` folds again).
    private var ops: [Op] = []
    private var seqByOpID: [UUID: Int64] = [:]
    private var lastDeviceSeq: [UUID: Int64] = [:]
    private var answeredSeq: [UUID: Int64] = [:]
    /// "entity/id" of every row the log created.
    private var rows = Set<String>()
    /// entity → id → field → state.
    private var forward: [String: [String: [String: Forward]]] = [:]
    private var counters: [String: [String: [String: Int64]]] = [:]

    init(schema: Schema) { self.schema = schema }

    /// An independent copy (what the invariants were when the server was backed up).
    func copy() -> ServerInvariants {
        let copy = ServerInvariants(schema: schema)
        copy.log = log
        copy.ops = ops
        copy.seqByOpID = seqByOpID
        copy.lastDeviceSeq = lastDeviceSeq
        copy.answeredSeq = answeredSeq
        copy.rows = rows
        copy.forward = forward
        copy.counters = counters
        return copy
    }

    var head: Int64 { Int64(log.count) }

    /// What the invariants were when the log ended at `head` (a server whose history past it is
    /// gone, salvaged from a damaged file): its ops folded again, and the answers given for them.
    func truncated(to head: Int64) throws(Violation) -> ServerInvariants {
        let kept = ServerInvariants(schema: schema)
        try kept.absorb(Array(ops.prefix(Int(head))))
        kept.answeredSeq = answeredSeq.filter { $0.value <= head }
        return kept
    }

    /// The device that wrote the op at `seq` with this op id, if the log holds it.
    func logged(_ opID: UUID) -> (seq: Int64, device: UUID)? {
        seqByOpID[opID].map { ($0, log[Int($0) - 1].deviceID) }
    }

    // MARK: - The log

    /// Takes the ops the log gained since the last call (`ops` continue at `head + 1`).
    func absorb(_ ops: [Op]) throws(Violation) {
        for op in ops {
            guard let seq = op.serverSeq else { throw Violation("confirmed ops carry a serverSeq", "op \(op.opID.lowercased) has none") }
            guard seq == head + 1 else {
                throw Violation("serverSeq gap-free (1…head)", "after seq \(head) the log continues at \(seq)")
            }
            if let earlier = seqByOpID[op.opID] {
                throw Violation("every op id in the server log exactly once", "op \(op.opID.lowercased) is at seq \(earlier) and again at \(seq)")
            }
            if let last = lastDeviceSeq[op.deviceID], op.deviceSeq <= last {
                throw Violation("ops reach the log in deviceSeq order per device",
                                "device \(op.deviceID.lowercased.suffix(6)): deviceSeq \(op.deviceSeq) at seq \(seq) after deviceSeq \(last)")
            }
            lastDeviceSeq[op.deviceID] = op.deviceSeq
            seqByOpID[op.opID] = seq
            log.append(Logged(opID: op.opID, deviceID: op.deviceID, deviceSeq: op.deviceSeq))
            self.ops.append(op)
            try fold(op)
        }
    }

    /// Compares the whole log the server still serves (history past the retention horizon is
    /// gone) with what was absorbed: nothing in it changed or moved.
    func recheck(_ all: [Op], head serverHead: Int64) throws(Violation) {
        let base = serverHead - Int64(all.count)
        guard serverHead == head, base >= 0 else {
            throw Violation("the log only grows at its end", "it serves \(all.count) ops up to seq \(serverHead); \(head) were seen before")
        }
        for (offset, op) in all.enumerated() {
            let seq = base + Int64(offset) + 1
            let seen = log[Int(seq) - 1]
            if op.serverSeq != seq || op.opID != seen.opID || op.deviceID != seen.deviceID || op.deviceSeq != seen.deviceSeq {
                throw Violation("the log only grows at its end", "seq \(seq) now holds op \(op.opID.lowercased), not \(seen.opID.lowercased)")
            }
        }
    }

    /// Checks the server's answers against the log (call after `absorb` reached the head).
    func check(_ answers: [SimulationLog.Answer]) throws(Violation) {
        for answer in answers {
            switch answer.outcome {
            case .accepted(let seq), .duplicate(let seq):
                if let first = answeredSeq[answer.opID], first != seq {
                    throw Violation("a repeat gets the original answer",
                                    "op \(answer.opID.lowercased) of \(answer.deviceName) was answered seq \(first), later seq \(seq)")
                }
                answeredSeq[answer.opID] = seq
                guard seq >= 1, seq <= head, log[Int(seq) - 1].opID == answer.opID, log[Int(seq) - 1].deviceID == answer.device else {
                    let there = seq >= 1 && seq <= head ? "op \(log[Int(seq) - 1].opID.lowercased)" : "nothing (head \(head))"
                    throw Violation("no acknowledged op lost",
                                    "the server answered \(answer.outcome) for op \(answer.opID.lowercased) (\(answer.deviceName) #\(answer.deviceSeq)), but seq \(seq) holds \(there)")
                }
            case .rejected(let code, _):
                if let (seq, device) = logged(answer.opID), device == answer.device {
                    throw Violation("a refused op never enters the log",
                                    "op \(answer.opID.lowercased) of \(answer.deviceName) was refused (\(code)) but is at seq \(seq)")
                }
            }
        }
        // Every answer ever given still holds (the log never loses a prefix).
        for (opID, seq) in answeredSeq where seqByOpID[opID] != seq {
            throw Violation("no acknowledged op lost", "op \(opID.lowercased) was acknowledged at seq \(seq) but the log has it at \(seqByOpID[opID].map(String.init) ?? "no seq")")
        }
    }

    // MARK: - The independent model of forward-only fields and counters

    private func fold(_ written: Op) throws(Violation) {
        // Ops of an earlier version (an app not updated yet) are read as the server reads them.
        let op = schema.opType(written.type, version: written.version) != nil ? written : ((try? schema.upcast(written)) ?? written)
        guard let spec = schema.opType(op.type, version: op.version), let entity = schema.entity(spec.entity) else { return }
        let key = "\(entity.name)/\(op.entityID.lowercased)"
        let id = op.entityID.lowercased
        let device = op.deviceID.lowercased
        let forwardFields = entity.fields.filter { $0.rule == .forwardOnly }
        let counterFields = entity.fields.filter { $0.rule == .counter }
        switch spec.action {
        case .create, .upsert:
            if !rows.contains(key) {
                rows.insert(key)
                for field in forwardFields {
                    let value = (op.payload[field.name] ?? spec.defaults[field.name])?.realValue
                    forward[entity.name, default: [:]][id, default: [:]][field.name] = value == nil
                        ? Forward(value: nil, device: "", time: 0)
                        : Forward(value: value, device: device, time: op.deviceTime)
                }
                for field in counterFields {
                    if let value = spec.defaults[field.name]?.integerValue { counters[entity.name, default: [:]][id, default: [:]][field.name] = value }
                }
            }
            if spec.action == .upsert { setForward(op, entity, forwardFields, key: key) }
        case .set:
            setForward(op, entity, forwardFields, key: key)
        case .increment:
            guard rows.contains(key), let name = spec.field, let delta = op.payload[spec.valueKey ?? ""]?.integerValue else { return }
            counters[entity.name, default: [:]][id, default: [:]][name, default: 0] += delta
        default:
            break
        }
    }

    /// The forward-only rule, written out again independently of the materializer's SQL.
    private func setForward(_ op: Op, _ entity: EntitySpec, _ fields: [FieldSpec], key: String) {
        guard rows.contains(key) else { return }
        let id = op.entityID.lowercased
        let device = op.deviceID.lowercased
        for field in fields {
            guard let new = op.payload[field.name]?.realValue else { continue }
            let current = forward[entity.name]?[id]?[field.name]
            let forwards = current?.value == nil || new >= current!.value!
            let sameSession = current.map { $0.device == device && op.deviceTime >= $0.time
                && op.deviceTime - $0.time < MergeRule.forwardOnlyWindowMilliseconds } ?? false
            if forwards || sameSession {
                forward[entity.name, default: [:]][id, default: [:]][field.name] = Forward(value: new, device: device, time: op.deviceTime)
            }
        }
    }

    /// Compares the model with the server's projection, read straight from its file.
    func checkProjection(_ db: Database) throws(Violation) {
        do {
            try db.readTransaction { db in
                for entity in schema.entities {
                    for field in entity.fields where field.rule == .forwardOnly {
                        let q = ProjectionSchema.quoted
                        let found = try db.query("SELECT id, \(q(field.name)), \(q(field.deviceColumn)), \(q(field.timeColumn)) FROM \(q(entity.table))") {
                            ($0.text(0), Forward(value: $0.isNull(1) ? nil : $0.double(1), device: $0.optionalText(2) ?? "", time: $0.optionalInt(3) ?? 0))
                        }
                        let model = forward[entity.name] ?? [:]
                        if found.count != model.count {
                            throw Violation("the server's rows are the ones the log created",
                                            "\(entity.name): the projection has \(found.count) rows, the log created \(model.count)")
                        }
                        for (id, state) in found {
                            guard let expected = model[id]?[field.name] else { continue }
                            if state != expected {
                                let backwards = (state.value ?? 0) < (expected.value ?? 0)
                                throw Violation(backwards ? "forward-only fields never move backwards (except within one device's 5-minute session)"
                                                          : "forward-only fields follow their rule",
                                                "\(entity.name) \(id.prefix(8)).\(field.name) is \(Self.show(state)) but the rule over the log gives \(Self.show(expected))")
                            }
                        }
                    }
                    for field in entity.fields where field.rule == .counter {
                        let q = ProjectionSchema.quoted
                        let found = try db.query("SELECT id, \(q(field.name)) FROM \(q(entity.table))") { ($0.text(0), $0.optionalInt(1)) }
                        for (id, value) in found {
                            let expected = counters[entity.name]?[id]?[field.name]
                            if value != expected {
                                throw Violation("counters are the sum of their deltas",
                                                "\(entity.name) \(id.prefix(8)).\(field.name) is \(value.map(String.init) ?? "null"), the deltas in the log sum to \(expected.map(String.init) ?? "null")")
                            }
                        }
                    }
                }
            }
        } catch let violation as Violation {
            throw violation
        } catch {
            throw Violation("the server's projection can be read", "\(error)")
        }
    }

    static func show(_ state: Forward) -> String {
        "\(state.value.map { CanonicalJSON.format($0) } ?? "null") by \(state.device.suffix(6)) at \(state.time)"
    }
}
