import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
@testable import ChronicleServerStore

/// A library's file deleted beside a running server (`chronicle server remove-user
/// --delete-library`, `server delete-library`): the operator's process asks in the accounts file,
/// and the server deletes the file once nothing holds the library, never opening it meanwhile.
@Suite struct LibraryDeletionTests {
    func files(_ h: SyncHarness, _ id: UUID) -> [String] {
        let path = Accounts.libraryPath(h.directory + "/server", id)
        return ["", "-wal", "-shm"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
    }

    @Test func aLibraryAskedToGoIsDeletedOnceNothingHoldsItAndIsNeverOpenedMeanwhile() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 91).run(30, on: a)
        #expect(await a.sync().outcome == .synced)
        let id = h.user.libraryID
        var held: ServerLibrary? = try h.service.library(id)   // as a request or a parked pull holds it
        #expect(!files(h, id).isEmpty)
        // A copy a salvage set aside holds the same person's data: it goes too. Another library's files stay.
        let setAside = Accounts.libraryPath(h.directory + "/server", id) + ".damaged-20261205T220000Z"
        let neighbour = Accounts.libraryPath(h.directory + "/server", UUID())
        for file in [setAside, neighbour] { #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8))) }

        // The operator's tool, on a connection of its own as a second process has.
        let operatorAccounts = try Accounts(dataDirectory: h.directory + "/server")
        #expect(throws: ChronicleError.self) { try operatorAccounts.requestLibraryDeletion(id, dataDirectory: h.directory + "/server") }
        try operatorAccounts.removeUser("ada", deletingLibrary: true)
        #expect(try operatorAccounts.pendingLibraryDeletions() == [id])
        do {
            _ = try operatorAccounts.addUser("ada", password: h.password, schema: .readItLater, libraryID: id)
            Issue.record("a library being deleted was given to a user")
        } catch let error as ChronicleError {
            #expect(error.code == .libraryBeingDeleted, "\(error)")
        }

        // Held: left alone, and not opened again by anyone meanwhile.
        #expect(h.service.runLibraryDeletions().isEmpty)
        #expect(files(h, id).count >= 1)
        #expect(h.service.renderLibraryMetrics().contains("chronicle_library_deletions_waiting 1"))
        held = nil
        #expect(held == nil)
        #expect(h.service.runLibraryDeletions() == [id])
        let metrics = h.service.renderLibraryMetrics()
        #expect(metrics.contains("chronicle_library_deletions_waiting 0") && metrics.contains("chronicle_libraries_deleted_total 1"), "\(metrics)")
        #expect(files(h, id).isEmpty, "the database, its log and its shared memory are gone")
        #expect(!FileManager.default.fileExists(atPath: setAside) && FileManager.default.fileExists(atPath: neighbour))
        #expect(try operatorAccounts.pendingLibraryDeletions().isEmpty)
        do {
            _ = try h.service.library(id)
            Issue.record("a deleted library was opened (and made again) by the server")
        } catch {
            #expect(error.code == .unknownLibrary)
        }
        #expect(files(h, id).isEmpty)
        #expect(await a.engine.syncOnce().outcome != .synced, "the removed user's device is refused")

        // The maintenance that saw the library's pushes passes over it, without failing on it every pass.
        h.service.maintenance.markChanged(id)
        #expect(h.service.runMaintenance().isEmpty)
        #expect(h.service.maintenance.takeChanged().isEmpty)
        #expect(h.service.runLibraryDeletions().isEmpty)
    }

