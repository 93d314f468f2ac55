/// A bug the simulator found in the engine, store or server and that is not fixed yet.
///
/// A simulator told to tolerate one (`Simulator(…, tolerating:)`) checks what the
/// bug's symptom should have been instead, or steers around its trigger, and
/// carries on, so a long soak keeps finding *other* bugs; each time it does is
/// counted in the report. The strict reproducer of each stays in the test suite
/// as a known issue until the bug is fixed; then the case goes.
///
/// Fixed so far (their reproducers are in `RegressionTests`): `verify()` flagging
/// the outbox gap a rejection leaves, and `op_id_conflict` leaving the device's
/// sequence behind (the device wedged on `device_seq_gap`).
public enum KnownBug: String, CaseIterable, Sendable, Comparable, CustomStringConvertible {
    /// `DeviceStore.verify()` fails "log invariants" with "outbox device_seq has gaps (… queued
    /// and 0 rejected in a…b)" on a healthy store that started over from a server snapshot:
    /// its queued ops that the snapshot already holds stay queued until they are pushed again
    /// (and answered as duplicates), while later ops of the same device come back in the
    /// pull and leave the outbox. The outbox then has a hole at its end that is neither
    /// rejected nor missing. Tolerated, the simulator checks instead that every deviceSeq
    /// missing from the outbox is in the server's log as this device's op, or rejected.
    case verifyFlagsOutboxGapAfterBootstrap

    /// `compact(_:)` (device and server, shared `runCompaction`) can leave history starting
    /// at a seq whose snapshot it deleted itself: the plan drops history through an older
    /// snapshot's seq (its segment is past the horizon), step 2 writes the new snapshot and
    /// deletes the older ones (keeping only the one at the *current* history base), then
    /// step 3 sets `history_base_seq` to the deleted one's seq. Afterwards `verify()`,
    /// `replayDigest()` and `rebuild()` throw "History before seq N was dropped, but the
    /// snapshot at N is missing." Tolerated, the simulator compacts without a horizon whenever
    /// the plan would drop history through a snapshot other than the new one.
    case compactionDropsHistoryAtDeletedSnapshot

    /// `ServerLibrary.push` answers an op whose id another device already used *for an op the
    /// server refused* with that other device's stored refusal (its code, not `op_id_conflict`),
    /// through the `chronicle_rejected_ops` path, which does not advance the pushing device's
    /// `last_device_seq` (the `op_id_conflict` path was fixed in 10b3604; this one was not).
    /// The device drops the op, its next op looks like a gap, and every later push is refused
    /// with `device_seq_gap`: the device is wedged. Tolerated, the simulator only reuses op
    /// ids the server has accepted.
    case reusedRefusedOpIDLeavesDeviceSeqBehind

    public var description: String { rawValue }

    public static func < (lhs: KnownBug, rhs: KnownBug) -> Bool { lhs.rawValue < rhs.rawValue }
}
