import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation
import ChronicleServerStore

/// A deterministic simulation of Chronicle under faults, in the spirit of
/// FoundationDB's and TigerBeetle's simulators: one process, one seed, one run.
///
/// A server (`SyncService` over a temporary directory) and 2–16 devices
/// (`DeviceStore` + `SyncEngine` each) talk over `SimulatedTransport`s; every
/// device has its own `SimulatedClock`, skewed by up to years. The seed decides
/// everything: the schema, how many devices, the engine's batch sizes, the
/// free-tier caps, the `FaultPlan`, and every step.
///
/// - **Safety phase**: each step picks a device and an action (write 1–5 random
///   ops of every type, sync a round, search, go offline or come back, crash and
///   restart, fill or free the disk, restart the server, jump a clock, clash
///   ids with another device, let the server author an op, compact the server's
///   or the device's log — sometimes past a retention horizon, so devices start
///   over from snapshots), then checks every invariant (`ServerInvariants`, and on
///   the device that acted `verify()`, its outbox and that none of its ops vanished).
/// - **Liveness phase**: every fault heals, then devices sync round-robin; all
///   of them must reach the server's digest within three full passes, and a
///   fresh device pulling everything from scratch must reach it too.
///
/// A broken invariant throws `SimulationFailure` with the seed, the step, the
/// last actions and the command that replays it.
///
/// ```swift
/// let report = try await Simulator(seed: 42).run()
/// print(report)   // devices, ops, faults by kind, rounds to converge, digest, trace hash
/// ```
public final class Simulator {
    public let seed: UInt64
    public let schema: Schema
    public let deviceCount: Int
    public let steps: Int
    public let plan: FaultPlan
    public let caps: [FreeTierCap]
    public let engineConfiguration: SyncEngine.Configuration
    /// Known bugs whose trigger is steered around, or whose symptom is checked differently.
    public let tolerated: Set<KnownBug>

    /// Safety-phase steps when not told otherwise.
    public static let defaultSteps = 150

    /// Passes over every device after healing within which everything must agree.
    public static let livenessPassesMax = 3
    static let password = "simulated password"

    let random: SimulationRandom
    /// How compactions run (whole segments only, VACUUM or not): a stream of its own, so a
    /// seed's other choices stay what they were before these knobs existed.
    let lifecycleRandom: SimulationRandom
    /// Whether the server still runs the build before the run's schema version.
    var serverOnOldApp = false
    let workload: SimulationWorkload
    let log = SimulationLog()
    let time = SimulatedTime()
    /// Where the run's files live (removed at the end unless `CHRONICLE_SIM_KEEP` is set).
    public internal(set) var directory = ""
    var server: SimulatedServer!
    var devices: [SimulatedDevice] = []
    var libraryID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    var invariants: ServerInvariants
    var serverReader: Database?
    var label = "setup"
    var opsWritten = 0
    var writesRefused = 0
    var syncRounds = 0
    /// Queued ops numbered again after the server's (a device restored from a backup).
    var opsRenumbered = 0
    /// Sync rounds in which a device went back to where it and the server agree.
    var rewinds = 0
    /// Ops the server lost whose author had already dropped them past its horizon: gone.
    var opsLostWithServer = 0
    var compactions = 0
    /// Segments devices stored while syncing (bulk catch-up pages kept as they arrived).
    var segmentsSealedOnArrival = 0
    var knownBugsMet: [KnownBug: Int] = [:]
    /// The invariants as they were when the server's data directory was backed up, if it was.
    var serverBackup: ServerInvariants?
    /// Ops the server ordered and then lost when it was restored from a backup. A device may
    /// still hold them as confirmed until its next pull tells it, so during the safety phase such
    /// an op in a device's log counts as kept.
    var opsLostByServer = Set<UUID>()
    /// False from the liveness phase on: by then every op must be in the server's log again.
    var excusingOpsLostByServer = true
    /// The files devices added (`FaultPlan.fileRate`), by address: their bytes, to check every copy against.
    var files: [BlobRef: [UInt8]] = [:]
    /// Files fetched by a device in the safety phase.
    var filesFetched = 0
    /// Devices that signed in mid-run (`FaultPlan.newDeviceRate`), and rounds that started a store from the start image.
    var devicesJoined = 0
    var startsFromImage = 0

