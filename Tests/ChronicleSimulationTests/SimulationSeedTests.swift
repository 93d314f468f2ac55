import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

/// Seeds 1…N, each a whole run: a safety phase under the faults the seed picks, then
/// healing and convergence. Every invariant holds after every step of every seed.
///
/// Two halves, each one seed at a time, run side by side: one simulation per core, so a
/// long soak (`CHRONICLE_SIM_SEEDS=2000`) keeps a flat memory profile.
@Suite struct SimulationSeedTests {
    @Test("Odd seeds converge under their faults", .serialized, arguments: SimulationSeeds.half(0))
    func oddSeedConverges(seed: UInt64) async throws {
        try await Self.check(seed)
    }

    @Test("Even seeds converge under their faults", .serialized, arguments: SimulationSeeds.half(1))
    func evenSeedConverges(seed: UInt64) async throws {
        try await Self.check(seed)
    }

    /// The seed's own faults, and every other device on the app's previous version until it
    /// updates mid-run (`FaultKind.appUpdated`): the library is shared by two app versions.
    @Test("Seeds converge across an app update", .serialized, arguments: SimulationSeeds.appUpdateSeeds)
    func seedConvergesAcrossAnAppUpdate(seed: UInt64) async throws {
        try await Self.check(seed, appUpdates: true)
    }

    /// The seed's own faults, and files: added on devices, named in ops, uploaded through the
    /// faults, fetched by others, and every copy checked at the end.
    @Test("Seeds converge with files", .serialized, arguments: SimulationSeeds.fileSeeds)
    func seedConvergesWithFiles(seed: UInt64) async throws {
        try await Self.check(seed, files: true)
    }

    /// The seed's own faults, and new devices signing in mid-run: each starts from the server's
    /// start image where it has one (built after every compaction in these runs).
    @Test("Seeds converge with devices signing in mid-run", .serialized, arguments: SimulationSeeds.newDeviceSeeds)
    func seedConvergesWithNewDevices(seed: UInt64) async throws {
        try await Self.check(seed, newDevices: true)
    }

    static func check(_ seed: UInt64, appUpdates: Bool = SimulationSeeds.appUpdates, files: Bool = SimulationSeeds.files,
                      newDevices: Bool = SimulationSeeds.newDevices, damage: Bool = SimulationSeeds.damage) async throws {
        var faults = appUpdates ? FaultPlan.random(seed: seed).forcing(.appUpdated, rate: SimulationSeeds.appUpdateRate) : nil
        if damage {
            faults = (faults ?? FaultPlan.random(seed: seed)).forcing(.storeDamaged, rate: SimulationSeeds.damageRate)
                .forcing(.libraryDamaged, rate: SimulationSeeds.libraryDamageRate)
        }
        if files {
            // With the server restored from a backup now and then: the files it loses come back
            // from the devices that hold them.
            var plan = faults ?? FaultPlan.random(seed: seed)
            plan.fileRate = SimulationSeeds.fileRate
            faults = plan.forcing(.serverRestoredFromBackup, rate: max(plan.serverRestoreRate, SimulationSeeds.fileServerRestoreRate))
        }
        if newDevices {
            faults = (faults ?? FaultPlan.random(seed: seed)).forcing(.newDevice, rate: SimulationSeeds.newDeviceRate)
        }
        let report = try #require(await SimulationSeeds.run(Simulator(seed: seed, steps: SimulationSeeds.steps, faults: faults,
                                                                      tolerating: SimulationSeeds.tolerated)))
        #expect(report.opsWritten > 0, "seed \(seed) wrote nothing")
        #expect(report.passesToConverge <= Simulator.livenessPassesMax)
    }
}
