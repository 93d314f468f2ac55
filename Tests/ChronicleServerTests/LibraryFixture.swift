import ChronicleCore
import ChronicleServer
import ChronicleServerStore
@testable import ChronicleStore
import ChronicleSync
import ChronicleTesting
import Foundation
import Testing

/// A sync service (in process, no HTTP) with one user's library and devices that sync with it
/// in memory: how the server's tests fill a library with a device's real history before they
/// serve, damage or inspect its files.
final class LibraryFixture: @unchecked Sendable {
    let directory: String
    let service: SyncService
    let user: UserRecord
    let schema: Schema
    let password = "correct horse battery staple"

    /// One device: its store, the engine that syncs it, and its bearer token.
    struct Device: Sendable {
        let name: String
        let store: DeviceStore
        let engine: SyncEngine
        let token: String

        @discardableResult
        func sync(sourceLocation: SourceLocation = #_sourceLocation) async -> SyncReport {
            let report = await engine.syncOnce()
            #expect(report.outcome == .synced, "\(name): \(report.outcome)", sourceLocation: sourceLocation)
            return report
        }

        /// `count` random writes of every op type a device may write (`SimulationWorkload`),
        /// the same for the same seed.
        func write(_ count: Int, seed: UInt64) throws {
            let workload = SimulationWorkload(schema: store.schema, random: SimulationRandom(seed: seed))
            var written = 0, attempts = 0
            while written < count, attempts < count * 20 {
                attempts += 1
                guard let write = try workload.plan(on: store) else { continue }
                if (try? store.write(write.type, entity: write.entity, payload: write.payload)) != nil { written += 1 }
            }
            #expect(written == count, "\(name) wrote \(written) of \(count) ops")
        }
    }

    init(schema: Schema = .readItLater) throws {
        self.schema = schema
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = "\(root)/chronicle-server-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        service = try SyncService(dataDirectory: directory + "/server", schemas: [schema])
        user = try service.accounts.addUser("ada", password: password, schema: schema)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    var library: ServerLibrary { get throws { try service.library(user.libraryID) } }

    /// A new device signed in to the library.
    func device(_ name: String) throws -> Device {
        let store = try DeviceStore.create(at: "\(directory)/\(name).chronicle", schema: schema, libraryID: user.libraryID, deviceID: UUID())
        let (token, _) = try service.accounts.registerDevice(user: "ada", password: password, deviceID: store.deviceID)
        let transport = InMemoryTransport(endpoint: service, library: user.libraryID, token: token)
        var configuration = SyncEngine.Configuration()
        configuration.backoffBaseMilliseconds = 5
        configuration.backoffMaxMilliseconds = 50
        return Device(name: name, store: store, engine: SyncEngine(store: store, transport: transport, configuration: configuration, random: { 0.5 }),
                      token: token)
    }
}