    /// - Parameters:
    ///   - seed: decides everything not given here.
    ///   - devices: 2–16; by default the seed picks (mostly few, sometimes many).
    ///   - schema: by default the seed picks (four in five seeds `.readItLater`, else `.fieldService`).
    ///   - steps: safety-phase steps.
    ///   - faults: by default `FaultPlan.random(seed:)`.
    ///   - caps: the server's free-tier caps; by default about a third of the seeds pick some.
    ///   - tolerating: open bugs not to stop at (see `KnownBug`); none by default.
    public init(seed: UInt64, devices: Int? = nil, schema: Schema? = nil, steps: Int = Simulator.defaultSteps, faults: FaultPlan? = nil,
                caps: [FreeTierCap]? = nil, tolerating: Set<KnownBug> = []) {
        self.seed = seed
        self.tolerated = tolerating
        let setup = SimulationRandom(seed: seed).fork(label: 0xC0F1)
        let chosenSchema = schema ?? (setup.chance(0.2) ? Schema.fieldService : Schema.readItLater)
        let chosenDevices = devices ?? 2 + Int((setup.unit() * setup.unit() * 15).rounded(.down))
        precondition((2...16).contains(chosenDevices), "a simulation runs 2 to 16 devices, not \(chosenDevices)")
        self.schema = chosenSchema
        self.deviceCount = chosenDevices
        self.steps = steps
        self.plan = faults ?? FaultPlan.random(seed: seed)
        var configuration = SyncEngine.Configuration()
        configuration.retriesPerRoundMax = 0     // a failed round reports offline at once: nothing ever sleeps
        configuration.pushBatchOpsMax = setup.pick([1, 2, 3, 5, 10, 50, 500])
        configuration.pullPageOpsMax = setup.pick([1, 2, 4, 7, 20, 100, 2000])
        configuration.bulkCatchUpOpsMin = setup.pick([3, 10, 50, 20_000, 20_000])
        configuration.bulkPullPageOpsMax = setup.pick([5, 100, 10_000])
        configuration.snapshotStartOpsMin = setup.pick([1, 20, 100, 10_000, 10_000])
        // Pages of a bulk catch-up kept as sealed segments as they arrive (the default 1,000
        // leaves a simulation's short pages in the log).
        configuration.sealOnArrivalOpsMin = setup.pick([1, 3, 20, DeviceStore.sealOnArrivalOpsMin])
        self.engineConfiguration = configuration
        let seedCaps = setup.chance(0.35) ? Self.caps(for: chosenSchema, setup) : []
        self.caps = caps ?? seedCaps
        self.random = SimulationRandom(seed: seed).fork(label: 0x57E9)
        self.lifecycleRandom = SimulationRandom(seed: seed).fork(label: 0x11FE)
        self.workload = SimulationWorkload(schema: chosenSchema, random: SimulationRandom(seed: seed).fork(label: 0x3017))
        self.invariants = ServerInvariants(schema: chosenSchema)
    }

    /// Free-tier caps the server enforces for this run (realistic terminal rejections).
    static func caps(for schema: Schema, _ random: SimulationRandom) -> [FreeTierCap] {
        var caps: [FreeTierCap] = []
        for entity in schema.entities {
            guard entity.hasSoftDelete, random.chance(0.4) else { continue }
            if let owner = entity.fields.first(where: { $0.type == .id && $0.rule != .set }), random.chance(0.5) {
                caps.append(FreeTierCap(entity: entity.name, per: owner.name, maximum: random.between(1...3)))
            } else {
                caps.append(FreeTierCap(entity: entity.name, maximum: random.between(2...8)))
            }
        }
        return caps
    }

    /// Every action so far, oldest first (what `SimulationReport.traceHash` hashes).
    public var trace: [String] { log.trace }

    /// One line naming the run's configuration.
    public var configurationSummary: String {
        "schema \(schema.name), \(deviceCount) devices, \(steps) steps, push batch \(engineConfiguration.pushBatchOpsMax), "
            + "pull page \(engineConfiguration.pullPageOpsMax), bulk from \(engineConfiguration.bulkCatchUpOpsMin) "
            + "(pages \(engineConfiguration.bulkPullPageOpsMax), sealed from \(engineConfiguration.sealOnArrivalOpsMin)), snapshot start from \(engineConfiguration.snapshotStartOpsMin), "
            + "caps [\(caps.map(\.description).joined(separator: " "))], faults: \(plan)"
    }

    /// The simulation's files live under /dev/shm when there is one.
    static func scratchRoot() -> String {
        FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    }

    // MARK: - Running