    @Test func aDeletionAskedForWhileNoServerRanIsFinishedByTheNextServer() async throws {
        let directory = NSTemporaryDirectory() + "chronicle-deletion-\(UUID().lowercased)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let accounts = try Accounts(dataDirectory: directory)
        let kept = try accounts.addUser("kept", password: "a long password", schema: .readItLater)
        let gone = try accounts.addUser("gone", password: "a long password", schema: .readItLater)
        do {
            let first = try SyncServer(dataDirectory: directory)
            _ = try first.service.library(kept.libraryID)
            _ = try first.service.library(gone.libraryID)
            first.stop()
        }
        try accounts.removeUser("gone", deletingLibrary: true)
        #expect(FileManager.default.fileExists(atPath: Accounts.libraryPath(directory, gone.libraryID)))

        let server = try SyncServer(dataDirectory: directory)
        defer { server.stop() }
        let start = DispatchTime.now().uptimeNanoseconds
        while try !accounts.pendingLibraryDeletions().isEmpty, DispatchTime.now().uptimeNanoseconds - start < 60_000_000_000 {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(try accounts.pendingLibraryDeletions().isEmpty, "the server's maintenance thread finished the deletion")
        #expect(!FileManager.default.fileExists(atPath: Accounts.libraryPath(directory, gone.libraryID)))
        #expect(FileManager.default.fileExists(atPath: Accounts.libraryPath(directory, kept.libraryID)))
        #expect(try server.service.library(kept.libraryID).head == 0)
    }

    @Test func aBackupPassesOverALibraryDeletedWhileItRuns() async throws {
        let h = try SyncHarness(.inMemory)
        let a = try h.device("A")
        try Workload(seed: 93).run(20, on: a)
        #expect(await a.sync().outcome == .synced)
        let data = h.directory + "/server"
        let other = try h.service.accounts.addUser("other", password: "a long password", schema: .readItLater)
        _ = try h.service.library(other.libraryID)
        try h.service.accounts.removeUser("other", deletingLibrary: true)
        let backup = h.directory + "/backup"
        var deletedDuringBackup = false
        let report = try ServerBackup.run(dataDirectory: data, to: backup) { done, _ in
            // Once server.sqlite is copied, the server deletes the library the listing named.
            if done == 1 { deletedDuringBackup = h.service.runLibraryDeletions() == [other.libraryID] }
        }
        #expect(deletedDuringBackup)
        #expect(report.libraries == 1)
        #expect(FileManager.default.fileExists(atPath: Accounts.libraryPath(backup, h.user.libraryID)))
        #expect(!FileManager.default.fileExists(atPath: Accounts.libraryPath(backup, other.libraryID)))
        #expect(!FileManager.default.fileExists(atPath: Accounts.libraryPath(data, other.libraryID)), "the backup made nothing again")
    }

    /// Six libraries sync at once, round after round, through a server that keeps two open, while
    /// two of them are deleted: their devices are refused from then on, every other library ends
    /// whole, and nothing of a deleted library is made again.
    @Test func librariesDeletedWhileOthersSyncLeaveTheOthersWhole() async throws {
        let rig = try OpenLibrariesTests.Rig(openLibrariesMax: 2)
        defer { withExtendedLifetime(rig) {} }
        let service = rig.service
        let users = try OpenLibrariesTests.users(6, on: service, ops: 0)
        let engines = users.map { OpenLibrariesTests.engine($0, service) }
        let operatorAccounts = try Accounts(dataDirectory: service.dataDirectory)
        let doomed = Set(users.prefix(2).map(\.user.libraryID))
        for round in 0..<6 {
            for (index, (_, _, store)) in users.enumerated() {
                for n in 0..<4 {
                    try store.write("article.save", payload: ["url": .text("https://example.com/\(index)/\(round)/\(n)"), "title": .text("R\(round) N\(n)")])
                }
            }
            if round == 2 {
                for user in users.prefix(2) { try operatorAccounts.removeUser(user.user.name, deletingLibrary: true) }
            }
            let outcomes = await withTaskGroup(of: (Int, SyncReport.Outcome).self) { group in
                for (index, engine) in engines.enumerated() { group.addTask { (index, await engine.syncOnce().outcome) } }
                if round >= 2 {
                    // The server's maintenance pass, beside the syncs.
                    group.addTask { _ = service.runLibraryDeletions(); return (-1, .synced) }
                }
                return await group.reduce(into: [Int: SyncReport.Outcome]()) { $0[$1.0] = $1.1 }
            }
            for (index, outcome) in outcomes where index >= 0 {
                if round >= 2 && index < 2 {
                    #expect(outcome != .synced, "round \(round): a removed user's device was served")
                } else {
                    #expect(outcome == .synced, "round \(round), device \(index): \(outcome)")
                }
            }
        }
        #expect(service.runLibraryDeletions().isEmpty, "both were deleted during the rounds")
        #expect(try operatorAccounts.pendingLibraryDeletions().isEmpty)
        for (user, _, store) in users {
            let path = Accounts.libraryPath(service.dataDirectory, user.libraryID)
            if doomed.contains(user.libraryID) {
                #expect(!FileManager.default.fileExists(atPath: path) && !FileManager.default.fileExists(atPath: path + "-wal"))
                continue
            }
            let library = try service.library(user.libraryID)
            let ops = try library.allOps()
            #expect(ops.count == 24 && Set(ops.map(\.opID)).count == 24)
            #expect(try store.pendingOps().isEmpty && store.digest() == library.digest())
        }
    }

    @Test func verifyFlagsADeletionAskedForALibraryAUserOwns() throws {
        let h = try SyncHarness(.inMemory)
        #expect(h.service.accounts.verify().passed)
        // Only a hand-made row can ask for it: both commands refuse to.
        let db = try Database(path: h.service.accounts.path)
        try db.execute("INSERT INTO library_deletions(library_id, requested_at) VALUES (?1, 0)", [.text(h.user.libraryID.lowercased)])
        let check = h.service.accounts.verify()
        #expect(!check.passed && check.detail.contains(h.user.libraryID.lowercased) && check.detail.contains("user ada"), "\(check.detail)")
    }
}
