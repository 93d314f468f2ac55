import ChronicleCore
import ChronicleServer
import ChronicleStore
import Foundation
import ChronicleServerStore

/// What `chronicle server verify --data DIR --all` checks (`verifyLibraries` in
/// Tools/chronicle/Commands+Maintenance.swift), run in process on the service under test: the
/// accounts file, and each library's file and blob files. Returns the failed checks, named.
enum ServerVerify {
    static func failures(_ service: SyncService) throws -> [String] {
        var failed: [String] = []
        let accounts = service.accounts.verify()
        if !accounts.passed { failed.append("accounts: \(accounts.name): \(accounts.detail)") }
        for user in try service.accounts.libraries() {
            let report = try service.library(user.libraryID).verify()
            failed += report.checks.filter { !$0.passed }.map { "\(user.name)'s library: \($0.name): \($0.detail)" }
            if let files = ServerBlobFiles(dataDirectory: service.dataDirectory).verify(library: user.libraryID, salvage: "-"), !files.passed {
                failed.append("\(user.name)'s blob files: \(files.name): \(files.detail)")
            }
        }
        return failed
    }
}
