import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// What a running server has found wrong with its own files: the accounts file
/// (`server.sqlite`), a library's file or a library's files file (`blobs/<id>.sqlite`) that
/// SQLite could not read. `/healthz` and
/// `/readyz` list them and `/metrics` counts them, so an operator and a load balancer see
/// damage without reading the request log.
///
/// A file is recorded the first time an answer or a compaction finds it damaged (and the
/// accounts file also when the server starts, where `serve` checks it). A record stays until
/// the server stops: salvaging a file or restoring a backup needs the server stopped, and a
/// file that answered one request may still have a broken page elsewhere.
///
/// ```swift
/// service.health.problems      // [] while every file read so far could be read
/// service.health.isReady       // false while the accounts file is damaged
/// ```
public final class ServerHealth: Sendable {
    /// One damaged file.
    public struct Problem: Sendable, Equatable {
        /// `accounts_damaged`, `library_damaged` or `blob_store_damaged`, the code its requests are answered with.
        public var code: String
        /// The library whose file it is; nil for the accounts file.
        public var library: UUID?
        /// The file, relative to the data directory (`server.sqlite`, `libraries/<id>.sqlite`, `blobs/<id>.sqlite`).
        public var file: String
        /// When it was first found damaged (ms since 1970).
        public var since: Int64
        /// What was found.
        public var message: String
        /// The command that keeps what can still be read, with the server stopped
        /// (`chronicle server salvage --data DIR NAME`, with `--files`, or `--accounts`); restoring a backup is
        /// the other way.
        public var action: String
    }

    private let found = Locked<[String: Problem]>([:])

    public init() {}

    /// Records `problem` unless its file is already recorded; true the first time.
    @discardableResult
    func record(_ problem: Problem) -> Bool {
        found.withLock { found in
            guard found[problem.file] == nil else { return false }
            found[problem.file] = problem
            return true
        }
    }

    /// Every damaged file found so far, the accounts file first, then by when they were found.
    public var problems: [Problem] {
        found.withLock { Array($0.values) }.sorted { a, b in
            (a.library == nil ? 0 : 1, a.since, a.file) < (b.library == nil ? 0 : 1, b.since, b.file)
        }
    }

    /// Whether the server can serve anyone: not while its accounts file is damaged (no token can
    /// be checked). A damaged library leaves the server ready: every other library is served.
    public var isReady: Bool { !problems.contains { $0.library == nil } }

    /// Whether `library`'s file has been found damaged (its files file aside).
    public func isDamaged(_ library: UUID) -> Bool {
        found.withLock { found in found.values.contains { $0.library == library && $0.code == ProtocolError.Code.libraryDamaged.rawValue } }
    }

    /// Whether `file` (relative to the data directory) has been found damaged.
    func isRecorded(_ file: String) -> Bool { found.withLock { $0[file] != nil } }

    /// Forgets what was recorded of `library`: its file was deleted.
    func forget(library: UUID) {
        found.withLock { found in found = found.filter { $0.value.library != library } }
    }

    // MARK: - Answers

    /// The body of `/healthz` (`readiness` false) and `/readyz`: `{"status":"ok"}` (`ready`)
    /// while nothing is recorded; otherwise `degraded` (`unavailable` for `/readyz` while the
    /// accounts file is damaged) and the problems.
    func body(readiness: Bool) -> [UInt8] {
        let problems = self.problems
        let status = problems.isEmpty ? (readiness ? "ready" : "ok")
            : (readiness && problems.contains { $0.library == nil } ? "unavailable" : "degraded")
        var text = #"{"status":"# + CanonicalJSON.quote(status)
        if !problems.isEmpty {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            text += #","problems":["# + problems.map { problem in
                var fields = [#""action":"# + CanonicalJSON.quote(problem.action), #""code":"# + CanonicalJSON.quote(problem.code),
                              #""file":"# + CanonicalJSON.quote(problem.file)]
                if let library = problem.library { fields.append(#""library":"# + CanonicalJSON.quote(library.lowercased)) }
                fields.append(#""message":"# + CanonicalJSON.quote(problem.message))
                fields.append(#""since":"# + CanonicalJSON.quote(formatter.string(from: Date(timeIntervalSince1970: Double(problem.since) / 1000))))
                return "{" + fields.joined(separator: ",") + "}"
            }.joined(separator: ",") + "]"
        }
        return Array((text + "}").utf8)
    }

    /// The `/metrics` lines: damaged files by kind, 0 when none.
    func renderMetrics() -> String {
        let problems = self.problems
        let accounts = problems.filter { $0.library == nil }.count
        return """
            # HELP chronicle_damaged_files Files of the server's data directory found damaged since it started (accounts: server.sqlite; library: a library's file; blobs: a library's files file).
            # TYPE chronicle_damaged_files gauge
            chronicle_damaged_files{kind="accounts"} \(accounts)
            chronicle_damaged_files{kind="library"} \(problems.filter { $0.code == ProtocolError.Code.libraryDamaged.rawValue }.count)
            chronicle_damaged_files{kind="blobs"} \(problems.filter { $0.code == ProtocolError.Code.blobStoreDamaged.rawValue }.count)

            """
    }
}

extension SyncService {
    /// Records that a request or a compaction found a file damaged (`code`: `accounts_damaged`,
    /// `library_damaged` or `blob_store_damaged`), and logs it once, as `file_damaged`, with what
    /// to do about it.
    func noteDamaged(code: ProtocolError.Code, library: UUID?, message: String) {
        let files = code == .blobStoreDamaged
        let file = library.map { files ? "blobs/\($0.lowercased).sqlite" : "libraries/\($0.lowercased).sqlite" } ?? "server.sqlite"
        guard !health.isRecorded(file) else { return }
        let action: String
        if let library {
            // The owner's name, where the accounts can still be read.
            let owner = (try? accounts.libraries())?.first { $0.libraryID == library }?.name
            action = "chronicle server salvage --data \(dataDirectory) \(owner ?? "NAME")" + (files ? " --files" : "")
        } else {
            action = "chronicle server salvage --data \(dataDirectory) --accounts"
        }
        let problem = ServerHealth.Problem(code: code.rawValue, library: library, file: file, since: clock.nowMilliseconds(), message: message,
                                           action: action)
        guard health.record(problem) else { return }
        var fields: [String: Value] = ["code": .text(code.rawValue), "file": .text((dataDirectory as NSString).appendingPathComponent(file)),
                                       "message": .text(message), "action": .text(action)]
        if let library { fields["library"] = .text(library.lowercased) }
        log.log("file_damaged", fields)
    }

    /// Checks the accounts file (small: users and devices) as the server starts, so that a
    /// damaged one shows in `/readyz` before the first request fails on it.
    public func checkAccountsAtStart() {
        let check = accounts.verify()
        if !check.passed { noteDamaged(code: ProtocolError.Code.accountsDamaged, library: nil, message: check.detail) }
    }
}
