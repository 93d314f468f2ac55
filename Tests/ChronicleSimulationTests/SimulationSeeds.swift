import ChronicleCore
import ChronicleTesting
import Foundation
import Testing

/// Which seeds the suite runs. `CHRONICLE_SIM_SEED=<n>` runs that one seed (to replay a
/// failure); `CHRONICLE_SIM_SEEDS=<N>` runs seeds 1…N (a longer soak), or F…F+N-1 with
/// `CHRONICLE_SIM_FROM=<F>` (to soak seeds no run has tried); `CHRONICLE_SIM_STEPS=<n>`
/// lengthens each run's safety phase (a replay must use the same steps as the failing run);
/// `CHRONICLE_SIM_VERBOSE=1` prints each report (`=trace` also a failing run's whole trace);
/// `CHRONICLE_SIM_KEEP=1` keeps a failing run's files and writes its whole trace beside them (`trace.txt`);
/// `CHRONICLE_SIM_APP_UPDATES=1` runs the seeds with every other device on the app's previous
/// version until it updates mid-run (`FaultKind.appUpdated`; the default run does so for
/// `appUpdateSeeds` only); `CHRONICLE_SIM_DAMAGE=1` has devices' stores and the server's library damaged and salvaged now and
/// then (`FaultKind.storeDamaged`); `CHRONICLE_SIM_FILES=1` has devices add files, name them in
/// ops and fetch others' (`FaultPlan.fileRate`; the default run does so for `fileSeeds` only);
/// `CHRONICLE_SIM_NEW_DEVICES=1` has new devices sign in mid-run and start from the server's start
/// images (`FaultKind.newDevice`; the default run does so for `newDeviceSeeds` only);
/// `CHRONICLE_SIM_WIRE=<device name>` (`d0`…) prints every push of that device the server answered,
/// op by op with the answers, on standard error.
enum SimulationSeeds {
    static let environment = ProcessInfo.processInfo.environment

    /// Sized so the whole simulation suite takes about a minute in a debug build on two cores.
    static let defaultCount: UInt64 = 24

    /// Whether `CHRONICLE_SIM_APP_UPDATES` asks for app updates in every seed.
    static var appUpdates: Bool { environment["CHRONICLE_SIM_APP_UPDATES"] == "1" }

    /// Whether `CHRONICLE_SIM_DAMAGE` asks every seed to damage and salvage stores and the server's
    /// library (`FaultKind.storeDamaged`, `.libraryDamaged`).
    static var damage: Bool { environment["CHRONICLE_SIM_DAMAGE"] == "1" }

    /// Whether `CHRONICLE_SIM_FILES` asks every seed to add and fetch files (`FaultPlan.fileRate`).
    static var files: Bool { environment["CHRONICLE_SIM_FILES"] == "1" }

    /// Per step, the chance a device adds a file or fetches one (about once in 12 steps).
    static let fileRate = 0.08
    /// With files, the least chance per step that the server is backed up or restored.
    static let fileServerRestoreRate = 0.03

    /// Seeds run with files in the default suite (every run with `CHRONICLE_SIM_FILES=1`).
    static var fileSeeds: [UInt64] {
        if single != nil || environment["CHRONICLE_SIM_SEEDS"] != nil { return [] }
        return Array(1...6)
    }

    /// Whether `CHRONICLE_SIM_NEW_DEVICES` asks every seed to have devices sign in mid-run.
    static var newDevices: Bool { environment["CHRONICLE_SIM_NEW_DEVICES"] == "1" }

    /// Per step, the chance a new device signs in (about once in 30 steps).
    static let newDeviceRate = 0.03

    /// Seeds run with new devices in the default suite (every run with `CHRONICLE_SIM_NEW_DEVICES=1`).
    static var newDeviceSeeds: [UInt64] {
        if single != nil || environment["CHRONICLE_SIM_SEEDS"] != nil { return [] }
        return Array(1...4)
    }

    /// Per step, the chance a device's store is damaged and salvaged (about once in 150 steps).
    static let damageRate = 0.007
    /// Per step, the chance the server's library file is damaged and salvaged (about once in 300 steps).
    static let libraryDamageRate = 0.003

