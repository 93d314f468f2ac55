/// A bug the simulator found in the engine, store or server and that is not fixed yet.
///
/// A simulator told to tolerate one (`Simulator(…, tolerating:)`) checks what the
/// bug's symptom should have been instead and carries on, so a long soak keeps
/// finding *other* bugs; each tolerated occurrence is counted in the report. The
/// strict reproducer of each stays in the test suite as a known issue, and starts
/// failing as "fixed" the day the bug is.
public enum KnownBug: String, CaseIterable, Sendable, Comparable, CustomStringConvertible {
    /// `DeviceStore.verify()` fails its "log invariants" check with "outbox device_seq has
    /// gaps" on a healthy store: when the server rejects an op while later ops of the same
    /// device are still queued, the rejected op leaves the outbox (as DESIGN.md says it
    /// must), so the queued deviceSeqs are no longer contiguous, or no longer end at
    /// `last_device_seq`. Tolerated, the simulator checks instead that the outbox is
    /// strictly increasing and that every missing deviceSeq was confirmed or rejected.
    case verifyFlagsOutboxGapAfterRejection

    /// `ServerLibrary.push` answers an op whose op id another device already used
    /// (`op_id_conflict`, or the stored refusal of another device's op with that id)
    /// without advancing the pushing device's `last_device_seq`. The device drops the
    /// refused op from its outbox, so its next op is one past what the server expects:
    /// every later push is refused with `device_seq_gap`, `resetAcknowledged` cannot help,
    /// and the device is wedged for good (`SyncReport.Outcome.blocked`). Tolerated, the
    /// simulator does not inject op id clashes.
    case opIDConflictLeavesDeviceSeqBehind

    public var description: String { rawValue }

    public static func < (lhs: KnownBug, rhs: KnownBug) -> Bool { lhs.rawValue < rhs.rawValue }
}
