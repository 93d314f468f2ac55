import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// A running sync server: the `SyncService` behind libmicrohttpd, as `chronicle serve` runs it.
///
/// ```swift
/// let server = try SyncServer(dataDirectory: "/var/lib/chronicle")   // 127.0.0.1, a free port
/// print(server.url)                                                  // http://127.0.0.1:PORT
/// server.stop()
/// ```
public final class SyncServer: Sendable {
    public let service: SyncService
    public let http: HTTPServer
    public let host: String

    public init(dataDirectory: String, configuration: HTTPServer.Configuration = HTTPServer.Configuration(),
                limits: ServiceLimits = ServiceLimits(), maintenance: MaintenancePolicy = MaintenancePolicy(),
                log: ServerLog = ServerLog(to: nil), clock: any ChronicleClock = SystemClock(), schemas: [Schema] = [],
                shared: (any SharedLibraryStore)? = nil, accounts: Accounts? = nil, extensions: [any ServerExtension] = [],
                wrapping: (@Sendable (any HTTPHandler) -> any HTTPHandler)? = nil) throws {
        let service = try SyncService(dataDirectory: dataDirectory, limits: limits, maintenance: maintenance, log: log, clock: clock,
                                      schemas: schemas, shared: shared, accounts: accounts, extensions: extensions)
        self.service = service
        host = configuration.host
        let routes = SyncRoutes(service: service)
        let handler: any HTTPHandler = wrapping?(routes) ?? routes
        http = try HTTPServer(configuration: configuration, handler: handler) { entry in
            var fields: [String: Value] = ["method": .text(entry.method), "path": .text(entry.path), "status": .integer(Int64(entry.status)),
                                           "ms": .real((entry.durationMilliseconds * 1000).rounded() / 1000),
                                           "in_bytes": .integer(Int64(entry.requestBytes)), "out_bytes": .integer(Int64(entry.responseBytes))]
            // An error's stable code, so an operator can tell accounts_damaged from shutting_down.
            if let code = entry.errorCode { fields["code"] = .text(code) }
            // The id the answer named, and what it did not say: where a person's report meets the log.
            fields["request_id"] = .text(entry.requestID)
            if let detail = entry.internalDetail { fields["detail"] = .text(detail) }
            log.log("request", fields)
        }
        var fields: [String: Value] = ["host": .text(configuration.host), "port": .integer(Int64(http.port)), "data": .text(dataDirectory),
                                       "open_libraries_max": .integer(Int64(limits.openLibrariesMax))]
        var files = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &files) == 0 { fields["open_files_max"] = .integer(Int64(files.rlim_cur)) }
        // The compaction the server will run on its own, so an operator sees it in the first lines.
        if let policy = maintenance.compaction {
            fields["compact_keep_ops"] = policy.keepOps.map(Value.integer) ?? .null
            fields["compact_keep_ms"] = policy.keepMilliseconds.map(Value.integer) ?? .null
            fields["compact_segment_ops"] = .integer(Int64(policy.segmentOpsMax))
            fields["compact_snapshot_ops"] = policy.snapshotEveryOps.map(Value.integer) ?? .null
            fields["compact_every_s"] = .real(maintenance.checkIntervalSeconds)
            fields["horizon_ms"] = policy.horizonMilliseconds.map(Value.integer) ?? .null
        } else {
            fields["compact"] = .text("off")
        }
        // What apps added to the server (an article fetcher opens connections its users' links ask for).
        fields["extensions"] = .text(extensions.isEmpty ? "none" : extensions.map(\.summary).joined(separator: "; "))
        fields["access_token_s"] = limits.accessTokenSeconds.map { .integer(Int64($0)) } ?? .text("off")
        if let shared {
            fields["order"] = .text(shared.label)
            // Pulls parked here answer as soon as another server commits to their library.
            shared.watch { [service] library in
                if let library { service.wake(library) } else { service.wakeAll() }
            }
        }
        log.log("listening", fields)
        service.checkAccountsAtStart()
        service.startMaintenance()
    }

    public var port: UInt16 { http.port }
    public var url: URL { URL(string: "http://\(host):\(http.port)")! }

    /// Stops answering requests, then stops the maintenance thread (after the compaction step it is on).
    public func stop() {
        http.stop()
        service.stopMaintenance()
        service.shared?.stopWatching()
    }
}
