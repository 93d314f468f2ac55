/// What one simulation run did. Two runs of one seed give equal reports
/// (`traceHash` and `finalDigest` included); that is the determinism check.
public struct SimulationReport: Sendable, Equatable, CustomStringConvertible {
    public var seed: UInt64
    public var schema: String
    public var devices: Int
    /// Safety-phase steps run.
    public var steps: Int
    /// Ops the devices wrote (committed locally).
    public var opsWritten: Int
    /// Local writes the store refused (deleted rows, disk full, …).
    public var writesRefused: Int
    /// Distinct ops the server accepted (or answered as duplicates of accepted ones).
    public var opsAccepted: Int
    /// Distinct ops the server refused for good, and by which code.
    public var opsRejected: Int
    public var rejectedByCode: [String: Int]
    /// Faults injected, by kind.
    public var faults: [FaultKind: Int]
    /// Compactions run (server and devices).
    public var compactions: Int
    /// Segments devices stored while syncing: bulk catch-up pages kept as sealed segments.
    public var segmentsSealedOnArrival: Int
    /// Times a device fetched the server's snapshot to start over from it.
    public var snapshotsFetched: Int
    /// Sync rounds run in the safety phase.
    public var syncRounds: Int
    /// Queued ops numbered again after the server's deviceSeq (devices restored from a backup).
    public var opsRenumbered: Int
    /// Sync rounds in which a device went back to where it and the server agree (the server was
    /// restored from a backup).
    public var rewinds: Int
    /// Ops a restored server lost whose author had already dropped them past its retention
    /// horizon (only their ids were left there): gone with the server's data.
    public var opsLostWithServer: Int
    /// Full passes over every device after healing until everything agreed.
    public var passesToConverge: Int
    /// Sync rounds in those passes.
    public var roundsToConverge: Int
    /// The server log's length at the end.
    public var serverHead: Int64
    /// The state digest every device and the server ended on.
    public var finalDigest: String
    /// SHA-256 over the action trace.
    public var traceHash: String
    /// The fault plan the run ran under.
    public var plan: FaultPlan
    /// Tolerated known bugs the run met (see `KnownBug`), and how often.
    public var knownBugsMet: [KnownBug: Int]
    /// Files devices added (`FaultPlan.fileRate`), and fetched in the safety phase.
    public var filesAdded = 0
    public var filesFetched = 0
    /// Devices that joined mid-run (`FaultPlan.newDeviceRate`), and rounds that started a store from
    /// the server's start image.
    public var devicesJoined = 0
    public var startsFromImage = 0

    public var description: String {
        let faultList = faults.keys.sorted().map { "\($0)=\(faults[$0]!)" }.joined(separator: " ")
        let codes = rejectedByCode.keys.sorted().map { "\($0)=\(rejectedByCode[$0]!)" }.joined(separator: " ")
        return "seed \(seed) \(schema): \(devices) devices, \(steps) steps, \(opsWritten) ops written (\(writesRefused) refused locally), "
            + "\(opsAccepted) accepted, \(opsRejected) rejected [\(codes)], head \(serverHead), faults [\(faultList)], "
            + "\(compactions) compactions, \(segmentsSealedOnArrival) segments sealed on arrival, \(snapshotsFetched) snapshot starts, \(syncRounds) rounds, \(opsRenumbered) renumbered, \(rewinds) rewinds, \(opsLostWithServer) lost with the server, converged in \(passesToConverge) passes (\(roundsToConverge) rounds), "
            + (filesAdded > 0 ? "\(filesAdded) files added, \(filesFetched) fetched, " : "")
            + (devicesJoined > 0 ? "\(devicesJoined) devices joined, \(startsFromImage) started from the start image, " : "")
            + "digest \(finalDigest.prefix(12)), trace \(traceHash.prefix(12))"
            + (knownBugsMet.isEmpty ? "" : ", known bugs met [" + knownBugsMet.keys.sorted().map { "\($0)×\(knownBugsMet[$0]!)" }.joined(separator: " ") + "]")
    }
}
