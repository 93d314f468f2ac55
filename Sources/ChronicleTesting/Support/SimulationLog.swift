import ChronicleCore
import Foundation

/// What happened in one run, in order: the action trace (hashed at the end so
/// two runs of one seed can be compared), the faults injected, and every answer
/// the server gave to a push (what "acknowledged" means for the invariants).
///
/// Shared by the simulator and the transports; every line is written from the
/// one task that drives the run, in an order the seed decides.
public final class SimulationLog: @unchecked Sendable {
    /// One push answer as the server gave it (before any fault lost it on the way back).
    public struct Answer: Sendable, Equatable {
        public var device: UUID
        public var deviceName: String
        public var opID: UUID
        public var deviceSeq: Int64
        public var outcome: PushOutcome
    }

    private let lock = NSLock()
    private var lines: [String] = []
    private var prefix = "setup"
    private var faultCounts: [FaultKind: Int] = [:]
    private var pendingAnswers: [Answer] = []
    private var acceptedOps = Set<UUID>()
    private var rejectedOps = Set<UUID>()
    private var rejectionCodes: [String: Int] = [:]
    private var snapshots = 0

    public init() {}

    /// The label lines are written under until the next call ("step 12", "liveness pass 2").
    public func begin(_ label: String) { lock.withLock { prefix = label } }

    public func record(_ line: String) { lock.withLock { lines.append("\(prefix): \(line)") } }

    public func fault(_ kind: FaultKind, _ line: String) {
        lock.withLock {
            faultCounts[kind, default: 0] += 1
            lines.append("\(prefix): FAULT \(kind) \(line)")
        }
    }

    public func answered(_ answers: [Answer]) {
        lock.withLock {
            pendingAnswers += answers
            for answer in answers {
                switch answer.outcome {
                case .accepted, .duplicate:
                    acceptedOps.insert(answer.opID)
                case .rejected(let code, _):
                    if rejectedOps.insert(answer.opID).inserted { rejectionCodes[code, default: 0] += 1 }
                }
            }
        }
    }

    /// Answers given since the last call.
    func drainAnswers() -> [Answer] {
        lock.withLock {
            defer { pendingAnswers.removeAll() }
            return pendingAnswers
        }
    }

    /// A device fetched the server's snapshot to start over from it.
    public func snapshotFetched(_ line: String) {
        lock.withLock {
            snapshots += 1
            lines.append("\(prefix): \(line)")
        }
    }

    public var snapshotsFetched: Int { lock.withLock { snapshots } }
    public var faults: [FaultKind: Int] { lock.withLock { faultCounts } }
    public var trace: [String] { lock.withLock { lines } }
    public var acceptedCount: Int { lock.withLock { acceptedOps.count } }
    public var rejectedCount: Int { lock.withLock { rejectedOps.count } }
    public var rejectedByCode: [String: Int] { lock.withLock { rejectionCodes } }

    /// The last `count` lines, for a failure message.
    public func tail(_ count: Int) -> [String] { lock.withLock { Array(lines.suffix(count)) } }

    /// SHA-256 over every trace line: equal for two runs of one seed.
    public func traceHash() -> String {
        let hasher = SHA256Hasher()
        for line in trace { hasher.update(line); hasher.update("\n") }
        return hasher.hexDigest()
    }
}
