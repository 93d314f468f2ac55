import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

extension Simulator {
    /// Heals every fault, then syncs the devices round-robin until all of them show the
    /// server's state; fails if that takes more than `livenessPassesMax` full passes.
    /// - Returns: the passes and sync rounds it took.
    func converge() async throws -> (passes: Int, rounds: Int) {
        begin("liveness")
        for device in devices {
            device.transport.setPlan(.none)
            device.transport.setOffline(false)
            device.offlineUntilStep = nil
            if device.diskFullPages != nil {
                try device.store.limitFileSize(pages: nil)
                device.diskFullPages = nil
            }
        }
        log.record("every fault healed: network whole, devices online, disks freed")
        if serverOnOldApp { try updateServer() }
        for device in devicesOnAnOldApp {
            try updateApp(device)
            try checkDevice(device)
        }
        var rounds = 0
        for pass in 1...Self.livenessPassesMax {
            begin("liveness pass \(pass)")
            for device in devices {
                try await sync(device)
                rounds += 1
            }
            try checkServer(recheckWholeLog: false)
            if try lagging().isEmpty { return (pass, rounds) }
        }
        throw Violation("every device converges within \(Self.livenessPassesMax) passes after healing",
                        try lagging().joined(separator: "; "))
    }

    /// Devices that do not show the server's state yet, and why.
    func lagging() throws -> [String] {
        let library = try server.service.library(libraryID)
        let head = library.head
        let digest = try library.digest()
        var behind: [String] = []
        for device in devices {
            let state = try device.store.syncState()
            var reasons: [String] = []
            if state.unsent > 0 { reasons.append("\(state.unsent) ops unsent") }
            if state.cursor != head { reasons.append("cursor \(state.cursor) of \(head)") }
            if try device.store.digest() != digest { reasons.append("digest differs") }
            if let error = state.lastError { reasons.append("last error: \(sanitize(error))") }
            if !reasons.isEmpty { behind.append("\(device.name): " + reasons.joined(separator: ", ")) }
        }
        return behind
    }

    /// After convergence: every device passes `verify()` and kept every op it wrote; the whole
    /// log still holds; and a fresh device that pulls everything from scratch reaches the
    /// server's digest (the server's state equals a replay of its log).
    /// - Returns: the final digest.
    func finalChecks() async throws -> String {
        begin("final checks")
        excusingOpsLostByServer = false
        try checkServer(recheckWholeLog: true)
        let library = try server.service.library(libraryID)
        let digest = try library.digest()
        for device in devices {
            try checkDevice(device)
            if try device.store.digest() != digest {
                throw Violation("every device's digest equals the server's", "\(device.name) differs")
            }
        }
        // Never from a start image: this device checks that the server's log replays to its digest.
        let fresh = try makeDevice(index: devices.count, name: "fresh", plan: .none, startImages: false)
        var passes = 0
        while try fresh.store.cursor() < library.head || passes == 0 {
            passes += 1
            let report = try await sync(fresh)
            guard report.outcome == .synced, passes <= 3 else {
                throw Violation("a fresh device pulls the whole library", "after \(passes) rounds: \(describe(report))")
            }
        }
        if try fresh.store.digest() != digest {
            throw Violation("the server's digest equals a replay of its log", "a fresh device that pulled all \(library.head) ops shows another state")
        }
        try checkDevice(fresh)
        try await checkFiles(fetchingWith: fresh)
        log.record("converged on \(digest.prefix(16)) at head \(library.head)")
        return digest
    }
}
