import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

/// A tool more than a test: finds the smallest seed and step count that break an invariant
/// whose name contains `CHRONICLE_SIM_SEARCH`, for turning a failure into a short regression
/// test. `CHRONICLE_SIM_SEARCH=vanishes CHRONICLE_SIM_SEEDS=200 swift test --filter SeedSearch`;
/// `CHRONICLE_SIM_SEARCH_FAULT=<FaultKind>` searches runs of 3 devices with only that fault, at 8 % a step;
/// `CHRONICLE_SIM_SEARCH_BUG=<KnownBug>` tolerates every known bug but that one; `CHRONICLE_SIM_SEARCH_FROM=<n>`
/// starts at seed n.
@Suite struct SeedSearch {
    @Test(.enabled(if: SimulationSeeds.environment["CHRONICLE_SIM_SEARCH"] != nil))
    func smallestFailingRun() async {
        let wanted = SimulationSeeds.environment["CHRONICLE_SIM_SEARCH"] ?? ""
        let count = SimulationSeeds.environment["CHRONICLE_SIM_SEEDS"].flatMap { UInt64($0) } ?? 100
        let first = SimulationSeeds.environment["CHRONICLE_SIM_SEARCH_FROM"].flatMap { UInt64($0) } ?? 1
        let fault = SimulationSeeds.environment["CHRONICLE_SIM_SEARCH_FAULT"].flatMap(FaultKind.init(rawValue:))
        let bug = SimulationSeeds.environment["CHRONICLE_SIM_SEARCH_BUG"].flatMap(KnownBug.init(rawValue:))
        let tolerated = bug.map { SimulationSeeds.tolerated.subtracting([$0]) } ?? []
        var best: (seed: UInt64, steps: Int, failure: SimulationFailure)?
        for steps in [5, 10, 15, 20, 30, 40, 60, 80, 110, 150] {
            for seed in first...max(first, count) {
                let simulator = fault.map { Simulator(seed: seed, devices: 3, steps: steps, faults: FaultPlan.none.forcing($0, rate: 0.08),
                                                      tolerating: tolerated) }
                    ?? Simulator(seed: seed, steps: steps, tolerating: tolerated)
                do {
                    _ = try await simulator.run()
                } catch let failure as SimulationFailure where failure.invariant.contains(wanted) || failure.detail.contains(wanted) {
                    best = (seed, steps, failure)
                    break
                } catch {}
            }
            if best != nil { break }
        }
        if let best {
            print("smallest: seed \(best.seed), \(best.steps) steps\n\(best.failure)\n\(best.failure.configuration)")
        } else {
            print("no run failed on '\(wanted)'")
        }
    }

    /// Prints the whole trace of one run: `CHRONICLE_SIM_TRACE=<seed> CHRONICLE_SIM_SEARCH_FAULT=<kind>`.
    @Test(.enabled(if: SimulationSeeds.environment["CHRONICLE_SIM_TRACE"] != nil))
    func debugTrace() async {
        let seed = SimulationSeeds.environment["CHRONICLE_SIM_TRACE"].flatMap { UInt64($0) } ?? 1
        let fault = SimulationSeeds.environment["CHRONICLE_SIM_SEARCH_FAULT"].flatMap(FaultKind.init(rawValue:))
        let simulator = fault.map { Simulator(seed: seed, devices: 3, steps: 100, faults: FaultPlan.none.forcing($0, rate: 0.08)) }
            ?? Simulator(seed: seed)
        do { print(try await simulator.run()) } catch { print(error) }
        print(simulator.trace.joined(separator: "\n"))
    }
}
