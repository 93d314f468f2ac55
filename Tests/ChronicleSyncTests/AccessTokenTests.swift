import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import ChronicleTesting

/// Access tokens (`POST /v1/session`, `Accounts+Sessions.swift`): a device sends its device token
/// only to get one, and an expired one costs a round trip, never an op.
@Suite struct AccessTokenTests {
    /// Over real HTTP: the server's clock passes the hour, the device's next push is refused
    /// `token_expired`, the transport gets the next token and sends the push again; nothing is
    /// lost, nothing twice.
    @Test func anExpiredAccessTokenIsRenewedAndThePushGoesThrough() async throws {
        let clock = ManualClock(startMilliseconds: Int64(Date().timeIntervalSince1970 * 1000))
        let h = try SyncHarness(.http, clock: clock)
        let a = try h.device("A")
        let b = try h.device("B")
        let transport = try #require(a.transport as? HTTPTransport)
        try Workload(seed: 91).run(20, on: a)
        #expect(await a.sync().outcome == .synced)
        #expect(await transport.sessionsOpened == 1)
        #expect(await a.sync().outcome == .synced)
        #expect(await transport.sessionsOpened == 1, "the token is kept while it is good")

        // Enough ops for several batches, two pushes in flight: both are refused, and one new
        // token serves them (the transport asks once however many requests wait).
        clock.advance(milliseconds: 3_601_000)
        try Workload(seed: 92).run(1_500, on: a)
        #expect(await a.sync().outcome == .synced)
        #expect(await transport.sessionsOpened == 2)
        #expect(try a.store.pendingOps().isEmpty)
        #expect(await b.sync().outcome == .synced)
        try h.expectConverged()
        #expect(try h.library.allOps().count == 1_520)
        let metrics = h.service.metrics.render()
        #expect(metrics.contains(#"route="/v1/session""#), "\(metrics)")
    }

    /// The accounts alone: a token is refused when forged, past its expiry, after its device
    /// signed in again or was revoked; only a device token opens a session; another process on
    /// the same accounts file takes the same tokens.
    @Test func anAccessTokenIsRefusedWhenForgedExpiredReplacedOrRevoked() throws {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let directory = "\(root)/chronicle-access-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = ManualClock()
        let accounts = try Accounts(dataDirectory: directory, clock: clock)
        _ = try accounts.addUser("ada", password: "correct horse battery staple", schema: .readItLater)
        let device = UUID()
        let (deviceToken, user) = try accounts.registerDevice(user: "ada", password: "correct horse battery staple", deviceID: device)
        let (access, expiresAt, identity) = try accounts.openSession(deviceToken: deviceToken, lifetimeSeconds: 600)
        #expect(identity == DeviceIdentity(deviceID: device, libraryID: user.libraryID, user: "ada"))
        #expect(expiresAt == clock.nowMilliseconds() + 600_000)
        #expect(access.hasPrefix("chra_") && access.utf8.count == Accounts.accessTokenLength)
        #expect(try accounts.authenticate(access) == identity)
        #expect(try Accounts(dataDirectory: directory, clock: clock).authenticate(access) == identity, "another process checks it too")

        // Any other token of the shape, one digit changed or cut short, is no one's.
        var forged = Array(access.utf8)
        forged[forged.count - 1] = forged[forged.count - 1] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(try accounts.authenticate(String(decoding: forged, as: UTF8.self)) == nil)
        #expect(try accounts.authenticate(String(access.dropLast())) == nil)
        #expect(try accounts.authenticate("chra_") == nil)
        #expect(throws: ProtocolError.self, "an access token does not open a session") {
            try accounts.openSession(deviceToken: access, lifetimeSeconds: 600)
        }

        clock.advance(milliseconds: 600_000)
        do {
            _ = try accounts.authenticate(access)
            Issue.record("an expired access token was taken")
        } catch {
            #expect(error.status == 401 && error.code == ProtocolError.Code.tokenExpired)
        }

