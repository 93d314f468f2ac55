/// How often each fault happens in one run. Each seed picks its own plan
/// (`FaultPlan.random(seed:)`): some seeds are calm, some are storms, and most
/// leave some fault kinds out entirely, so failures point at combinations.
///
/// Network rates apply per transport call; the others per simulation step.
///
/// ```swift
/// var plan = FaultPlan.none
/// plan.responseDropRate = 0.5          // every other answer lost after the server committed
/// let report = try await Simulator(seed: 7, faults: plan).run()
/// ```
public struct FaultPlan: Sendable, Equatable, CustomStringConvertible {
    /// Per call: the request never reaches the server.
    public var requestDropRate = 0.0
    /// Per call: the server acts, the answer is lost.
    public var responseDropRate = 0.0
    /// Per push: delivered twice.
    public var duplicateRate = 0.0
    /// Per push: an older push of this device is retransmitted first.
    public var reorderRate = 0.0
    /// Per call: the device crashes at this call (before it is sent).
    public var crashDuringSyncRate = 0.0
    /// Per push: the device crashes right after the server committed it.
    public var crashAfterCommitRate = 0.0

    /// Per step: the acting device goes offline (for `offlineStepsMax` steps at most).
    public var offlineRate = 0.0
    public var offlineStepsMax = 60
    /// Per step: the acting device crashes between actions.
    public var crashRate = 0.0
    /// Per step: the server restarts.
    public var serverRestartRate = 0.0
    /// Per step: two devices create the same entity id.
    public var entityIDClashRate = 0.0
    /// Per step: a device reuses another device's op id.
    public var opIDClashRate = 0.0
    /// Per step: the acting device's disk fills up (or, when full, is freed).
    public var diskFullRate = 0.0
    /// Per step: the acting device's clock jumps.
    public var clockJumpRate = 0.0
    /// Per step: the acting device's store is backed up (when it has no backup) or replaced by
    /// its backup (when it has one).
    public var restoreRate = 0.0
    /// Per step: the server's data directory is backed up (when it has no backup) or replaced by
    /// its backup (when it has one).
    public var serverRestoreRate = 0.0
    /// Per step: a device still on the app's previous version updates. Above zero, every other
    /// device (d1, d3, …) starts on that version; the liveness phase updates those left. Never
    /// drawn by `random(seed:)` (the seeds' histories stay as they were): runs ask for it.
    public var appUpdateRate = 0.0
    /// Per step: a page of the acting device's store is damaged and the store salvaged. Never
    /// drawn by `random(seed:)` either: runs ask for it.
    public var damageRate = 0.0
    /// Per step: a page of the server's library file is damaged and the library salvaged. Never
    /// drawn by `random(seed:)` either.
    public var libraryDamageRate = 0.0
    /// Per step: the acting device adds a file (a blob) and names it in an op, or fetches a file
    /// another device added. Work rather than a fault, but drawn like one: never by
    /// `random(seed:)` (the seeds' histories stay as they were); runs ask for it.
    public var fileRate = 0.0
    /// Per step: a new device signs in and syncs at once. The server then builds a start image
    /// after each compaction (`MaintenancePolicy.startImageOpsMin` 1), for the new devices to start
    /// from. Never drawn by `random(seed:)` either: runs ask for it.
    public var newDeviceRate = 0.0

    public init() {}

    /// No faults at all.
    public static let none = FaultPlan()

    /// The plan seed `seed` runs under: each rate is either off or drawn from its own range.
    public static func random(seed: UInt64) -> FaultPlan {
        let random = SimulationRandom(seed: seed).fork(label: 0xFA17)
        func rate(_ on: Double, _ high: Double) -> Double { random.chance(on) ? random.unit() * high : 0 }
        var plan = FaultPlan()
        plan.requestDropRate = rate(0.7, 0.3)
        plan.responseDropRate = rate(0.7, 0.3)
        plan.duplicateRate = rate(0.5, 0.3)
        plan.reorderRate = rate(0.5, 0.3)
        plan.crashDuringSyncRate = rate(0.4, 0.05)
        plan.crashAfterCommitRate = rate(0.5, 0.1)
        plan.offlineRate = rate(0.6, 0.08)
        plan.offlineStepsMax = random.between(5...120)
        plan.crashRate = rate(0.6, 0.05)
        plan.serverRestartRate = rate(0.5, 0.03)
        plan.entityIDClashRate = rate(0.5, 0.03)
        plan.opIDClashRate = rate(0.5, 0.03)
        plan.diskFullRate = rate(0.4, 0.04)
        plan.clockJumpRate = rate(0.6, 0.05)
        // Drawn last, so every earlier rate of a seed's plan stays as it was.
        plan.restoreRate = rate(0.3, 0.03)
        plan.serverRestoreRate = rate(0.25, 0.02)
        return plan
    }