    /// Runs the safety phase, then the liveness phase, then the final checks.
    /// - Throws: `SimulationFailure` when an invariant breaks.
    public func run() async throws -> SimulationReport {
        directory = "\(Self.scratchRoot())/chronicle-sim-\(seed)-\(UUID().lowercased.prefix(8))"
        defer {
            serverReader = nil
            devices.removeAll()
            server = nil
            if ProcessInfo.processInfo.environment["CHRONICLE_SIM_KEEP"] == nil {
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
        try await guarded { try self.setUp() }
        for step in 1...max(1, steps) {
            try await guarded { try await self.step(step) }
        }
        let (passes, rounds) = try await guardedValue { try await self.converge() }
        let digest = try await guardedValue { try await self.finalChecks() }
        var report = SimulationReport(
            seed: seed, schema: schema.name, devices: deviceCount, steps: steps, opsWritten: opsWritten,
            writesRefused: writesRefused, opsAccepted: log.acceptedCount, opsRejected: log.rejectedCount,
            rejectedByCode: log.rejectedByCode, faults: log.faults, compactions: compactions, segmentsSealedOnArrival: segmentsSealedOnArrival,
            snapshotsFetched: log.snapshotsFetched, syncRounds: syncRounds, opsRenumbered: opsRenumbered, rewinds: rewinds, opsLostWithServer: opsLostWithServer,
            passesToConverge: passes, roundsToConverge: rounds, serverHead: invariants.head, finalDigest: digest,
            traceHash: log.traceHash(), plan: plan, knownBugsMet: knownBugsMet)
        report.filesAdded = files.count
        report.filesFetched = filesFetched
        report.devicesJoined = devicesJoined
        report.startsFromImage = startsFromImage
        return report
    }

    /// Runs `body`, turning anything it throws into a `SimulationFailure` that says where.
    func guarded(_ body: () async throws -> Void) async throws {
        _ = try await guardedValue { try await body(); return 0 }
    }

    func guardedValue<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let failure as SimulationFailure {
            throw failure
        } catch let violation as Violation {
            throw failure(violation.invariant, violation.detail)
        } catch {
            throw failure("the simulation runs without unexpected errors", sanitize("\(error)"))
        }
    }

    func failure(_ invariant: String, _ detail: String) -> SimulationFailure {
        SimulationFailure(seed: seed, step: label, invariant: invariant, detail: detail, trace: log.tail(20),
                          configuration: configurationSummary, steps: steps, appUpdates: plan.appUpdateRate > 0, damage: plan.damageRate > 0 || plan.libraryDamageRate > 0,
                          files: plan.fileRate > 0, newDevices: plan.newDeviceRate > 0)
    }

    /// Messages may name the run's temporary directory; the trace must not (it differs per run).
    func sanitize(_ text: String) -> String {
        directory.isEmpty ? text : text.replacingOccurrences(of: directory, with: "<sim>")
    }

    func begin(_ text: String) {
        label = text
        log.begin(text)
    }

    // MARK: - Setup

    func setUp() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let serverClock = SimulatedClock(time: time, offsetMilliseconds: random.between64(-120_000, 120_000))
        var limits = ServiceLimits()
        limits.freeTierCaps = caps
        // Its devices push one batch at a time (`SimulatedDevice`), so a gap is never filled by a
        // push in flight: refuse it at once, as the seeds' traces were recorded.
        limits.pushGapWaitMilliseconds = 0
        // The server's own compaction (its passes run in place of some compactions, below), from the
        // lifecycle stream so the seed's other choices stay as they were.
        var maintenance = MaintenancePolicy()
        maintenance.compaction?.keepOps = lifecycleRandom.pick([0, 5, 20])
        maintenance.compaction?.segmentOpsMax = lifecycleRandom.pick([3, 10])
        maintenance.compaction?.horizonMilliseconds = lifecycleRandom.chance(0.3) ? lifecycleRandom.pick([60_000, 3_600_000]) : nil
        maintenance.horizonCheckSeconds = 0
        maintenance.compaction?.snapshotEveryOps = lifecycleRandom.pick([nil, 1, 10, 40])
        // Devices that sign in mid-run start from a start image, built after every compaction.
        if plan.newDeviceRate > 0 { maintenance.startImageOpsMin = 1 }
        // With app updates in the plan, the server too starts as the build before (and is updated first).
        serverOnOldApp = previousSchema != nil
        server = try SimulatedServer(directory: directory + "/server", clock: serverClock, limits: limits, maintenance: maintenance,
                                     schemas: previousSchema.map { [$0] } ?? [])
        let user = try server.service.accounts.addUser("sim", password: Self.password, schema: schema, libraryID: random.uuid())
        libraryID = user.libraryID
        log.record("server up; library \(libraryID.lowercased.prefix(8)); \(configurationSummary)")
        for index in 0..<deviceCount {
            devices.append(try makeDevice(index: index, name: "d\(index)", plan: plan, onPreviousApp: index % 2 == 1))
        }
        try openServerReader()
    }

