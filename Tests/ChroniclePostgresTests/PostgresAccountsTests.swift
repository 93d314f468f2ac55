import ChronicleCore
import ChroniclePostgres
import ChronicleServer
import ChronicleStore
import Foundation
import Testing

/// Users, devices and tokens kept in PostgreSQL (`PostgresAccountsStorage`) for servers on several
/// machines: the same answers as a lone server's `server.sqlite`, one registration per device
/// across servers, and a revocation on one reaching every server's token cache.
@Suite("Accounts in PostgreSQL", .serialized)
struct PostgresAccountsTests {
    static let password = "correct horse battery staple"

    /// Each storage a test runs against: the data directory's file, and PostgreSQL.
    static func storages(_ database: TestDatabase) throws -> [Accounts] {
        [try Accounts(dataDirectory: database.directory + "/sqlite"),
         Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))]
    }

    func expectError(_ code: String, _ body: () throws -> Void, _ comment: Comment? = nil) {
        do {
            try body()
            Issue.record("expected \(code): \(comment?.rawValue ?? "")")
        } catch let error as ChronicleError {
            #expect(error.code.rawValue == code, "\(error)")
        } catch let error as ProtocolError {
            #expect(error.code.rawValue == code, "\(error)")
        } catch {
            Issue.record("expected \(code), got \(error)")
        }
    }

    @Test func bothStoragesGiveTheSameAnswers() throws {
        let database = try TestDatabase()
        var seen: [[String]] = []
        for accounts in try Self.storages(database) {
            let library = UUID(uuidString: "6d1c0d0e-3f55-4a53-9a36-0d8f2b7c1e01")!
            let ada = try accounts.addUser("ada", password: Self.password, schema: .readItLater, libraryID: library)
            _ = try accounts.addUser("bob", password: Self.password, schema: .readItLater)
            expectError("entity_exists", { _ = try accounts.addUser("ada", password: Self.password, schema: .readItLater) })
            expectError("entity_exists", { _ = try accounts.addUser("eve", password: Self.password, schema: .readItLater, libraryID: library) },
                        "a library has one user")
            expectError("invalid_value", { _ = try accounts.addUser("Not Valid", password: Self.password, schema: .readItLater) })
            #expect(try accounts.user("ada") == ada)
            #expect(try accounts.libraries().map(\.name) == ["ada", "bob"])

            let phone = UUID(), laptop = UUID()
            let first = try accounts.registerDevice(user: "ada", password: Self.password, deviceID: phone)
            let identity = try accounts.authenticate(first.token)
            #expect(identity?.deviceID == phone && identity?.libraryID == library && identity?.user == "ada")
            // Signing in again replaces the token; the old one stops at once (it was cached).
            let second = try accounts.registerDevice(user: "ada", password: Self.password, deviceID: phone)
            #expect(try accounts.authenticate(first.token) == nil)
            #expect(try accounts.authenticate(second.token)?.deviceID == phone)
            _ = try accounts.registerDevice(user: "ada", password: Self.password, deviceID: laptop)
            expectError("device_taken", { _ = try accounts.registerDevice(user: "bob", password: Self.password, deviceID: phone) })
            #expect(try accounts.authenticate(second.token)?.user == "ada", "a device taken stays its user's")
            expectError("bad_credentials", { _ = try accounts.registerDevice(user: "ada", password: "wrong password", deviceID: UUID()) })
            #expect(try Set(accounts.devices(of: "ada").map(\.deviceID)) == [phone, laptop])

            try accounts.revokeDevice(laptop)
            try accounts.setPassword("ada", password: "a new long password")
            expectError("bad_credentials", { _ = try accounts.registerDevice(user: "ada", password: Self.password, deviceID: UUID()) })
            #expect(try accounts.authenticate(second.token)?.deviceID == phone, "a new password keeps devices signed in")
            let removed = try accounts.removeUser("ada", deletingLibrary: true)
            #expect(removed.devices == 1)
            #expect(try accounts.authenticate(second.token) == nil)
            #expect(try accounts.pendingLibraryDeletions() == [library])
            expectError("library_being_deleted", { _ = try accounts.addUser("ada", password: Self.password, schema: .readItLater, libraryID: library) })
            try accounts.libraryDeleted(library)
            #expect(try accounts.pendingLibraryDeletions().isEmpty)
            expectError("invalid_value", {
                try accounts.requestLibraryDeletion(try accounts.user("bob")!.libraryID, owners: "`remove-user")
            }, "a library a user owns is not deleted")
            #expect(accounts.verify().passed)
            seen.append(try accounts.libraries().map(\.name) + accounts.devices(of: "bob").map(\.user))
        }
        #expect(seen.count == 2 && seen[0] == seen[1])
    }

    /// Two servers signing the same new device in for two users at the same moment: one gets it,
    /// the other `device_taken`, and no token ever names the other user's library.
    @Test func aDeviceSignedInThroughTwoServersAtOnceBelongsToOneUser() async throws {
        let database = try TestDatabase()
        let one = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))
        let two = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))
        let ada = try one.addUser("ada", password: Self.password, schema: .readItLater)
        let bob = try two.addUser("bob", password: Self.password, schema: .readItLater)
        for _ in 0..<12 {
            let device = UUID()
            async let a = Task.detached { try? one.registerDevice(user: "ada", password: Self.password, deviceID: device) }.value
            async let b = Task.detached { try? two.registerDevice(user: "bob", password: Self.password, deviceID: device) }.value
            let (ra, rb) = await (a, b)
            #expect((ra == nil) != (rb == nil), "exactly one registration")
            if let ra { #expect(try one.authenticate(ra.token)?.libraryID == ada.libraryID) }
            if let rb { #expect(try two.authenticate(rb.token)?.libraryID == bob.libraryID) }
        }
    }

    /// A token checked (and cached) on two servers stops working on both once an operator revokes it
    /// through a third connection: the NOTIFY reaches each server's listener.
    @Test func aRevocationReachesEveryServersCache() throws {
        let database = try TestDatabase()
        let servers = [Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo)),
                       Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))]
        let operatorAccounts = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo, listening: false))
        _ = try servers[0].addUser("ada", password: Self.password, schema: .readItLater)
        let device = UUID()
        let token = try servers[1].registerDevice(user: "ada", password: Self.password, deviceID: device).token
        // Both listeners up, and the token cached on both.
        Thread.sleep(forTimeInterval: 0.3)
        for server in servers { for _ in 0..<3 { #expect(try server.authenticate(token)?.deviceID == device) } }
        try operatorAccounts.revokeDevice(device)
        for (index, server) in servers.enumerated() {
            let deadline = Date().addingTimeInterval(10)
            while try server.authenticate(token) != nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(try server.authenticate(token) == nil, "server \(index) still takes a revoked token")
        }
    }

    /// The listening connection killed under a server (PostgreSQL restarted, a proxy timed it out):
    /// it reconnects, and a revocation made afterwards still reaches the server's cache.
    @Test func aRevocationReachesAServerWhoseListenerReconnected() throws {
        let database = try TestDatabase()
        let server = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))
        let operatorAccounts = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo, listening: false))
        _ = try server.addUser("ada", password: Self.password, schema: .readItLater)
        let device = UUID()
        let token = try server.registerDevice(user: "ada", password: Self.password, deviceID: device).token
        let pg = try database.connection()
        /// The backends listening for account changes.
        func listeners() throws -> Set<Int64> {
            let rows = try pg.execute("""
                SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN \(PostgresAccountsStorage.channel)'
                """)
            return Set(try (0..<rows.count).map { try rows.int($0, 0) })
        }
        var deadline = Date().addingTimeInterval(10)
        while try listeners().isEmpty, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let first = try listeners()
        #expect(first.count == 1)
        try pg.execute("""
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND query = 'LISTEN \(PostgresAccountsStorage.channel)'
            """)
        // Reconnected (within a second or two), and checking tokens meanwhile. (The terminated backend
        // may still be listed for a moment: a listener counts once it is another one.)
        deadline = Date().addingTimeInterval(15)
        while try listeners().subtracting(first).isEmpty, Date() < deadline {
            #expect(try server.authenticate(token)?.deviceID == device)
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(try listeners().subtracting(first).count == 1, "the listener did not reconnect")
        for _ in 0..<3 { #expect(try server.authenticate(token)?.deviceID == device) }   // cached again
        try operatorAccounts.revokeDevice(device)
        deadline = Date().addingTimeInterval(10)
        while try server.authenticate(token) != nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(try server.authenticate(token) == nil, "a revoked token still works after the listener reconnected")
    }

    /// A data directory's users and devices copied into PostgreSQL once: the same tokens and
    /// passwords work there, and copying again (a second server starting) changes nothing.
    @Test func aDataDirectorysAccountsAreCopiedOnce() throws {
        let database = try TestDatabase()
        let file = try Accounts(dataDirectory: database.directory + "/data")
        let ada = try file.addUser("ada", password: Self.password, schema: .readItLater)
        _ = try file.addUser("bob", password: Self.password, schema: .readItLater)
        let token = try file.registerDevice(user: "ada", password: Self.password, deviceID: UUID()).token
        try file.removeUser("bob", deletingLibrary: true)
        let storage = try PostgresAccountsStorage(conninfo: database.conninfo)
        let copied = try storage.copy(from: file)
        #expect(copied.users == 1 && copied.devices == 1)
        let again = try storage.copy(from: file)
        #expect(again.users == 0 && again.devices == 0)
        let shared = Accounts(storage: storage)
        #expect(try shared.libraries() == [ada])
        #expect(try shared.authenticate(token)?.libraryID == ada.libraryID)
        #expect(try shared.pendingLibraryDeletions().count == 1)
        _ = try shared.registerDevice(user: "ada", password: Self.password, deviceID: UUID())
    }

    /// PostgreSQL out of reach: a token check and a sign-in are answered 503 with a Retry-After
    /// (devices keep what they hold), never a 401 that would sign them out or a 500.
    @Test func anUnreachableDatabaseIsA503() throws {
        let database = try TestDatabase()
        let accounts = Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))
        _ = try accounts.addUser("ada", password: Self.password, schema: .readItLater)
        try database.dropNow()
        for attempt in [{ _ = try accounts.authenticate("chr_" + String(repeating: "a", count: 64)) },
                        { _ = try accounts.registerDevice(user: "ada", password: Self.password, deviceID: UUID()) }] {
            do {
                try attempt()
                Issue.record("expected a 503")
            } catch let error as ProtocolError {
                #expect(error.status == 503 && error.code == .serverStoreUnavailable && error.retryAfterSeconds != nil, "\(error)")
            }
        }
    }

    /// Access tokens in PostgreSQL: one given through a server is taken by the other; giving one
    /// sends no `NOTIFY` (no cache is dropped); a device signing in again through either stops its
    /// tokens on both.
    @Test func anAccessTokenGivenThroughOneServerIsTakenByTheOther() throws {
        let database = try TestDatabase()
        let servers = [Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo)),
                       Accounts(storage: try PostgresAccountsStorage(conninfo: database.conninfo))]
        _ = try servers[0].addUser("ada", password: Self.password, schema: .readItLater)
        let device = UUID()
        let token = try servers[1].registerDevice(user: "ada", password: Self.password, deviceID: device).token
        Thread.sleep(forTimeInterval: 0.3)   // both listeners up
        let before = try servers.map { try $0.storage.changeCount() }
        let (access, _, identity) = try servers[0].openSession(deviceToken: token, lifetimeSeconds: 600)
        #expect(identity.deviceID == device)
        for server in servers { #expect(try server.authenticate(access)?.deviceID == device) }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try servers.map { try $0.storage.changeCount() } == before, "giving a token drops no server's cache")
        let pg = try database.connection()
        #expect(try pg.execute("SELECT count(*) FROM chronicle_device_sessions").int(0, 0) == 1)

        _ = try servers[1].registerDevice(user: "ada", password: Self.password, deviceID: device)
        for (index, server) in servers.enumerated() {
            let deadline = Date().addingTimeInterval(10)
            while try server.authenticate(access) != nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            #expect(try server.authenticate(access) == nil, "server \(index) still takes the token of a device that signed in again")
        }
    }
}
