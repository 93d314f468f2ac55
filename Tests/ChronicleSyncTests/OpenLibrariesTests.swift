import ChronicleCore
@testable import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
import Testing
import ChronicleTesting

/// A server keeps at most `ServiceLimits.openLibrariesMax` libraries open: past it, the least
/// recently used one that nothing holds is closed (its connections and file descriptors go),
/// and opened again when next asked for. One a request still holds stays open.
@Suite(.serialized) struct OpenLibrariesTests {
    /// File descriptors this process has open.
    static func openFileCount() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    /// `count` users, each with a device holding `ops` queued ops (not synced yet).
    static func users(_ count: Int, on service: SyncService, ops: Int) throws -> [(user: UserRecord, token: String, store: DeviceStore)] {
        var made: [(UserRecord, String, DeviceStore)] = []
        for index in 0..<count {
            let user = try service.accounts.addUser("user\(index)", password: "password \(index)", schema: .readItLater)
            let path = service.dataDirectory + "/../device\(index).chronicle"
            let store = try DeviceStore.create(at: path, schema: .readItLater, libraryID: user.libraryID, deviceID: UUID())
            let (token, _) = try service.accounts.registerDevice(user: user.name, password: "password \(index)", deviceID: store.deviceID)
            for n in 0..<ops {
                try store.write("article.save", payload: ["url": .text("https://example.com/\(index)/\(n)"), "title": .text("Article \(n) of \(index)")])
            }
            made.append((user, token, store))
        }
        return made
    }

    static func sync(_ users: [(user: UserRecord, token: String, store: DeviceStore)], with service: SyncService) async {
        for user in users { #expect(await engine(user, service).syncOnce().outcome == .synced) }
    }

    /// The device's engine, in process.
    static func engine(_ user: (user: UserRecord, token: String, store: DeviceStore), _ service: SyncService) -> SyncEngine {
        SyncEngine(store: user.store, transport: InMemoryTransport(endpoint: service, library: user.user.libraryID, token: user.token),
                   random: { 0.5 })
    }

    /// A service on a temporary data directory, removed with the rig.
    final class Rig {
        let directory = NSTemporaryDirectory() + "chronicle-open-libraries-\(UUID().lowercased)"
        let service: SyncService

        init(openLibrariesMax: Int) throws {
            var limits = ServiceLimits()
            limits.openLibrariesMax = openLibrariesMax
            service = try SyncService(dataDirectory: directory + "/server", limits: limits, maintenance: .off)
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test func aServerWithManyLibrariesKeepsOnlyTheRecentOnesOpenAndServesEveryOne() async throws {
        let rig = try Rig(openLibrariesMax: 4)
        defer { withExtendedLifetime(rig) {} }
        let service = rig.service
        let users = try Self.users(24, on: service, ops: 3)
        await Self.sync(Array(users.prefix(1)), with: service)       // the device stores' own readers, opened once
        let before = try Self.openFileCount()
        await Self.sync(Array(users.dropFirst()), with: service)
        #expect(service.openLibraryCount == 4)
        // 23 more libraries served, 4 open: each closed one gave its descriptors back. Without the
        // cap every library keeps its writer and a reader open, three descriptors each: 23 × 6.
        let opened = try Self.openFileCount() - before
        #expect(opened <= 4 * 9, "\(opened) descriptors opened for 23 libraries served, 4 of them open")

        // A closed library opens again and serves all it holds; the library it pushes the oldest out of is closed.
        for (user, token, _) in users.prefix(3) {
            let page = try await service.pull(library: user.libraryID, after: 0, limit: 100, waitMilliseconds: 0, token: token)
            #expect(page.segment.ops.count == 3 && page.head == 3)
        }
        #expect(service.openLibraryCount == 4)
        for (user, _, store) in users { #expect(try service.library(user.libraryID).digest() == store.digest()) }
        #expect(service.openLibraryCount == 4)
    }

    @Test func aLibraryARequestHoldsIsNotClosedUnderIt() async throws {
        let rig = try Rig(openLibrariesMax: 2)
        defer { withExtendedLifetime(rig) {} }
        let service = rig.service
        let users = try Self.users(6, on: service, ops: 1)
        await Self.sync(users, with: service)
        let held = try service.library(users[0].user.libraryID)        // as a request holds it
        for (user, _, _) in users.dropFirst() { _ = try service.library(user.libraryID) }
        #expect(service.openLibraryCount == 2, "the held library stays open (the least recently used) beside the most recent one")
        #expect(try service.library(users[0].user.libraryID) === held, "never open twice")

        // A parked pull holds its library too; a push to it wakes the pull with the op.
        let parked = Task { try await service.pull(library: users[1].user.libraryID, after: 1, limit: 10, waitMilliseconds: 10_000, token: users[1].token) }
        try await Task.sleep(for: .milliseconds(200))
        for (user, _, _) in users.dropFirst(2) { _ = try service.library(user.libraryID) }
        try users[1].store.write("article.save", payload: ["url": .text("https://example.com/woken"), "title": .text("Woken")])
        let engine = Self.engine(users[1], service)
        _ = await engine.syncOnce()
        let page = try await parked.value
        #expect(page.segment.ops.map(\.serverSeq) == [2])
        withExtendedLifetime(held) {}
    }

    /// Eight devices of eight libraries sync at once, round after round, through a server that
    /// keeps two libraries open: libraries are closed and opened again under live pushes and
    /// pulls, and every device ends with its library's state, nothing lost or applied twice.
    @Test func librariesClosedAndOpenedUnderConcurrentSyncsLoseNothing() async throws {
        let rig = try Rig(openLibrariesMax: 2)
        defer { withExtendedLifetime(rig) {} }
        let service = rig.service
        let users = try Self.users(8, on: service, ops: 0)
        let engines = users.map { Self.engine($0, service) }
        for round in 0..<6 {
            for (index, (_, _, store)) in users.enumerated() {
                for n in 0..<5 {
                    try store.write("article.save", payload: ["url": .text("https://example.com/\(index)/\(round)/\(n)"), "title": .text("R\(round) N\(n)")])
                }
            }
            let outcomes = await withTaskGroup(of: SyncReport.Outcome.self) { group in
                for engine in engines { group.addTask { await engine.syncOnce().outcome } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.allSatisfy { $0 == .synced }, "round \(round): \(outcomes)")
        }
        for (user, _, store) in users {
            let library = try service.library(user.libraryID)
            let ops = try library.allOps()
            #expect(ops.count == 30 && Set(ops.map(\.opID)).count == 30)
            #expect(try store.pendingOps().isEmpty && store.digest() == library.digest())
        }
        #expect(service.openLibraryCount == 2)
        // Closed and opened again many times over: each of the 8 at least once a round.
        let metrics = service.renderLibraryMetrics()
        let opened = try #require(metrics.split(separator: "\n").first { $0.hasPrefix("chronicle_libraries_opened_total ") }
            .flatMap { Int($0.split(separator: " ")[1]) })
        #expect(opened >= 8 * 6, "\(metrics)")
        #expect(metrics.contains("chronicle_libraries_open 2"))
    }
}
