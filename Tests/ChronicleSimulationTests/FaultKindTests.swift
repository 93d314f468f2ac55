import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

/// Each fault kind alone, at a high rate, on a fixed seed: the report counts it, and
/// everything still converges once it heals.
@Suite struct FaultKindTests {
    /// A rate per call (network kinds) or per step that makes the fault frequent but lets work through.
    static func rate(_ kind: FaultKind) -> Double {
        switch kind {
        case .requestDropped, .responseDropped: 0.3
        case .duplicated, .reordered: 0.5
        case .crashAfterCommit: 0.25
        case .offline, .serverRestart, .entityIDClash: 0.08
        case .opIDClash: 0.25   // often finds nothing to clash with (every device caught up)
        case .deviceCrash, .diskFull: 0.1
        case .clockJump: 0.15
        case .restoredFromBackup: 0.2   // every other one takes the backup the next restores
        case .serverRestoredFromBackup: 0.16   // every other one takes the backup the next restores
        case .appUpdated: 0.01   // d1 starts on the app's previous version and updates once
        case .storeDamaged: 0.06
        case .libraryDamaged: 0.05
        case .newDevice: 0.06
        }
    }

    /// Seed `seed` with only `kind` forced on.
    static func run(_ kind: FaultKind, seed: UInt64 = 4242, schema: Schema = .readItLater) -> Simulator {
        Simulator(seed: seed, devices: 3, schema: schema, steps: 100, faults: FaultPlan.none.forcing(kind, rate: rate(kind)),
                  tolerating: SimulationSeeds.tolerated)
    }

    @Test("A forced fault is injected, counted and survived", arguments: FaultKind.allCases)
    func faultIsSurvived(kind: FaultKind) async throws {
        let report = try #require(await SimulationSeeds.run(Self.run(kind)))
        // An app is updated once per device that started on the previous version (d1 of three).
        let least = kind == .appUpdated ? 1 : 3
        #expect(report.faults[kind, default: 0] >= least, "\(kind) injected \(report.faults[kind, default: 0]) times: \(report)")
        #expect(report.passesToConverge <= Simulator.livenessPassesMax)
        switch kind {
        case .entityIDClash: #expect(report.rejectedByCode["entity_exists", default: 0] > 0, "\(report)")
        case .opIDClash:
            // Refused for good (when the clashing create loses, its device's later edit of the
            // entity that therefore never existed is refused as unknown_entity too).
            #expect(report.rejectedByCode["op_id_conflict", default: 0] > 0, "\(report)")
        case .duplicated, .reordered, .responseDropped, .crashAfterCommit: #expect(report.opsAccepted > 0)
        case .restoredFromBackup:
            // The restored stores' new ops reused deviceSeqs the server held, and were numbered again.
            #expect(report.opsRenumbered > 0, "\(report)")
        case .serverRestoredFromBackup:
            // Devices that had synced past the backup went back to where they and the server agree.
            #expect(report.rewinds > 0, "\(report)")
        case .libraryDamaged:
            // Devices that had synced past the kept history went back and pushed their ops again.
            #expect(report.rewinds > 0, "\(report)")
        case .newDevice:
            // Some of them found a start image built after a compaction and started from it.
            #expect(report.startsFromImage > 0, "\(report)")
        default: break
        }
    }

    @Test("Merge-or-ask and counters converge under every network fault at once (field service)")
    func fieldServiceUnderStorm() async throws {
        var plan = FaultPlan.storm
        plan.opIDClashRate = 0
        let report = try #require(await SimulationSeeds.run(Simulator(seed: 77, devices: 5, schema: .fieldService, steps: 120, faults: plan,
                                                                        tolerating: SimulationSeeds.tolerated)))
        #expect(report.schema == "fieldservice")
        #expect(report.faults.count >= 6, "\(report.faults)")
    }

    /// New devices that take the start image themselves are killed after each step of the
    /// adoption in turn (the seeds pick which); each opens again as the empty store or the whole
    /// image (`Simulator.joinNewDevice`), and everything converges.
    @Test("A new device killed while taking the start image opens as the empty store or the image", arguments: [4242, 4243, 4244] as [UInt64])
    func newDeviceKilledTakingTheStartImage(seed: UInt64) async throws {
        let plan = FaultPlan.none.forcing(.newDevice, rate: 0.1).forcing(.deviceCrash, rate: 0.05)
        let simulator = Simulator(seed: seed, devices: 2, schema: .readItLater, steps: 100, faults: plan, tolerating: SimulationSeeds.tolerated)
        let report = try #require(await SimulationSeeds.run(simulator))
        let crashes = simulator.trace.filter { $0.contains("crashes while taking the start image") }
        #expect(!crashes.isEmpty, "no crash while taking the start image: \(report)")
        #expect(report.startsFromImage > 0, "\(report)")
        #expect(report.passesToConverge <= Simulator.livenessPassesMax)
    }

}
