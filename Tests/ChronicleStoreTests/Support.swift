import ChronicleCore
@testable import ChronicleStore
import Foundation
import Testing
import ChronicleTesting

/// A fresh store in a temporary directory, with a seeded id generator and a
/// manual clock so every run is the same.
final class Fixture {
    let directory: URL
    let store: DeviceStore
    let clock: ManualClock
    let ids: SeededIDGenerator

    init(schema: Schema = .readItLater, seed: UInt64 = 1, library: UUID? = nil) throws {
        directory = Fixture.scratchRoot.appendingPathComponent("chronicle-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        clock = ManualClock()
        ids = SeededIDGenerator(seed: seed)
        store = try DeviceStore.create(at: directory.appendingPathComponent("store.chronicle").path, schema: schema,
                                       libraryID: library, clock: clock, ids: ids)
    }

    var path: String { store.path }

    /// tmpfs when there is one: the store still fsyncs, but tests need not wait for a disk.
    static let scratchRoot: URL = FileManager.default.fileExists(atPath: "/dev/shm")
        ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Saves an article and returns its id.
    @discardableResult
    func save(_ url: String = "https://example.com/a", title: String? = nil) throws -> UUID {
        var payload: Payload = ["url": .text(url)]
        if let title { payload["title"] = .text(title) }
        return try store.write("article.save", payload: payload).entityID
    }

    func field(_ id: UUID, _ name: String) throws -> Value? { try store.row(id)?[name] }

    func tags(_ id: UUID) throws -> [String] {
        try store.row(id)?.sets.first { $0.name == "tags" }?.values.compactMap(\.textValue) ?? []
    }
}

/// Builds confirmed ops as a server would, continuing a store's log.
final class ServerLog {
    let library: UUID
    var seq: Int64 = 0
    var deviceSeqs: [UUID: Int64] = [:]
    let ids: SeededIDGenerator
    var time: Int64 = 1_780_000_000_000

    init(library: UUID, seed: UInt64 = 99) {
        self.library = library
        ids = SeededIDGenerator(seed: seed)
    }

    /// An op from another device (or the server), confirmed at the next seq.
    func op(_ type: String, entity: UUID, from device: UUID, payload: Payload = [:], deviceTime: Int64? = nil, version: Int = 1) -> Op {
        seq += 1
        time += 1000
        let deviceSeq = (deviceSeqs[device] ?? 0) + 1
        deviceSeqs[device] = deviceSeq
        return Op(opID: ids.makeUUID(), libraryID: library, deviceID: device, deviceSeq: deviceSeq, type: type, version: version,
                  entityID: entity, payload: payload, deviceTime: deviceTime ?? time, baseSeq: seq - 1,
                  serverSeq: seq, serverTime: time)
    }

    /// Confirms a device's own queued op at the next seq.
    func confirm(_ pending: Op) -> Op {
        seq += 1
        time += 1000
        var op = pending
        op.serverSeq = seq
        op.serverTime = time
        return op
    }
}

extension Fixture {
    /// A device whose store started from a snapshot at seq 6 of a library of six saved articles,
    /// with the server log that ordered them (its next op is seq 7).
    static func startedFromSnapshot(sourceSeed: UInt64, deviceSeed: UInt64) throws -> (device: Fixture, server: ServerLog) {
        let source = try Fixture(seed: sourceSeed)
        let server = ServerLog(library: source.store.libraryID)
        for i in 0..<6 {
            try source.store.applyConfirmed([server.op("article.save", entity: UUID(), from: UUID(),
                                                       payload: ["url": .text("https://e.com/\(i)"), "title": .text("T\(i)")])])
        }
        let (snapshot, _) = try source.store.read { db in
            try DeviceStore.stateSnapshot(at: 6, source: db, source.store.materializer, source.store.projection,
                                          libraryID: source.store.libraryID, progress: nil)
        }
        let device = try Fixture(seed: deviceSeed, library: source.store.libraryID)
        try device.store.bootstrap(from: snapshot)
        return (device, server)
    }
}