        // Signed in again: the old device token's access tokens stop, in this process at once.
        let (current, _, _) = try accounts.openSession(deviceToken: deviceToken, lifetimeSeconds: 600)
        #expect(try accounts.authenticate(current) == identity)
        let (newToken, _) = try accounts.registerDevice(user: "ada", password: "correct horse battery staple", deviceID: device)
        #expect(try accounts.authenticate(current) == nil)
        #expect(throws: ProtocolError.self) { try accounts.openSession(deviceToken: deviceToken, lifetimeSeconds: 600) }

        // Revoked by the operator's tool (another process): its access tokens stop at once too.
        let (fresh, _, _) = try accounts.openSession(deviceToken: newToken, lifetimeSeconds: 600)
        #expect(try accounts.authenticate(fresh) == identity)
        _ = try Accounts(dataDirectory: directory, clock: clock).revokeDevice(device)
        #expect(try accounts.authenticate(fresh) == nil)

        // A device holds at most `sessionsPerDeviceMax` at once: the oldest go.
        let (again, _) = try accounts.registerDevice(user: "ada", password: "correct horse battery staple", deviceID: device)
        var given: [String] = []
        for _ in 0..<(Accounts.sessionsPerDeviceMax + 2) {
            given.append(try accounts.openSession(deviceToken: again, lifetimeSeconds: 600).token)
            clock.advance(milliseconds: 1)
        }
        #expect(try given.map { try accounts.authenticate($0) != nil } == [false, false] + Array(repeating: true, count: Accounts.sessionsPerDeviceMax))
        let stored = try Database(path: directory + "/server.sqlite")
        #expect(try stored.scalarInt("SELECT count(*) FROM device_sessions") == Int64(Accounts.sessionsPerDeviceMax))
        #expect(try stored.scalarInt("SELECT count(*) FROM device_sessions WHERE token_hash LIKE 'chra_%'") == 0, "only hashes are kept")
    }

    /// `--access-token-minutes 0`: the server gives none (404), and the device sends its device
    /// token on every request. The route refuses what is not a device token.
    @Test func aServerThatGivesNoAccessTokensIsSentTheDeviceToken() async throws {
        var limits = ServiceLimits()
        limits.accessTokenSeconds = nil
        let h = try SyncHarness(.http, limits: limits)
        let a = try h.device("A")
        try Workload(seed: 93).run(10, on: a)
        #expect(await a.sync().outcome == .synced)
        #expect(await a.sync().outcome == .synced)
        #expect(await (try #require(a.transport as? HTTPTransport)).sessionsOpened == 0)
        #expect(try h.library.allOps().count == 10)
        #expect(try await Self.post(h.http!.url, bearer: a.token).status == 404)

        let on = try SyncHarness(.http)
        let b = try on.device("B")
        let answer = try await Self.post(on.http!.url, bearer: b.token)
        #expect(answer.status == 201)
        let session = try ProtocolJSON.decode(ProtocolJSON.SessionResult.self, from: answer.body, what: "session")
        #expect(session.expiresInSeconds == 3_600 && session.deviceID == b.store.deviceID.lowercased)
        #expect(try await Self.post(on.http!.url, bearer: session.accessToken).status == 401)
        #expect(try await Self.post(on.http!.url, bearer: nil).status == 401)
        #expect(try await Self.post(on.http!.url, bearer: "chr_" + String(repeating: "0", count: 64)).status == 401)
        #expect(try await Self.post(on.http!.url, bearer: String(repeating: "x", count: 5_000)).status == 401)
        var get = URLRequest(url: on.http!.url.appendingPathComponent("v1/session"))
        get.setValue("Bearer \(b.token)", forHTTPHeaderField: "Authorization")
        #expect((try await URLSession.shared.data(for: get).1 as? HTTPURLResponse)?.statusCode == 405)
    }

    static func post(_ url: URL, bearer: String?) async throws -> (status: Int, body: [UInt8]) {
        var request = URLRequest(url: url.appendingPathComponent("v1/session"))
        request.httpMethod = "POST"
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, [UInt8](data))
    }
}
