/// A broken invariant, found by the simulator: which seed, which step, what was
/// expected, and the last actions before it — with the command that replays it.
public struct SimulationFailure: Error, Sendable, CustomStringConvertible {
    public var seed: UInt64
    /// "step 17", "liveness pass 3", "final checks".
    public var step: String
    /// The invariant's name, e.g. "no acknowledged op lost".
    public var invariant: String
    public var detail: String
    /// The last actions before the failure, oldest first.
    public var trace: [String]
    /// The run's configuration (devices, schema, fault plan), to read beside the trace.
    public var configuration: String

    /// Safety-phase steps of the failing run (a replay needs the same number).
    public var steps: Int

    /// Whether the run had app updates (`FaultPlan.appUpdateRate`; a replay needs them too).
    public var appUpdates = false
    /// Whether the run damaged and salvaged stores or the server's library (`FaultPlan.damageRate`,
    /// `libraryDamageRate`; a replay needs that too).
    public var damage = false
    /// Whether the run added and fetched files (`FaultPlan.fileRate`; a replay needs that too).
    public var files = false
    /// Whether devices signed in mid-run (`FaultPlan.newDeviceRate`; a replay needs that too).
    public var newDevices = false

    public var replayCommand: String {
        (steps == Simulator.defaultSteps ? "" : "CHRONICLE_SIM_STEPS=\(steps) ") + (appUpdates ? "CHRONICLE_SIM_APP_UPDATES=1 " : "")
            + (damage ? "CHRONICLE_SIM_DAMAGE=1 " : "") + (files ? "CHRONICLE_SIM_FILES=1 " : "")
            + (newDevices ? "CHRONICLE_SIM_NEW_DEVICES=1 " : "")
            + "CHRONICLE_SIM_SEED=\(seed) swift test --filter Simulation"
    }

    public var description: String {
        """
        Simulation seed \(seed) failed at \(step): \(invariant)
          \(detail)
          configuration: \(configuration)
          last actions:
        \(trace.map { "    " + $0 }.joined(separator: "\n"))
          replay: \(replayCommand)
        """
    }
}

/// An invariant check's finding, before the simulator adds where and when.
struct Violation: Error {
    var invariant: String
    var detail: String
    init(_ invariant: String, _ detail: String) {
        self.invariant = invariant
        self.detail = detail
    }
}
