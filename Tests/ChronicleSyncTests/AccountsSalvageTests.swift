import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore
import ChronicleTesting

/// A server's accounts file (`server.sqlite`: users, their libraries, devices' registrations)
/// damaged: requests are answered 503 `accounts_damaged` (never a 401 that would sign devices
/// out, never a 500), and `Accounts.salvage` keeps every row that can still be read.
@Suite struct AccountsSalvageTests {
    typealias Pages = SalvageTests.Pages

    static func accountsPath(_ h: SyncHarness) -> String { h.directory + "/server/server.sqlite" }

    @Test func aDamagedAccountsFileIsAnswered503AndTheDevicesSignInAgainAfterSalvage() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 61).run(40, on: a)
        #expect(await a.sync().outcome == .synced)
        let path = Self.accountsPath(h)
        try Pages.checkpoint(path)
        try Pages.damage(page: try Pages.rootPage(of: "devices", in: path), in: path)

        // A server started on the damaged file: the device's token cannot be checked, and it is
        // told to wait, not that it was signed out; it keeps what it queued.
        let damaged = try SyncService(dataDirectory: h.directory + "/server", maintenance: .off)
        let engine = SyncEngine(store: a.store, transport: InMemoryTransport(endpoint: damaged, library: h.user.libraryID, token: a.token),
                                configuration: { var c = SyncEngine.Configuration(); c.backoffBaseMilliseconds = 1; c.backoffMaxMilliseconds = 2; return c }(),
                                random: { 0.5 })
        try Workload(seed: 62).run(5, on: a)
        let round = await engine.syncOnce()
        guard case .offline(let reason) = round.outcome else {
            Issue.record("a damaged accounts file is not a refusal: \(round.outcome)")
            return
        }
        #expect(reason.contains(ProtocolError.Code.accountsDamaged.rawValue), "\(reason)")
        #expect(round.retries == 0, "a Retry-After longer than backoff ever waits ends the round at once")
        #expect(try a.store.pendingOps().count == 5)
        do {
            _ = try damaged.accounts.registerDevice(user: "ada", password: h.password, deviceID: UUID())
            Issue.record("a device was registered in a damaged accounts file")
        } catch {
            #expect(error.status == 503 && error.code == ProtocolError.Code.accountsDamaged && error.retryAfterSeconds != nil, "\(error)")
        }
        let check = damaged.accounts.verify()
        #expect(!check.passed && check.detail.contains("salvage --data") && check.detail.contains("--accounts"), "\(check)")
        // Only the devices' pages are damaged: the users still read.
        #expect(try damaged.accounts.user("ada") != nil && damaged.accounts.libraries().count == 1)

        // Salvaged: the user and her library are kept, the registrations are not.
        let report = try Accounts.salvage(dataDirectory: h.directory + "/server")
        #expect(report.usersKept == 1 && report.devicesKept == 0 && report.unowned.isEmpty && !report.lostNothing, "\(report)")
        #expect(try #require(report.tables.first { $0.name == "devices" }).lostWhole)
        #expect(FileManager.default.fileExists(atPath: report.damagedPath))

        let service = try SyncService(dataDirectory: h.directory + "/server", maintenance: .off)
        #expect(service.accounts.verify().passed)
        let signedOut = await SyncEngine(store: a.store, transport: InMemoryTransport(endpoint: service, library: h.user.libraryID, token: a.token),
                                         random: { 0.5 }).syncOnce()
        guard case .blocked = signedOut.outcome else {
            Issue.record("a registration the salvage lost is a sign-in again: \(signedOut.outcome)")
            return
        }
        let (token, _) = try service.accounts.registerDevice(user: "ada", password: h.password, deviceID: a.store.deviceID)
        let back = await SyncEngine(store: a.store, transport: InMemoryTransport(endpoint: service, library: h.user.libraryID, token: token),
                                    random: { 0.5 }).syncOnce()
        #expect(back.outcome == .synced && back.pushed == 5)
        let ops = try service.library(h.user.libraryID).allOps()
        #expect(ops.count == 45 && ops.map(\.deviceSeq) == Array(1...45))
        #expect(try a.store.digest() == (try service.library(h.user.libraryID).digest()))
    }

    @Test func aBrokenLeafOfUsersLosesOnlyItsUsersAndTheirLibrariesAreListed() throws {
        let h = try SyncHarness(.inMemory)
        let data = h.directory + "/server"
        let path = Self.accountsPath(h)
        // 1,500 more users, each with a device and a library file of its own, written straight
        // into the file (a password hash costs tens of milliseconds).
        var users: [String: (library: String, device: String)] = [:]
        try FileManager.default.createDirectory(atPath: data + "/libraries", withIntermediateDirectories: true)
        try {
            let db = try Database(path: path)
            let hash = try #require(try db.scalarText("SELECT password_hash FROM users WHERE name = 'ada'"))
            try db.transaction { db in
                for i in 0..<1_500 {
                    let name = String(format: "user-%04d", i), library = UUID().lowercased, device = UUID().lowercased
                    users[name] = (library, device)
                    try db.execute("INSERT INTO users(name, password_hash, library_id, schema_name, created_at) VALUES (?1, ?2, ?3, 'readitlater', 0)",
                                   [.text(name), .text(hash), .text(library)])
                    try db.execute("INSERT INTO devices(device_id, user_name, library_id, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, 0)",
                                   [.text(device), .text(name), .text(library), .text(String(repeating: String(format: "%04x", i), count: 16))])
                    _ = FileManager.default.createFile(atPath: data + "/libraries/\(library).sqlite", contents: nil)
                }
            }
            _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) }
        }()
        try Pages.damageMiddleLeaf(of: "users", in: path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))

        let dry = try Accounts.salvage(dataDirectory: data, dryRun: true)
        #expect(try dry.damagedPath.isEmpty && Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        let report = try Accounts.salvage(dataDirectory: data)
        let table = try #require(report.tables.first { $0.name == "users" })
        #expect(!table.lostWhole && !table.unreadableKeys.isEmpty, "\(table)")
        #expect(table.rowsCopied > 1_300 && table.rowsCopied < 1_501, "only the broken page's users were not read: \(table)")
        #expect(report.usersKept == dry.usersKept && report.unowned == dry.unowned)

        let kept = Set(try Accounts(dataDirectory: data).libraries().map(\.name))
        let lost = Set(users.keys).subtracting(kept)
        #expect(!lost.isEmpty && kept.count == Int(table.rowsCopied) && report.usersKept == kept.count)
        // Every lost user's library is listed, under the name its device was registered to.
        #expect(Set(report.unowned.map(\.libraryID.lowercased)) == Set(lost.map { users[$0]!.library }))
        #expect(report.unowned.allSatisfy { users[$0.formerUser ?? ""]?.library == $0.libraryID.lowercased && $0.schemaName == nil })
        #expect(report.rowsDropped == lost.count && report.devicesKept == kept.count - (kept.contains("ada") ? 1 : 0))
        #expect(!report.lostNothing)

        // The salvaged file is sound, and a lost user's library can be given back.
        let accounts = try Accounts(dataDirectory: data)
        let name = try #require(lost.sorted().first)
        let library = try #require(UUID(text: users[name]!.library))
        // An empty file is no library's: refused until it is one.
        #expect(throws: ChronicleError.self) { try accounts.checkLibraryToGiveBack(library, schema: .readItLater, dataDirectory: data) }
        if let owned = kept.sorted().first(where: { $0 != "ada" }) {
            #expect(throws: ChronicleError.self) {
                try accounts.checkLibraryToGiveBack(UUID(text: users[owned]!.library)!, schema: .readItLater, dataDirectory: data)
            }
        }
        let again = try Accounts.salvage(dataDirectory: data, dryRun: true)
        #expect(again.rowsDropped == 0 && again.tables.allSatisfy { !$0.incomplete } && again.unowned.count == lost.count)
    }

    @Test func aDeletionAskedForSurvivesASalvageOfTheAccounts() throws {
        let h = try SyncHarness(.inMemory)
        let data = h.directory + "/server"
        let gone = try h.service.accounts.addUser("gone", password: "a long password", schema: .readItLater)
        _ = try h.service.library(gone.libraryID)
        try h.service.accounts.removeUser("gone", deletingLibrary: true)
        // A request for a library a user owns cannot be made; one written by hand is dropped.
        try Database(path: Self.accountsPath(h)).execute("INSERT INTO library_deletions(library_id, requested_at) VALUES (?1, 0)",
                                                         [.text(h.user.libraryID.lowercased)])
        let report = try Accounts.salvage(dataDirectory: data)
        #expect(report.rowsDropped == 1)
        #expect(try Accounts(dataDirectory: data).pendingLibraryDeletions() == [gone.libraryID])
    }

    @Test func aFileThatIsNotAccountsIsRefusedAndLeftAsItWas() throws {
        let h = try SyncHarness(.inMemory)
        let data = h.directory + "/server"
        let path = Self.accountsPath(h)
        try Pages.checkpoint(path)
        try Pages.damage(page: 1, in: path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(throws: ChronicleError.self) { _ = try Accounts.salvage(dataDirectory: data) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try Accounts.salvage(dataDirectory: data)
            Issue.record("a file that is not SQLite was salvaged")
        } catch let error as ChronicleError {
            #expect(error.code == .notAChronicleStore, "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".salvage"))
    }
}