    /// This plan with one fault kind at `rate` (per call or per step, as the kind counts).
    public func forcing(_ kind: FaultKind, rate: Double) -> FaultPlan {
        var plan = self
        switch kind {
        case .requestDropped: plan.requestDropRate = rate
        case .responseDropped: plan.responseDropRate = rate
        case .duplicated: plan.duplicateRate = rate
        case .reordered: plan.reorderRate = rate
        case .offline: plan.offlineRate = rate
        case .deviceCrash: plan.crashRate = rate; plan.crashDuringSyncRate = rate / 4
        case .crashAfterCommit: plan.crashAfterCommitRate = rate
        case .serverRestart: plan.serverRestartRate = rate
        case .entityIDClash: plan.entityIDClashRate = rate
        case .opIDClash: plan.opIDClashRate = rate
        case .diskFull: plan.diskFullRate = rate
        case .clockJump: plan.clockJumpRate = rate
        case .restoredFromBackup: plan.restoreRate = rate
        case .serverRestoredFromBackup: plan.serverRestoreRate = rate
        case .appUpdated: plan.appUpdateRate = rate
        case .storeDamaged: plan.damageRate = rate
        case .libraryDamaged: plan.libraryDamageRate = rate
        case .newDevice: plan.newDeviceRate = rate
        }
        return plan
    }

    /// Every fault kind at once, at rates that still let work through: for determinism
    /// checks and soaks.
    public static let storm: FaultPlan = {
        var plan = FaultPlan()
        plan.requestDropRate = 0.15
        plan.responseDropRate = 0.15
        plan.duplicateRate = 0.15
        plan.reorderRate = 0.15
        plan.crashDuringSyncRate = 0.02
        plan.crashAfterCommitRate = 0.05
        plan.offlineRate = 0.04
        plan.offlineStepsMax = 30
        plan.crashRate = 0.03
        plan.serverRestartRate = 0.02
        plan.entityIDClashRate = 0.02
        plan.opIDClashRate = 0.02
        plan.diskFullRate = 0.03
        plan.clockJumpRate = 0.04
        plan.restoreRate = 0.02
        plan.serverRestoreRate = 0.01
        return plan
    }()

    public var description: String {
        func f(_ x: Double) -> String { String(Int((x * 1000).rounded())) + "‰" }
        return "drop \(f(requestDropRate)) lose-answer \(f(responseDropRate)) dup \(f(duplicateRate)) reorder \(f(reorderRate)) "
            + "crash-in-sync \(f(crashDuringSyncRate)) crash-after-commit \(f(crashAfterCommitRate)) offline \(f(offlineRate))×≤\(offlineStepsMax) "
            + "crash \(f(crashRate)) server-restart \(f(serverRestartRate)) id-clash \(f(entityIDClashRate)) op-id-clash \(f(opIDClashRate)) "
            + "disk-full \(f(diskFullRate)) clock-jump \(f(clockJumpRate)) restore \(f(restoreRate)) server-restore \(f(serverRestoreRate))"
            + (appUpdateRate > 0 ? " app-update \(f(appUpdateRate))" : "") + (damageRate > 0 ? " damage \(f(damageRate))" : "")
            + (libraryDamageRate > 0 ? " library-damage \(f(libraryDamageRate))" : "")
            + (fileRate > 0 ? " files \(f(fileRate))" : "") + (newDeviceRate > 0 ? " new-device \(f(newDeviceRate))" : "")
    }
}
