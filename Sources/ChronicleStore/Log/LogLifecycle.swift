import ChronicleCore
import Foundation

/// What sealing one segment did.
package struct SealedChunk { var ops: Int64; var log: Int64; var body: Int64; var frame: Int64 }

/// `sealAhead` stops: another compaction on the file sealed first.
struct SealPrefixMoved: Error {}

/// A segment read from the log and encoded, for the writer to store (`LogLifecycle.storeSeal`).
package struct PreparedSeal: Sendable {
    var segment: EncodedSegment
    var ops: [Op]
    /// Bytes its ops took in the log (`CompactionReport.logBytesSealed`).
    var logBytes: Int64
    /// The digest of the segment it follows, and its own, chained to that one.
    var previousDigest: String
    var digest: String
}

/// A store with a confirmed log that can be sealed, snapshotted and compacted: a
/// device store, or the server's store of one library.
package protocol LogLifecycle: Sendable {
    var path: String { get }
    var libraryID: UUID { get }
    var materializer: Materializer { get }
    var projection: ProjectionSchema { get }
    var clock: any ChronicleClock { get }
    /// True when the projection holds exactly the confirmed state at the head (the server's;
    /// a device's shows its pending ops on top): a snapshot is then read from it as it is,
    /// at the head, rather than replayed into a scratch database up to the seal point.
    var projectsConfirmedStateOnly: Bool { get }
    /// True where snapshots are what new devices start from (the server's libraries): a
    /// compaction then always keeps its new snapshot (`CompactionPolicy.keepsSnapshotThatGrowsFile`).
    var snapshotsServeNewDevices: Bool { get }
    /// `projectsConfirmedStateOnly`, or true as `db` sees the store now (a device with no op pending).
    func confirmedStateOnly(in db: Database) throws -> Bool
    /// What "now" is on the server's clock, for decisions that compare it with server times
    /// (the horizon, `keepMilliseconds`): the server's own clock (`now`), or on a device the
    /// newest server time it holds, since its own clock may be years off the server's.
    func serverNow(_ now: Int64, in db: Database) throws -> Int64
    func read<T>(_ body: (Database) throws -> T) throws -> T
    func writeTransaction<T>(_ body: (Database) throws -> T) throws -> T
    /// Runs `VACUUM` on the writer connection.
    func vacuum() throws
    /// Keeps the ids of `ops`, which are leaving the log for a segment, so that each still
    /// applies at most once (`duplicateOp` for one already kept). Inside the caller's transaction.
    func rememberSealed(_ ops: ArraySlice<Op>, in db: Database) throws
    /// The newest seq in the hot log (nil when it holds none).
    func hotLogEnd(in db: Database) throws -> Int64?
    /// The first hot op after `sealed` whose server time is `time` or later.
    func firstHotSeq(after sealed: Int64, timeAtLeast time: Int64, in db: Database) throws -> Int64?
    /// The last hot op in `(sealed, through]` whose server time is before `time`.
    func lastHotSeq(after sealed: Int64, through: Int64, timeBefore time: Int64, in db: Database) throws -> Int64?
    /// Reads the run of up to `segmentOpsMax` ops after `sealed` (not past `through`, nor across
    /// `boundary`) from the hot log and encodes it as the segment that follows the one digested
    /// `previousDigest`. Reads only. Nil when `sealed` reaches `through`.
    func prepareSeal(after sealed: Int64, previousDigest: String, through: Int64, endingAt boundary: Int64?,
                     policy: CompactionPolicy, in db: Database) throws -> PreparedSeal?
    /// Takes the ops of `segment`, just stored, out of the hot log (inside the caller's transaction).
    func releaseSealed(_ segment: EncodedSegment, in db: Database) throws
    /// Runs a compaction's seals (`sealTransaction` each).
    func sealing<T>(_ body: () throws -> T) throws -> T
    /// One seal's transaction.
    func sealTransaction<T>(_ body: (Database) throws -> T) throws -> T
}

extension LogLifecycle {
    package static func sealedDuplicate(_ op: Op) -> ChronicleError {
        ChronicleError(.duplicateOp, "Op \(op.opID.lowercased) is already in the confirmed log (sealed); an op id is applied at most once.")
    }
}
