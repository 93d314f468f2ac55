import ChronicleCore
import Foundation

/// Work an app adds to the generic sync server: it hears of the ops each push accepts and of each
/// library opened, writes ops of its own, adds lines to `/metrics` and stops with the server.
///
/// The server knows no app's op types or entities; an extension does. The read-it-later app's
/// article fetcher (`ChronicleArticles.ArticleFetcher`) is one: it reacts to the `article.save`
/// ops a push accepted, reads the pages, and writes `article.parsed` ops back.
///
/// ```swift
/// let fetcher = ArticleFetcher(policy: ArticleFetchPolicy())
/// let server = try SyncServer(dataDirectory: dir, extensions: [fetcher])
/// ```
///
/// An extension serves one service: ``attach(to:)`` is called once, as the service is made, before
/// any other hook. It writes its ops with ``SyncService/appendServerOp(_:entity:payload:library:)``,
/// which wakes the library's parked pulls like a push. The hooks run on the server's threads, the
/// push's and the request's among them: they must return quickly, handing slow work (a fetch) to
/// threads of the extension's own. Each hook but ``attach(to:)`` has a default that does nothing.
public protocol ServerExtension: AnyObject, Sendable {
    /// A few words for the `extensions` field of the server's `listening` log line, e.g.
    /// "article fetcher".
    var summary: String { get }

    /// The service the extension works for. Keep it weakly: the service holds its extensions.
    func attach(to service: SyncService)

    /// The ops a push to `library` accepted, in the order they were pushed, each with the
    /// `serverSeq` it was given (duplicates and rejected ops are left out); called once the push
    /// has committed and its library's parked pulls are woken, on the push's thread, before the
    /// device is answered. Never called with no ops.
    func accepted(_ ops: [Op], library: UUID)

    /// `library` was opened (its first use since the server started, or since it was closed to
    /// stay under `ServiceLimits.openLibrariesMax`); called under the lock of the open libraries,
    /// so it must not open a library itself, only note it (or queue work for later).
    func opened(library: UUID)

    /// Lines to append to `/metrics` (the Prometheus text format, each line ending in a newline);
    /// "" for none.
    func metricsText() -> String

    /// The server is stopping: take no more work, and return once no op of the extension's is
    /// being written (called after the HTTP server stopped answering).
    func stop()
}

extension ServerExtension {
    public func accepted(_ ops: [Op], library: UUID) {}
    public func opened(library: UUID) {}
    public func metricsText() -> String { "" }
    public func stop() {}
}

extension SyncService {
    /// Appends an op the server writes itself (`Op.serverDeviceID`) to `library` and wakes its
    /// parked pulls: how a ``ServerExtension`` writes what it worked out (an `article.parsed`).
    /// `type` must be an op type of the library's schema; the payload is validated as
    /// server-authored (`ServerLibrary.appendServerOp`), so it may set server-only fields.
    @discardableResult
    public func appendServerOp(_ type: String, entity: UUID, payload: Payload, library id: UUID) throws -> Op {
        let op = try library(id).appendServerOp(type, entity: entity, payload: payload)
        appended(by: op)
        return op
    }

    /// The extensions' `/metrics` lines, in the order the extensions were given.
    func renderExtensionMetrics() -> String {
        extensions.map { $0.metricsText() }.joined()
    }

    /// Hands the ops of `pushed` that a push accepted (`results`, one per op) to the extensions.
    func tellExtensions(accepted results: [PushResult], of pushed: [Op], library: UUID) {
        guard !extensions.isEmpty else { return }
        let byID = Dictionary(pushed.map { ($0.opID, $0) }, uniquingKeysWith: { first, _ in first })
        var ops: [Op] = []
        for result in results {
            guard case .accepted(let seq) = result.outcome, var op = byID[result.opID] else { continue }
            op.serverSeq = seq
            ops.append(op)
        }
        guard !ops.isEmpty else { return }
        for each in extensions { each.accepted(ops, library: library) }
    }
}
