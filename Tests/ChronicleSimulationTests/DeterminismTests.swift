import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

/// One seed replays one run exactly: same trace, same digest, same counts.
@Suite struct DeterminismTests {
    static func storm(_ seed: UInt64) -> Simulator {
        Simulator(seed: seed, devices: 4, steps: 80, faults: .storm, tolerating: SimulationSeeds.tolerated)
    }

    @Test("The same seed twice gives the same run")
    func sameSeedSameRun() async throws {
        let first = try #require(await SimulationSeeds.run(Self.storm(11)))
        let second = try #require(await SimulationSeeds.run(Self.storm(11)))
        #expect(first.traceHash == second.traceHash)
        #expect(first.finalDigest == second.finalDigest)
        #expect(first == second, "every count in the report repeats too")
        #expect(first.faults.count >= 6, "the storm injected many kinds of fault: \(first.faults)")
    }

    /// Broken pages are picked by their place in the table's key order, not by page number
    /// (which background work can change), so a run that damages and salvages stores replays too.
    @Test("The same seed twice gives the same run, stores damaged and salvaged")
    func sameSeedSameRunWithDamage() async throws {
        let plan = FaultPlan.storm.forcing(.storeDamaged, rate: 0.05).forcing(.libraryDamaged, rate: 0.03)
        func run() -> Simulator { Simulator(seed: 13, devices: 4, steps: 80, faults: plan, tolerating: SimulationSeeds.tolerated) }
        let first = try #require(await SimulationSeeds.run(run()))
        let second = try #require(await SimulationSeeds.run(run()))
        #expect(first.faults[.storeDamaged, default: 0] >= 2 && first.faults[.libraryDamaged, default: 0] >= 1, "\(first.faults)")
        #expect(first.traceHash == second.traceHash)
        #expect(first.finalDigest == second.finalDigest)
        #expect(first == second)
    }

    @Test("The same seed twice gives the same run, with files")
    func sameSeedSameRunWithFiles() async throws {
        var plan = FaultPlan.storm
        plan.fileRate = 0.15
        func run() -> Simulator { Simulator(seed: 17, devices: 4, steps: 80, faults: plan, tolerating: SimulationSeeds.tolerated) }
        let first = try #require(await SimulationSeeds.run(run()))
        let second = try #require(await SimulationSeeds.run(run()))
        #expect(first.filesAdded >= 5, "\(first)")
        #expect(first.traceHash == second.traceHash)
        #expect(first == second)
    }

    /// Devices that sign in mid-run take start images the server builds (bytes of their own,
    /// untraced), some killed while they take one: what the devices then hold and do still repeats.
    @Test("The same seed twice gives the same run, with new devices starting from start images")
    func sameSeedSameRunWithNewDevices() async throws {
        let plan = FaultPlan.none.forcing(.newDevice, rate: 0.1).forcing(.deviceCrash, rate: 0.05).forcing(.requestDropped, rate: 0.1)
        func run() -> Simulator { Simulator(seed: 4242, devices: 2, schema: .readItLater, steps: 100, faults: plan, tolerating: SimulationSeeds.tolerated) }
        let first = try #require(await SimulationSeeds.run(run()))
        let second = try #require(await SimulationSeeds.run(run()))
        #expect(first.devicesJoined >= 3 && first.startsFromImage >= 1, "\(first)")
        #expect(first.traceHash == second.traceHash)
        #expect(first == second)
    }

    @Test("The seed alone decides the run, whatever the plan")
    func seedDecidesConfiguration() async throws {
        let first = Simulator(seed: 5)
        let second = Simulator(seed: 5)
        #expect(first.configurationSummary == second.configurationSummary)
        #expect(FaultPlan.random(seed: 5) == FaultPlan.random(seed: 5))
        #expect(FaultPlan.random(seed: 5) != FaultPlan.random(seed: 6))
    }

    @Test("Different seeds give different runs")
    func differentSeedsDifferentRuns() async throws {
        let first = try #require(await SimulationSeeds.run(Self.storm(11)))
        let second = try #require(await SimulationSeeds.run(Self.storm(12)))
        #expect(first.traceHash != second.traceHash)
        #expect(first.finalDigest != second.finalDigest)
    }
}
