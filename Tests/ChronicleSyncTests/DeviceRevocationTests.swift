import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing

/// A lost phone's token revoked by the operator (`chronicle server revoke`), from another
/// process while the server runs: its next request is refused 401 and nothing else changes;
/// signed in again, it syncs what it queued meanwhile. A changed password keeps devices signed in.
@Suite struct DeviceRevocationTests {
    @Test func aDeviceRevokedBesideARunningServerIsRefusedAtOnceAndSyncsAgainAfterSigningIn() async throws {
        let h = try SyncHarness(.http)
        let a = try h.device("A")
        let b = try h.device("B")
        try Workload(seed: 81).run(40, on: a)
        #expect(await a.sync().outcome == .synced)
        #expect(await b.sync().outcome == .synced)

        // The operator's tool opens the accounts file on a connection of its own, as a second process does.
        let operatorAccounts = try Accounts(dataDirectory: h.directory + "/server")
        let listed = try operatorAccounts.devices(of: "ada")
        #expect(Set(listed.map(\.deviceID)) == [a.store.deviceID, b.store.deviceID])
        #expect(listed.allSatisfy { $0.libraryID == h.user.libraryID && $0.registeredAt > 0 })
        let revoked = try operatorAccounts.revokeDevice(a.store.deviceID)
        #expect(revoked.deviceID == a.store.deviceID && revoked.user == "ada")

        // The server checked A's token a moment ago (it is in its cache); the revocation still holds.
        try Workload(seed: 82).run(10, on: a)
        let refused = await a.engine.syncOnce()
        guard case .blocked(let reason) = refused.outcome else {
            Issue.record("a revoked device was not refused: \(refused.outcome)")
            return
        }
        #expect(reason.contains("unauthorized"), "\(reason)")
        #expect(try a.store.pendingOps().count == 10, "a revoked device keeps what it queued")
        #expect(await b.sync().outcome == .synced, "other devices are not touched")
        #expect(try operatorAccounts.devices(of: "ada").map(\.deviceID) == [b.store.deviceID])

        // Signed in again (a new token for the same store), A sends what it queued.
        let (token, _) = try h.service.accounts.registerDevice(user: "ada", password: h.password, deviceID: a.store.deviceID)
        let again = try h.device("A2", opening: a.store.path, token: token)
        #expect(await again.sync().outcome == .synced)
        #expect(await b.sync().outcome == .synced)
        try h.expectConverged()

        // Revoking a device that is not registered says so.
        #expect(throws: ChronicleError.self) { try operatorAccounts.revokeDevice(UUID()) }
        #expect(try operatorAccounts.revokeDevices(of: "ada").count == 2)
        #expect(await b.engine.syncOnce().outcome != .synced, "every device of the user is signed out")
        #expect(throws: ChronicleError.self) { try operatorAccounts.devices(of: "nobody") }
    }

    @Test func aNewPasswordIsTheOnlyOneThatSignsInAndDevicesStaySignedIn() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        let operatorAccounts = try Accounts(dataDirectory: h.directory + "/server")
        try operatorAccounts.setPassword("ada", password: "a brand new passphrase")
        #expect(throws: ProtocolError.self) {
            try h.service.accounts.registerDevice(user: "ada", password: h.password, deviceID: UUID())
        }
        _ = try h.service.accounts.registerDevice(user: "ada", password: "a brand new passphrase", deviceID: UUID())
        try Workload(seed: 83).run(5, on: a)
        #expect(await a.sync().outcome == .synced, "a device signed in before keeps its token")
        #expect(throws: ChronicleError.self) { try operatorAccounts.setPassword("ada", password: "short") }
        #expect(throws: ChronicleError.self) { try operatorAccounts.setPassword("nobody", password: "long enough words") }
    }
}
