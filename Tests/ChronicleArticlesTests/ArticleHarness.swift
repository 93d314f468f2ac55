import ChronicleArticles
import ChronicleCore
import ChronicleServer
import ChronicleServerStore
import ChronicleStore
import ChronicleSync
import Foundation
import Testing

/// A sync server over real loopback HTTP, with the article fetcher where a policy is given, and
/// devices signed in to one read-it-later library (the fetcher's tests' share of
/// `ChronicleSyncTests`' `SyncHarness`).
final class ArticleHarness: @unchecked Sendable {
    let directory: String
    let http: SyncServer
    var service: SyncService { http.service }
    let fetcher: ArticleFetcher?
    let user: UserRecord
    let password = "correct horse battery staple"
    let schema = Schema.readItLater
    private(set) var devices: [Device] = []

    /// One device: its store and the engine that syncs it over HTTP.
    struct Device: Sendable {
        let name: String
        let store: DeviceStore
        let engine: SyncEngine

        @discardableResult
        func sync(sourceLocation: SourceLocation = #_sourceLocation) async -> SyncReport {
            let report = await engine.syncOnce()
            #expect(report.outcome == .synced, "\(name): \(report.outcome)", sourceLocation: sourceLocation)
            return report
        }
    }

    /// `fetch`: the article fetcher's policy; nil: the server fetches nothing.
    init(fetch: ArticleFetchPolicy? = nil) throws {
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = "\(root)/chronicle-articles-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        fetcher = fetch.map { ArticleFetcher(policy: $0) }
        http = try SyncServer(dataDirectory: directory + "/server", schemas: [schema], extensions: fetcher.map { [$0] } ?? [])
        user = try http.service.accounts.addUser("ada", password: password, schema: schema)
    }

    deinit {
        http.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var library: ServerLibrary { get throws { try service.library(user.libraryID) } }

    /// A new device signed in to the library, syncing over HTTP.
    func device(_ name: String) throws -> Device {
        let store = try DeviceStore.create(at: "\(directory)/\(name).chronicle", schema: schema, libraryID: user.libraryID, deviceID: UUID())
        let (token, _) = try service.accounts.registerDevice(user: "ada", password: password, deviceID: store.deviceID)
        let transport = HTTPTransport(baseURL: http.url, library: user.libraryID, token: token, requestTimeoutSeconds: 10)
        var configuration = SyncEngine.Configuration()
        configuration.backoffBaseMilliseconds = 5
        configuration.backoffMaxMilliseconds = 50
        let device = Device(name: name, store: store,
                            engine: SyncEngine(store: store, transport: transport, configuration: configuration, random: { 0.5 }))
        devices.append(device)
        return device
    }

    /// Every device's digest, the server's, and each device's replay from its own log agree; the
    /// server's log holds each op once, without a gap.
    func expectConverged(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let serverDigest = try library.digest()
        for device in devices {
            #expect(try device.store.digest() == serverDigest, "\(device.name) differs from the server", sourceLocation: sourceLocation)
            #expect(try device.store.replayDigest() == serverDigest, "\(device.name)'s rebuild differs", sourceLocation: sourceLocation)
            #expect(try device.store.pendingOps().isEmpty, "\(device.name) still has queued ops", sourceLocation: sourceLocation)
        }
        let ops = try library.allOps()
        #expect(Set(ops.map(\.opID)).count == ops.count, sourceLocation: sourceLocation)
        let first = ops.first?.serverSeq ?? 1
        #expect(ops.enumerated().allSatisfy { $0.element.serverSeq == first + Int64($0.offset) }, "server log has a gap",
                sourceLocation: sourceLocation)
        if let last = ops.last { #expect(last.serverSeq == (try library.head), sourceLocation: sourceLocation) }
    }
}