    /// Per step, the chance an old app version is updated (about once in the default 150 steps).
    static let appUpdateRate = 0.007

    /// Seeds run with app updates in the default suite (the soak's list with `CHRONICLE_SIM_APP_UPDATES=1`):
    /// the first eight, and those of 150 steps whose failures the soaks found (11, 187 and 202: an
    /// interrupted bulk apply of an old app; 498: an op of another device under the same id
    /// taken for agreement after a restore; 2575: a new app that started from the old server's
    /// snapshot at the very seq the server, once updated, carried its own state over to, kept
    /// its own carry-over, which knew less), which stay as regression tests.
    static var appUpdateSeeds: [UInt64] {
        if single != nil || environment["CHRONICLE_SIM_SEEDS"] != nil { return [] }
        return Array(1...8) + [11, 187, 202, 498, 2575]
    }

    /// Safety-phase steps per seed run.
    static var steps: Int { environment["CHRONICLE_SIM_STEPS"].flatMap { Int($0) } ?? Simulator.defaultSteps }

    /// The one seed asked for, if any.
    static var single: UInt64? { environment["CHRONICLE_SIM_SEED"].flatMap { UInt64($0) } }

    /// Seeds that show an open engine/store/server bug, with the bug in one line: left out of
    /// the seed list and kept in `RegressionTests` as known issues until fixed. (Open bugs the
    /// simulator can steer around are tolerated instead; see `tolerated`.)
    static let knownBugs: [UInt64: String] = [:]

    /// Open bugs the seed runs steer around or check differently (each has a strict reproducer
    /// in `RegressionTests`), so that they keep finding other bugs until it is fixed.
    static let tolerated: Set<KnownBug> = []   // every known bug is fixed; a regression fails its seed

    /// The seeds `SimulationSeedTests` runs.
    static var list: [UInt64] {
        if let single { return [single] }
        let count = environment["CHRONICLE_SIM_SEEDS"].flatMap { UInt64($0) } ?? defaultCount
        let first = environment["CHRONICLE_SIM_FROM"].flatMap { UInt64($0) } ?? 1
        return (first..<first + max(1, count)).filter { knownBugs[$0] == nil }
    }

    /// Every other seed of `list`, starting with its first (0) or second (1).
    static func half(_ which: Int) -> [UInt64] {
        list.enumerated().filter { $0.offset % 2 == which }.map(\.element)
    }

    /// Runs one simulation and turns a broken invariant into a test failure that says how to replay it.
    @discardableResult
    static func run(_ simulator: Simulator, sourceLocation: SourceLocation = #_sourceLocation) async -> SimulationReport? {
        do {
            let report = try await simulator.run()
            if environment["CHRONICLE_SIM_VERBOSE"] != nil {
                print(report)
                if environment["CHRONICLE_SIM_VERBOSE"] == "trace" { print(simulator.trace.joined(separator: "\n")) }
            }
            return report
        } catch let failure as SimulationFailure {
            if environment["CHRONICLE_SIM_VERBOSE"] == "trace" { print(simulator.trace.joined(separator: "\n")) }
            if environment["CHRONICLE_SIM_KEEP"] != nil {
                // The whole trace beside the files (a terminal or a pipe may not take it in one piece).
                let path = (simulator.directory as NSString).appendingPathComponent("trace.txt")
                try? simulator.trace.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
                print("files kept in \(simulator.directory), the trace in \(path)")
            }
            Issue.record("\(failure)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("seed \(simulator.seed): \(error)\nreplay: CHRONICLE_SIM_STEPS=\(simulator.steps) \(simulator.plan.appUpdateRate > 0 ? "CHRONICLE_SIM_APP_UPDATES=1 " : "")\(simulator.plan.newDeviceRate > 0 ? "CHRONICLE_SIM_NEW_DEVICES=1 " : "")CHRONICLE_SIM_SEED=\(simulator.seed) swift test --filter Simulation",
                         sourceLocation: sourceLocation)
        }
        return nil
    }
}
