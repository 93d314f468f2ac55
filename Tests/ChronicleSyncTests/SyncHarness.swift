import ChronicleCore
import ChronicleServer
import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
import ChronicleServerStore
import ChronicleTesting

/// Which transport a shared test runs over.
enum TransportKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inMemory, http
    var testDescription: String { rawValue }
}

/// A server (in process; reached over real loopback HTTP or in memory) and any
/// number of devices signed in to one library. Scenarios read as one line each.
final class SyncHarness: @unchecked Sendable {
    let kind: TransportKind
    let directory: String
    let service: SyncService
    let http: SyncServer?
    let user: UserRecord
    let password = "correct horse battery staple"
    private(set) var devices: [String: TestDevice] = [:]

    let schema: Schema

    init(_ kind: TransportKind, limits: ServiceLimits = ServiceLimits(), maintenance: MaintenancePolicy = MaintenancePolicy(),
         schema: Schema = .readItLater, clock: any ChronicleClock = SystemClock(),
         httpConfiguration: HTTPServer.Configuration = HTTPServer.Configuration(), log: ServerLog = ServerLog(to: nil)) throws {
        self.schema = schema
        self.kind = kind
        let root = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = "\(root)/chronicle-sync-\(UUID().lowercased)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if kind == .http {
            let server = try SyncServer(dataDirectory: directory + "/server", configuration: httpConfiguration, limits: limits,
                                        maintenance: maintenance, log: log, clock: clock, schemas: [schema])
            http = server
            service = server.service
        } else {
            http = nil
            service = try SyncService(dataDirectory: directory + "/server", limits: limits, maintenance: maintenance, clock: clock,
                                      schemas: [schema])
        }
        user = try service.accounts.addUser("ada", password: password, schema: schema)
    }

    deinit {
        http?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var library: ServerLibrary { get throws { try service.library(user.libraryID) } }

    /// A new device signed in to the library.
    @discardableResult
    func device(_ name: String, schema: Schema? = nil, ids: (any IDGenerator)? = nil,
                configuration: SyncEngine.Configuration? = nil, clock: any ChronicleClock = SystemClock()) throws -> TestDevice {
        let path = "\(directory)/\(name).chronicle"
        let created = try DeviceStore.create(at: path, schema: schema ?? self.schema, libraryID: user.libraryID, deviceID: UUID(),
                                             clock: clock, ids: ids)
        let (token, _) = try service.accounts.registerDevice(user: "ada", password: password, deviceID: created.deviceID)
        return attach(name, store: created, token: token, configuration: configuration)
    }

    /// A device whose store is the file at `path` (a copy of another device's store: a backup
    /// restored, say, or an app's store opened by its next version), signed in with `token`.
    /// Opened as an app opens its store: its upkeep follows.
    @discardableResult
    func device(_ name: String, opening path: String, token: String, configuration: SyncEngine.Configuration? = nil) throws -> TestDevice {
        let store = try DeviceStore.open(at: path)
        try store.performUpkeep()
        return attach(name, store: store, token: token, configuration: configuration)
    }

    private func attach(_ name: String, store created: DeviceStore, token: String, configuration: SyncEngine.Configuration?) -> TestDevice {
        let transport: any SyncTransport
        var memory: InMemoryTransport?
        switch kind {
        case .inMemory:
            let t = InMemoryTransport(endpoint: service, library: user.libraryID, token: token)
            memory = t
            transport = t
        case .http:
            transport = HTTPTransport(baseURL: http!.url, library: user.libraryID, token: token, requestTimeoutSeconds: 10)
        }
        var config = configuration ?? SyncEngine.Configuration()
        if configuration == nil {
            config.backoffBaseMilliseconds = 5
            config.backoffMaxMilliseconds = 50
        }
        let device = TestDevice(name: name, store: created, transport: transport, memory: memory, token: token,
                                engine: SyncEngine(store: created, transport: transport, configuration: config, random: { 0.5 }))
        devices[name] = device
        return device
    }

    /// Every device's digest, the server's, and each device's replay from its own log agree.
    func expectConverged(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let serverDigest = try library.digest()
        for device in devices.values {
            #expect(try device.store.digest() == serverDigest, "\(device.name) differs from the server", sourceLocation: sourceLocation)
            #expect(try device.store.replayDigest() == serverDigest, "\(device.name)'s rebuild differs", sourceLocation: sourceLocation)
            #expect(try device.store.pendingOps().isEmpty, "\(device.name) still has queued ops", sourceLocation: sourceLocation)
        }
        // Nothing applied twice: every op id once in the server log, serverSeq gap-free.
        let ops = try library.allOps()
        #expect(Set(ops.map(\.opID)).count == ops.count, sourceLocation: sourceLocation)
        // Gap-free from where the server's history begins (1, or after a retention horizon).
        let first = ops.first?.serverSeq ?? 1
        let gapFree = ops.enumerated().allSatisfy { $0.element.serverSeq == first + Int64($0.offset) }
        #expect(gapFree, "server log has a gap", sourceLocation: sourceLocation)
        if let last = ops.last { #expect(last.serverSeq == (try library.head), sourceLocation: sourceLocation) }
    }
}

/// One device: its store, transport and engine.
struct TestDevice: Sendable {
    let name: String
    let store: DeviceStore
    let transport: any SyncTransport
    /// Set for the in-memory transport, to inject faults.
    let memory: InMemoryTransport?
    let token: String
    let engine: SyncEngine

    @discardableResult
    func sync(sourceLocation: SourceLocation = #_sourceLocation) async -> SyncReport {
        let report = await engine.syncOnce()
        #expect(report.outcome == .synced, "\(name): \(report.outcome)", sourceLocation: sourceLocation)
        return report
    }

    @discardableResult
    func save(_ title: String, url: String? = nil) throws -> UUID {
        try store.write("article.save", payload: ["url": .text(url ?? "https://example.com/\(UUID().lowercased)"), "title": .text(title)]).entityID
    }

    func title(_ id: UUID) throws -> String? { try store.row(id)?["title"]?.textValue }

    func tags(_ id: UUID) throws -> [String] {
        try store.row(id)?.sets.first { $0.name == "tags" }?.values.compactMap(\.textValue) ?? []
    }
}

/// Ids from a list first, then random: two devices that "make" the same id.
final class ScriptedIDs: IDGenerator, @unchecked Sendable {
    private let lock = NSLock()
    private var queue: [UUID]
    init(_ first: [UUID]) { queue = first }
    func makeUUID() -> UUID {
        lock.lock()
        defer { lock.unlock() }
        return queue.isEmpty ? UUID() : queue.removeFirst()
    }
}

/// A random workload of every op type over what the device can see, seeded.
struct Workload {
    let rng: SeededIDGenerator
    init(seed: UInt64) { rng = SeededIDGenerator(seed: seed) }

    func roll(_ n: Int) -> Int { Int(rng.next() % UInt64(n)) }

    /// Writes `count` random ops on `device`; ops the store refuses (deleted rows…) are skipped.
    /// Returns how many were written.
    @discardableResult
    func run(_ count: Int, on device: TestDevice) throws -> Int {
        let words = ["offline", "tunnel", "plane", "swift", "merge", "ünïcode", "🎉", "log"]
        let schema = device.store.schema
        var written = 0
        var attempts = 0
        while written < count && attempts < count * 20 {
            attempts += 1
            let spec = schema.ops[roll(schema.ops.count)]
            if spec.type == "article.parsed" || spec.type == "library.plan" { continue }   // server-authored
            let entity = schema.entity(spec.entity)!
            var target: UUID?
            if spec.action != .create {
                let rows = try device.store.rows(entity.name, includeDeleted: true, limit: 50)
                guard !rows.isEmpty else { continue }
                target = UUID(text: rows[roll(rows.count)].id)
            }
            var payload = Payload()
            var ok = true
            for name in spec.fields where spec.required.contains(name) || roll(2) == 0 {
                let field = entity.field(name)!
                switch field.type {
                case .url: payload[name] = .text("https://example.com/\(words[roll(words.count)])/\(roll(1000))")
                case .text:
                    if let allowed = field.enumValues { payload[name] = .text(allowed[roll(allowed.count)]) }
                    else { payload[name] = .text("\(words[roll(words.count)]) \(words[roll(words.count)])") }
                case .integer, .timestamp: payload[name] = .integer(Int64(roll(1000)))
                case .real: payload[name] = .real(field.maximum == 1 ? Double(roll(101)) / 100 : Double(roll(3600)))
                case .boolean: payload[name] = .bool(roll(2) == 0)
                case .id:
                    let rows = try device.store.rows(field.references!, limit: 50)
                    if rows.isEmpty { ok = false } else { payload[name] = .text(rows[roll(rows.count)].id) }
                }
            }
            if let key = spec.valueKey {
                if spec.action == .increment { payload[key] = .integer(Int64(roll(10)) - 5) }
                else if entity.field(spec.field!)!.type == .id {
                    let rows = try device.store.rows("article", limit: 50)
                    if rows.isEmpty { ok = false } else { payload[key] = .text(rows[roll(rows.count)].id) }
                } else { payload[key] = .text(words[roll(4)]) }
            }
            if spec.action == .set && payload.isEmpty, let first = spec.fields.first, let field = entity.field(first), field.type == .text,
               field.enumValues == nil {
                payload[first] = .text(words[roll(words.count)])
            }
            guard ok else { continue }
            if (try? device.store.write(spec.type, entity: target, payload: payload)) != nil { written += 1 }
        }
        return written
    }
}
