/// A bug the simulator found in the engine, store or server and that is not fixed yet.
///
/// A simulator told to tolerate one (`Simulator(…, tolerating:)`) steers around its
/// trigger, or checks what its symptom should have been instead, and carries on, so
/// a long soak keeps finding *other* bugs; each time it does is counted in the
/// report (`SimulationReport.knownBugsMet`). The strict reproducer of each stays in
/// `RegressionTests` as a known issue until the bug is fixed; then the bug's
/// constant and its steering go, and the reproducer becomes an ordinary test.
///
/// To add one: a `static let` here (and in `all`), a `tolerated.contains(.name)`
/// branch where the simulator meets it, and a `withKnownIssue` reproducer.
///
/// None is open. Found and fixed so far (reproducers in `RegressionTests`):
/// `verify()` flagging the outbox gaps a rejection, or a start from a snapshot,
/// leaves; `op_id_conflict` (and a reused id of another device's refused op)
/// leaving the device's sequence behind, wedging it on `device_seq_gap`; a
/// compaction deleting the snapshot its horizon then started history from; and a
/// bulk catch-up that met a full disk leaving the search indexes empty.
public struct KnownBug: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Every open bug.
    public static let all: Set<KnownBug> = []

    public var description: String { rawValue }
    public static func < (lhs: KnownBug, rhs: KnownBug) -> Bool { lhs.rawValue < rhs.rawValue }
}
