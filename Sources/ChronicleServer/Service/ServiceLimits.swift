import ChronicleCore
import ChronicleServerStore
import Foundation

/// Explicit limits on everything a request can ask for. Past one, a 4xx with a stable code.
public struct ServiceLimits: Sendable {
    /// Ops in one push (`too_many_ops`).
    public var pushOpsMax = 1_000
    /// Encoded size of one op inside a segment (`segment_too_large`).
    public var opBytesMax = 256 << 10
    /// Ops in one pull page; a larger `limit` is refused (`limit_too_large`).
    public var pullOpsMax = 10_000
    public var pullOpsDefault = 1_000
    /// Longest long-poll wait a pull may ask for (`wait_too_long`).
    public var waitMillisecondsMax = 60_000
    /// Threads that run the requests touching a store (pushes, pulls and the pulls a push
    /// wakes, snapshots, registrations); they wait for fsync and writers, so there are more
    /// of them than cores. Started as needed, ended when idle (`WorkerPool`).
    public var workerThreadsMax = 64
    /// Libraries kept open at once. Each open one holds SQLite connections (its writer, a
    /// checkpointer, a reader per concurrent read: three file descriptors each) and a page cache
    /// of up to `ServerLibrary.cacheKilobytes`; past this many, the least recently used one that
    /// no request is using is closed, and opened again when next asked for.
    public var openLibrariesMax = 256
    /// Limits free libraries live under (premium ones have none), beside those their schema
    /// declares (`Schema.caps`); one here for the same entity (and field) replaces the schema's.
    public var freeTierCaps: [FreeTierCap] = []
    /// Whether opening a library installs `freeTierCaps` in its file, in place of the cap
    /// triggers it has. False for a tool working beside a running server (`besideARunningServer`):
    /// its own empty list would drop the caps that server enforces.
    public var installsFreeTierCaps = true
    /// How long a push that would leave a gap in its device's sequence waits for the push
    /// ahead of it, before it is refused with `device_seq_gap`. A device keeps two pushes in
    /// flight (`SyncEngine.Configuration.pushRequestsInFlightMax`), and the second can reach
    /// the server first; it waits, holding no lock, until the first commits. 0: refused at once.
    public var pushGapWaitMilliseconds = 1_000
    /// How long an access token (`POST /v1/session`, `Accounts.openSession`) is good for; nil:
    /// no sessions (the route answers 404, and devices send their device token on every request).
    public var accessTokenSeconds: Int? = 3_600
    public init() {}

    /// For `chronicle server compact`, `set-plan` and `verify`, which open libraries while a
    /// server may be running on them: the caps in each file are left as the server installed them.
    public static var besideARunningServer: ServiceLimits {
        var limits = ServiceLimits()
        limits.installsFreeTierCaps = false
        return limits
    }

    var segmentLimits: SegmentCodec.Limits {
        var limits = SegmentCodec.Limits()
        limits.maxOps = pushOpsMax
        limits.maxOpBytes = opBytesMax
        return limits
    }
}