    /// A read-only connection to the server's library file (its projection, read by the checks).
    func openServerReader() throws {
        var options = Database.Options()
        options.readOnly = true
        let library = try server.service.library(libraryID)   // creates the library's file
        serverReader = try Database(path: library.path, options: options)
    }

    /// The workload of the app version `device` runs (the same random stream).
    func workload(for device: SimulatedDevice) -> SimulationWorkload {
        device.schema.fingerprint == schema.fingerprint ? workload : SimulationWorkload(schema: device.schema, random: workload.random)
    }

    /// Devices still on the app's previous version.
    var devicesOnAnOldApp: [SimulatedDevice] { devices.filter { $0.schema.fingerprint != schema.fingerprint } }

    /// With app updates in the plan: the schema's previous version, which the server and every
    /// other device start on.
    var previousSchema: Schema? {
        plan.appUpdateRate > 0 && schema.version > 1 ? Schema.named(schema.name, version: schema.version - 1) : nil
    }

    /// The server is updated to the run's schema version (it restarts and migrates the library).
    func updateServer() throws {
        log.fault(.appUpdated, "the server updates: \(schema.name) v\(schema.version - 1) → v\(schema.version)")
        try server.update(schemas: [])
        serverOnOldApp = false
        if let carried = try server.service.library(libraryID).stateCarriedOverAt {
            log.record("the server carried its state over from its snapshot (new one at \(carried))")
        }
    }

    /// `device`'s app is updated to the run's schema version, and its store checked.
    func updateApp(_ device: SimulatedDevice) throws {
        log.fault(.appUpdated, "\(device.name) updates the app: \(device.schema.name) v\(device.schema.version) → v\(schema.version)")
        try device.updateApp(to: schema)
        if !(try device.store.unreadableOps().isEmpty) {
            throw Violation("an updated app reads every op its schema knows", "\(device.name) still sets aside \(try device.store.unreadableOps().map(\.type))")
        }
    }

    /// A new device signed in to the library, with its clock skewed as the seed says.
    /// `onPreviousApp`: on the schema's previous version, where the plan has app updates.
    /// `startImages`: whether its first round may take the server's start image.
    func makeDevice(index: Int, name: String, plan: FaultPlan, onPreviousApp: Bool = false, startImages: Bool = true) throws -> SimulatedDevice {
        let year: Int64 = 365 * 86_400_000
        let skew: Int64 = switch random.below(4) {
        case 0: 0
        case 1: random.between64(-600_000, 600_000)                 // minutes
        case 2: random.between64(-30 * 86_400_000, 30 * 86_400_000) // weeks
        default: random.between64(-5 * year, 5 * year)              // years
        }
        let clock = SimulatedClock(time: time, offsetMilliseconds: skew)
        let ids = SimulatedIDGenerator(random: random.fork(label: 0x1D5 &+ UInt64(index)))
        let deviceID = random.uuid()
        // With app updates in the plan, every other device starts on the app's previous version.
        let previous = onPreviousApp ? previousSchema : nil
        let store = try DeviceStore.create(at: "\(directory)/\(name).chronicle", schema: previous ?? schema, libraryID: libraryID,
                                           deviceID: deviceID, clock: clock, ids: ids)
        let token = try server.service.accounts.registerDevice(user: "sim", password: Self.password, deviceID: deviceID).token
        let transport = SimulatedTransport(deviceName: name, deviceID: deviceID, library: libraryID, token: token, server: server,
                                           plan: plan, random: random.fork(label: 0x7A45 &+ UInt64(index)), log: log,
                                           snapshotStartOpsMin: engineConfiguration.snapshotStartOpsMin)
        log.record("\(name) joins (\(deviceID.lowercased.suffix(6))), clock off by \(skew / 1000) s"
                   + (previous.map { ", on the app's previous version (\($0.name) v\($0.version))" } ?? ""))
        var configuration = engineConfiguration
        configuration.startImages = startImages
        return SimulatedDevice(index: index, name: name, store: store, clock: clock, ids: ids, transport: transport,
                               configuration: configuration)
    }
}
