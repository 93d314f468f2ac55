import ChronicleCore
import ChronicleStore
import Dispatch
import Foundation
import ChronicleServerStore

/// Explicit limits on everything a request can ask for. Past one, a 4xx with a stable code.
public struct ServiceLimits: Sendable {
    /// Ops in one push (`too_many_ops`).
    public var pushOpsMax = 1_000
    /// Encoded size of one op inside a segment (`segment_too_large`).
    public var opBytesMax = 256 << 10
    /// Ops in one pull page; a larger `limit` is refused (`limit_too_large`).
    public var pullOpsMax = 10_000
    public var pullOpsDefault = 1_000
    /// Longest long-poll wait a pull may ask for (`wait_too_long`).
    public var waitMillisecondsMax = 60_000
    /// Threads that run the requests touching a store (pushes, pulls and the pulls a push
    /// wakes, snapshots, registrations); they wait for fsync and writers, so there are more
    /// of them than cores. Started as needed, ended when idle (`WorkerPool`).
    public var workerThreadsMax = 64
    /// Libraries kept open at once. Each open one holds SQLite connections (its writer, a
    /// checkpointer, a reader per concurrent read: three file descriptors each) and a page cache
    /// of up to `ServerLibrary.cacheKilobytes`; past this many, the least recently used one that
    /// no request is using is closed, and opened again when next asked for.
    public var openLibrariesMax = 256
    /// Limits free libraries live under (premium ones have none); empty = no caps.
    public var freeTierCaps: [FreeTierCap] = []
    /// Whether opening a library installs `freeTierCaps` in its file, in place of the cap
    /// triggers it has. False for a tool working beside a running server (`besideARunningServer`):
    /// its own empty list would drop the caps that server enforces.
    public var installsFreeTierCaps = true
    /// How long a push that would leave a gap in its device's sequence waits for the push
    /// ahead of it, before it is refused with `device_seq_gap`. A device keeps two pushes in
    /// flight (`SyncEngine.Configuration.pushRequestsInFlightMax`), and the second can reach
    /// the server first; it waits, holding no lock, until the first commits. 0: refused at once.
    public var pushGapWaitMilliseconds = 1_000
    /// How long an access token (`POST /v1/session`, `Accounts.openSession`) is good for; nil:
    /// no sessions (the route answers 404, and devices send their device token on every request).
    public var accessTokenSeconds: Int? = 3_600
    public init() {}

    /// For `chronicle server compact`, `set-plan` and `verify`, which open libraries while a
    /// server may be running on them: the caps in each file are left as the server installed them.
    public static var besideARunningServer: ServiceLimits {
        var limits = ServiceLimits()
        limits.installsFreeTierCaps = false
        return limits
    }

    var segmentLimits: SegmentCodec.Limits {
        var limits = SegmentCodec.Limits()
        limits.maxOps = pushOpsMax
        limits.maxOpBytes = opBytesMax
        return limits
    }
}

/// The sync API behind the HTTP routes (and, in tests and the simulator, called
/// directly): authenticates each call, routes it to the library's store, and
/// parks long-poll pulls until ops arrive or their wait runs out.
///
/// Parked pulls hold no thread: they wait in a registry and are answered from
/// whichever thread commits the next push to their library, or from a timer.
public final class SyncService: SyncEndpoint {
    public let dataDirectory: String
    public let accounts: Accounts
    public let metrics: Metrics
    /// The server's own files found damaged so far (`/healthz`, `/readyz`).
    public let health = ServerHealth()
    public let limits: ServiceLimits
    let log: ServerLog
    let clock: any ChronicleClock
    let libraries = Locked(OpenLibraries())
    private let waiters = Locked<Waiters>(Waiters())
    /// Where requests that block run (the HTTP routes, woken long-polls).
    let workers: WorkerPool
    /// When libraries are compacted on their own (`runMaintenance`, `startMaintenance`).
    public let maintenancePolicy: MaintenancePolicy
    /// Schemas served beyond the built-in ones.
    public let schemas: [Schema]
    /// Where the libraries' order lives when several servers share it (`ChroniclePostgres`); nil:
    /// each library is a file in the data directory.
    public let shared: (any SharedLibraryStore)?
    /// Where the libraries' blobs are kept: the shared store's where there is one, else a file per
    /// library in the data directory (`ServerBlobFiles`).
    public let blobs: any BlobStorage
    let maintenance = MaintenanceState()
    /// Reads saved pages into `article.parsed` ops, where `maintenancePolicy.articleFetch` is set.
    let articles: ArticleFetcher?
    /// Each library's newest snapshot frame while a response is sending it: devices that start
    /// from the snapshot at the same time share one copy (held only while some response holds it).
    /// Checked and filled under its lock, so requests arriving together wait for the one read
    /// rather than each reading its own copy.
    let snapshotFrames = Locked<[UUID: SharedSnapshotFrame]>([:])
    /// Each library's start image as last mapped, with when it was last found current: the ranges
    /// of one download come a few milliseconds apart and need not each read its description.
    let startImages = Locked<[UUID: (info: StartImageInfo, bytes: SharedBytes, checked: UInt64)]>([:])

    struct Waiter {
        var after: Int64
        var fire: @Sendable () -> Void
    }

    struct Waiters {
        var nextID = 0
        var byLibrary: [UUID: [Int: Waiter]] = [:]
    }

    /// `schemas`: schemas of the apps this server serves beyond the built-in ones (`Schema.builtIn`);
    /// a library is opened with the one of its name, the newest version with its history.
    /// `shared`: libraries ordered in a database several servers share, each served from this
    /// process's replica. `accounts`: users and devices kept elsewhere than the data directory's
    /// `server.sqlite` (in the database the servers share).
    public init(dataDirectory: String, limits: ServiceLimits = ServiceLimits(), maintenance: MaintenancePolicy = MaintenancePolicy(),
                log: ServerLog = ServerLog(to: nil), clock: any ChronicleClock = SystemClock(), schemas: [Schema] = [],
                shared: (any SharedLibraryStore)? = nil, accounts: Accounts? = nil) throws {
        self.dataDirectory = dataDirectory
        self.schemas = schemas
        self.shared = shared
        try Self.makePrivate(dataDirectory, log: log)
        blobs = shared?.blobs ?? ServerBlobFiles(dataDirectory: dataDirectory, clock: clock)
        maintenancePolicy = maintenance
        self.accounts = try accounts ?? Accounts(dataDirectory: dataDirectory, clock: clock)
        self.metrics = Metrics()
        self.limits = limits
        self.log = log
        self.clock = clock
        workers = WorkerPool(name: "chronicle.sync.work", threadsMax: max(1, limits.workerThreadsMax))
        articles = maintenance.articleFetch.map { ArticleFetcher(policy: $0, log: log) }
        articles?.attach(self)
    }

    /// The data directory made 0700 (`PrivateFiles`), or narrowed to it, with what is in it
    /// and in its `libraries` and `blobs` directories narrowed to 0600: an earlier build, or a
    /// copy made by hand, may have left them readable by other users of the machine. Each
    /// narrowing is logged, since it means someone else could read them until now.
    static func makePrivate(_ dataDirectory: String, log: ServerLog) throws {
        var narrowed: [(path: String, mode: mode_t)] = []
        if let mode = try PrivateFiles.directory(dataDirectory) { narrowed.append((dataDirectory, mode)) }
        let files = FileManager.default
        for sub in ["", "libraries", "blobs"] {
            let directory = sub.isEmpty ? dataDirectory : (dataDirectory as NSString).appendingPathComponent(sub)
            if !sub.isEmpty, let mode = try PrivateFiles.narrowIfPresent(directory) { narrowed.append((directory, mode)) }
            for name in (try? files.contentsOfDirectory(atPath: directory)) ?? [] {
                let path = (directory as NSString).appendingPathComponent(name)
                var isDirectory: ObjCBool = false
                guard files.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
                if let mode = try PrivateFiles.narrowIfPresent(path) { narrowed.append((path, mode)) }
            }
        }
        for (path, mode) in narrowed.prefix(20) {
            log.log("file_mode_narrowed", ["path": .text(path), "mode_was": .text(PrivateFiles.text(mode)),
                                           "mode": .text(PrivateFiles.text(mode & 0o700))])
        }
        if narrowed.count > 20 { log.log("file_modes_narrowed", ["more": .integer(Int64(narrowed.count - 20)), "directory": .text(dataDirectory)]) }
    }

    /// Saved pages queued or being read, and library searches for them (0 where the server
    /// does not fetch pages).
    public var articlesPending: Int { articles?.pending ?? 0 }

    /// After an op the server wrote itself (a page read): wakes the library's parked pulls.
    func appended(by op: Op) {
        wake(op.libraryID)
        maintenance.markChanged(op.libraryID)
    }

    // MARK: - Identity and libraries

    func identify(_ token: String) throws(ProtocolError) -> DeviceIdentity {
        guard let identity = try accounts.authenticate(token) else {
            throw ProtocolError(401, .unauthorized, "The bearer token is missing, malformed or no longer valid; sign in again with `chronicle login`.")
        }
        return identity
    }

    /// The device behind `token`, which must belong to `library` (the library is not opened: blobs
    /// are kept apart from it).
    func identify(_ token: String, library: UUID) throws(ProtocolError) -> DeviceIdentity {
        let identity = try identify(token)
        guard identity.libraryID == library else {
            throw ProtocolError(403, .forbiddenLibrary, "This token belongs to library \(identity.libraryID.lowercased), not \(library.lowercased).")
        }
        return identity
    }

    func authorize(_ token: String, library: UUID) throws(ProtocolError) -> (DeviceIdentity, ServerLibrary) {
        (try identify(token, library: library), try self.library(library))
    }

    /// Libraries open now (at most `limits.openLibrariesMax` unless requests hold more).
    var openLibraryCount: Int { libraries.withLock { $0.count } }

    /// The `/metrics` lines of the open libraries: how many are open, and how many times one was
    /// opened (a count that climbs much faster than new users sign up says the cap is too low).
    func renderLibraryMetrics() -> String {
        let (open, opened, deleting, deleted) = libraries.withLock { ($0.count, $0.opened, $0.deleting.count, $0.deletions) }
        return """
            # HELP chronicle_libraries_open Libraries the server holds open now (serve --open-libraries caps them).
            # TYPE chronicle_libraries_open gauge
            chronicle_libraries_open \(open)
            # HELP chronicle_libraries_opened_total Times a library was opened: first use, or again after it was closed to stay under the cap.
            # TYPE chronicle_libraries_opened_total counter
            chronicle_libraries_opened_total \(opened)
            # HELP chronicle_library_deletions_waiting Libraries the operator asked to delete that a request or parked pull still holds (deleted once let go).
            # TYPE chronicle_library_deletions_waiting gauge
            chronicle_library_deletions_waiting \(deleting)
            # HELP chronicle_libraries_deleted_total Library files this server deleted (server remove-user --delete-library, server delete-library).
            # TYPE chronicle_libraries_deleted_total counter
            chronicle_libraries_deleted_total \(deleted)

            """ + (articles.map(Self.renderArticleMetrics) ?? "")
    }

    /// The article fetcher's `/metrics` lines (only where it runs).
    static func renderArticleMetrics(_ articles: ArticleFetcher) -> String {
        let counts = articles.counts, pending = articles.pending
        return """
            # HELP chronicle_articles_parsed_total Saved pages read into article.parsed ops.
            # TYPE chronicle_articles_parsed_total counter
            chronicle_articles_parsed_total \(counts.parsed)
            # HELP chronicle_articles_unreadable_total Saved pages given empty text: not found, not a web page, too large, a refused address, or failing every try.
            # TYPE chronicle_articles_unreadable_total counter
            chronicle_articles_unreadable_total \(counts.unreadable)
            # HELP chronicle_article_retries_total Fetches that failed in a way that may pass, tried again later.
            # TYPE chronicle_article_retries_total counter
            chronicle_article_retries_total \(counts.retried)
            # HELP chronicle_articles_pending Pages and library searches queued or under way.
            # TYPE chronicle_articles_pending gauge
            chronicle_articles_pending \(pending)

            """
    }

    /// The library's store, opened on first use.
    public func library(_ id: UUID) throws(ProtocolError) -> ServerLibrary {
        while true {
            if let library = try openLibrary(id) { return library }
        }
    }

    /// The library, or nil where a library was deleted while its owner was being read (read again).
    private func openLibrary(_ id: UUID) throws(ProtocolError) -> ServerLibrary? {
        let remake = shared?.needsRemaking(id) ?? false
        let (found, deletions) = libraries.withLock { open in
            // A replica that cannot catch up is closed once nothing holds it, and made anew below.
            if remake { _ = open.closeUnused(id) }
            return (open.use(id), open.deletions)
        }
        if let found { return found }
        let records: [UserRecord]
        do { records = try accounts.libraries() } catch {
            throw accounts.unavailable(error, "The server could not read its accounts")
        }
        do {
            guard let record = records.first(where: { $0.libraryID == id }) else {
                throw ProtocolError(404, .unknownLibrary, "The server has no library \(id.lowercased).")
            }
            guard let schema = schemas.first(where: { $0.name == record.schemaName }) ?? Schema.named(record.schemaName) else {
                throw ProtocolError(500, .unknownSchema, "Library \(id.lowercased) uses schema '\(record.schemaName)', which this server build does not include.")
            }
            let path = Accounts.libraryPath(dataDirectory, id)
            return try libraries.withLock { open -> ServerLibrary? in
                if let existing = open.use(id) { return existing }
                // A library deleted since its owner was read (the owner removed meanwhile) is not
                // made again, empty, under its old name.
                if open.deleting.contains(id) {
                    throw ProtocolError(404, .unknownLibrary, "The server has no library \(id.lowercased): it is being deleted.")
                }
                guard open.deletions == deletions else { return nil }
                let caps = limits.installsFreeTierCaps ? limits.freeTierCaps : nil
                let library = try shared?.library(id, schema: schema, caps: caps)
                    ?? ServerLibrary.openOrCreate(at: path, libraryID: id, schema: schema, clock: clock, caps: caps)
                if let migration = library.schemaMigration {
                    log.log("schema", ["library": .text(id.lowercased), "schema": .text(schema.name), "from": .integer(migration.fromVersion),
                                       "to": .integer(Int64(schema.version)), "rebuilt_s": .real((migration.seconds * 1000).rounded() / 1000)])
                }
                open.add(library, max: limits.openLibrariesMax)
                // Pages saved while no server read them (it stopped first) are read now.
                articles?.scan(library: id)
                return library
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not open library \(id.lowercased)", library: id, error)
        }
    }

    // MARK: - Calls

    /// Orders a pushed segment. Blocks on the library's writer; answers op by op. A push that
    /// would leave a gap in its device's sequence first waits, blocking this thread, up to
    /// `limits.pushGapWaitMilliseconds` for the device's push ahead of it (see there).
    public func pushNow(_ segment: Segment, token: String) throws(ProtocolError) -> PushResponse {
        try pushNow(segment, token: token, gapWaitMilliseconds: limits.pushGapWaitMilliseconds)
    }

    private func pushNow(_ segment: Segment, token: String, gapWaitMilliseconds: Int) throws(ProtocolError) -> PushResponse {
        let start = DispatchTime.now().uptimeNanoseconds
        let (identity, library) = try authorize(token, library: segment.libraryID)
        guard !segment.isConfirmed else {
            throw ProtocolError(400, .alreadyConfirmed, "A pushed segment carries unconfirmed ops; this one has server sequences.")
        }
        guard segment.ops.count <= limits.pushOpsMax else {
            throw ProtocolError(413, .tooManyOps, "A push holds at most \(limits.pushOpsMax) ops (expected ≤ \(limits.pushOpsMax), actual \(segment.ops.count)).")
        }
        let headBefore = library.head
        let response = try pushWaitingForGaps(segment.ops, from: identity.deviceID, into: library, milliseconds: gapWaitMilliseconds)
        var accepted = 0, duplicate = 0, rejected = 0
        for result in response.results {
            switch result.outcome {
            case .accepted: accepted += 1
            case .duplicate: duplicate += 1
            case .rejected: rejected += 1
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        metrics.ops(accepted: accepted, duplicate: duplicate, rejected: rejected)
        metrics.pushed(seconds: seconds)
        log.log("push", ["library": .text(library.libraryID.lowercased), "device": .text(identity.deviceID.lowercased),
                         "ops": .integer(Int64(segment.ops.count)), "accepted": .integer(Int64(accepted)),
                         "duplicate": .integer(Int64(duplicate)), "rejected": .integer(Int64(rejected)),
                         "head": .integer(response.head), "ms": .real((seconds * 1e6).rounded() / 1e3)])
        if response.head > headBefore {
            wake(library.libraryID)
            maintenance.markChanged(library.libraryID)
        }
        if let articles, accepted > 0 {
            let saved = Dictionary(segment.ops.filter { $0.type == "article.save" }.map { ($0.opID, $0) }, uniquingKeysWith: { a, _ in a })
            for result in response.results {
                guard case .accepted = result.outcome else { continue }
                if let op = saved[result.opID], let url = op.payload["url"]?.textValue {
                    articles.enqueue(library: library.libraryID, article: op.entityID, url: url)
                }
            }
        }
        return response
    }

    /// Reads a page of the log after `cursor`; with a wait and nothing new, parks
    /// until a push lands or the wait runs out, then answers (possibly empty).
    /// `completion` runs exactly once, on some thread.
    /// - Returns: for a parked request, a ticket that answers it early (with what is there now).
    @discardableResult
    public func pull(library id: UUID, after cursor: Int64, limit: Int?, waitMilliseconds: Int, token: String,
                     completion: @escaping @Sendable (Result<PullPage, ProtocolError>) -> Void) -> PullTicket? {
        let start = DispatchTime.now().uptimeNanoseconds
        let library: ServerLibrary
        let limit = limit ?? limits.pullOpsDefault
        do {
            (_, library) = try authorize(token, library: id)
            guard cursor >= 0 else { throw ProtocolError(400, .badCursor, "The cursor must be 0 or more; got \(cursor).") }
            guard limit >= 1, limit <= limits.pullOpsMax else {
                throw ProtocolError(400, .limitTooLarge, "A pull returns 1 to \(limits.pullOpsMax) ops (expected ≤ \(limits.pullOpsMax), actual \(limit)).")
            }
            guard waitMilliseconds >= 0, waitMilliseconds <= limits.waitMillisecondsMax else {
                throw ProtocolError(400, .waitTooLong, "A pull may wait 0 to \(limits.waitMillisecondsMax) ms (expected ≤ \(limits.waitMillisecondsMax), actual \(waitMilliseconds)).")
            }
            let head = try library.caughtUpHead()
            guard cursor <= head else {
                var ahead = ProtocolError(409, ProtocolError.Code.cursorAhead, "The cursor \(cursor) is past this library's last op \(head): the store was synced with another server or the server lost data (restored from a backup).")
                ahead.serverHead = head
                throw ahead
            }
        } catch let error as ProtocolError {
            completion(.failure(error))
            return nil
        } catch {
            completion(.failure(ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)))
            return nil
        }

        let answer: @Sendable () -> Void = { [self] in
            let result = Result { () throws(ProtocolError) -> PullPage in try page(library, after: cursor, limit: limit) }
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            if case .success(let page) = result { metrics.pulled(ops: page.segment.ops.count, seconds: seconds) }
            completion(result)
        }
        guard waitMilliseconds > 0 else { answer(); return nil }

        // Register, then re-check the head: a push that committed before the registration is
        // seen by the check, and one after it wakes the waiter, so no wake-up is lost. The check
        // runs outside the registry's lock: for a library ordered in PostgreSQL it asks there.
        let waiterID: Int = waiters.withLock { registry in
            let id = registry.nextID
            registry.nextID += 1
            registry.byLibrary[library.libraryID, default: [:]][id] = Waiter(after: cursor, fire: answer)
            return id
        }
        if library.head > cursor, waiters.withLock({ $0.byLibrary[library.libraryID]?.removeValue(forKey: waiterID) }) != nil {
            answer()   // taken back before any wake-up fired it
            return nil
        }
        metrics.waiting(1)
        let release: @Sendable () -> Void = { [self] in
            let expired = waiters.withLock { $0.byLibrary[library.libraryID]?.removeValue(forKey: waiterID) }
            if let expired {
                metrics.waiting(-1)
                metrics.longPollsEnded(1, byPush: false)
                expired.fire()
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(waitMilliseconds)) { [workers] in workers.async(release) }
        return PullTicket(release)
    }

    func wake(_ library: UUID) {
        let ready = waiters.withLock { registry -> [Waiter] in
            guard let parked = registry.byLibrary.removeValue(forKey: library) else { return [] }
            return Array(parked.values)
        }
        guard !ready.isEmpty else { return }
        metrics.waiting(-ready.count)
        metrics.longPollsEnded(ready.count, byPush: true)
        for waiter in ready { workers.async { waiter.fire() } }
    }

    /// Answers every parked pull (each with what its library holds now): another server may have
    /// written to any library unseen.
    func wakeAll() {
        let libraries = waiters.withLock { Array($0.byLibrary.keys) }
        for library in libraries { wake(library) }
    }

    private func page(_ library: ServerLibrary, after cursor: Int64, limit: Int) throws(ProtocolError) -> PullPage {
        do {
            let (ops, head, encoded, afterOpID) = try library.pull(after: cursor, limit: limit, alignToSegments: true)
            let segment = try Segment(libraryID: library.libraryID, ops: ops)
            let next = ops.last?.serverSeq ?? cursor
            var page = PullPage(segment: segment, nextCursor: next, more: next < head, head: head, snapshotSeq: try library.latestSnapshotSeq(),
                                encoded: encoded)
            page.afterOpID = afterOpID
            page.incarnation = library.incarnation
            page.stateCarriedOverAt = library.stateCarriedOverAt
            return page
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(library.libraryID.lowercased)", library: library.libraryID, error)
        }
    }

    /// Sets a library's plan tier with a server-authored op and wakes its parked pulls.
    @discardableResult
    public func setPlan(library id: UUID, plan: String) throws -> Op {
        let op = try library(id).setPlan(plan)
        log.log("plan", ["library": .text(id.lowercased), "plan": .text(plan), "seq": .integer(op.serverSeq ?? 0)])
        wake(id)
        maintenance.markChanged(id)
        return op
    }

    public func verdictNow(library id: UUID, entity: UUID, token: String) throws(ProtocolError) -> Verdict {
        let (_, library) = try authorize(token, library: id)
        do {
            return try library.verdict(entity)
        } catch let error as ProtocolError {
            throw error   // the shared store unreachable (503), say
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
    }

    /// The library's newest snapshot frame and its seq, as an array of its own (in-process callers).
    public func snapshotNow(library id: UUID, token: String) throws(ProtocolError) -> (seq: Int64, frame: [UInt8]) {
        let (seq, frame) = try sharedSnapshotNow(library: id, token: token)
        return (seq, frame.bytes)
    }

    /// The library's newest snapshot frame and its seq, shared by every response sending it at
    /// the same time: ten devices starting from a 55 MB snapshot at once hold one copy, not ten
    /// (plus libmicrohttpd's own copy of each). Read straight from its row into that copy.
    public func sharedSnapshotNow(library id: UUID, token: String) throws(ProtocolError) -> (seq: Int64, frame: SharedBytes) {
        let (_, library) = try authorize(token, library: id)
        do {
            // One lock for every library's frames: a read takes tens of milliseconds, and starts
            // from a snapshot are rare next to pulls and pushes.
            return try snapshotFrames.withLock { frames in
                let newest = try library.latestSnapshotSeq()
                if let newest, let cached = frames[id], cached.seq == newest, let frame = cached.frame {
                    return (newest, frame)
                }
                guard let found = try library.latestSnapshot(into: { count in
                    let frame = SharedBytes(count: count)
                    return (frame, frame.unsafeStorage)
                }) else {
                    throw ProtocolError(404, .noSnapshot, "Library \(id.lowercased) has no snapshot yet; pull from seq 0.")
                }
                frames = frames.filter { $0.value.frame != nil }   // entries whose frame is gone
                frames[id] = SharedSnapshotFrame(seq: found.seq, frame: found.storage)
                return (found.seq, found.storage)
            }
        } catch let error as ProtocolError {
            throw error
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
    }

    /// The library's start image (`StartImageInfo`), mapped from its file, if there is one of
    /// its newest snapshot made for this store format and schema; else `404 no_start_image`
    /// (the device starts from the snapshot instead).
    public func startImageNow(library id: UUID, token: String, storeFormat: Int64, schemaFingerprint: String) throws(ProtocolError)
        -> (info: StartImageInfo, bytes: SharedBytes) {
        let (_, library) = try authorize(token, library: id)
        let now = DispatchTime.now().uptimeNanoseconds
        // A mapping unused for a minute goes (it holds the file's blocks even once the file is replaced or deleted).
        let cached = startImages.withLock { images in
            images = images.filter { now - $1.checked < 60_000_000_000 }
            return images[id]
        }
        if let cached, now - cached.checked < 1_000_000_000,
           cached.info.storeFormat == storeFormat, cached.info.schemaFingerprint == schemaFingerprint {
            return (cached.info, cached.bytes)
        }
        let found: StartImageInfo?
        do {
            found = try library.currentStartImage()
        } catch {
            throw ProtocolError.serverStore("The server could not read library \(id.lowercased)", library: id, error)
        }
        guard let info = found else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased) has no start image of its newest snapshot; start from the snapshot.")
        }
        guard info.storeFormat == storeFormat, info.schemaFingerprint == schemaFingerprint else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased)'s start image is of store format v\(info.storeFormat) and \(info.schemaName) v\(info.schemaVersion), not the device's; start from the snapshot.")
        }
        // Replaced by a rename while mapped, the old file's pages stay readable until the answer is sent.
        if let cached, cached.info == info {
            startImages.withLock { $0[id] = (info, cached.bytes, now) }
            return (info, cached.bytes)
        }
        guard let bytes = SharedBytes(mapping: library.startImagePath), bytes.count == Int(info.imageBytes) else {
            throw ProtocolError(404, .noStartImage, "Library \(id.lowercased)'s start image is being replaced; start from the snapshot.")
        }
        startImages.withLock { $0[id] = (info, bytes, now) }
        return (info, bytes)
    }

    /// How often the maintenance thread looks for libraries to delete (`runLibraryDeletions`).
    public static let deletionCheckSeconds = 1.0

    /// Runs `runLibraryDeletions()` every second and `runMaintenance()` every
    /// `maintenancePolicy.checkIntervalSeconds` (when it compacts at all) on a thread of its own,
    /// until `stopMaintenance()` (`SyncServer` does both).
    public func startMaintenance() {
        let every = max(0.001, maintenancePolicy.checkIntervalSeconds)
        let tick = min(every, Self.deletionCheckSeconds)
        let compacts = maintenancePolicy.compaction != nil
        let compactedAt = Locked(DispatchTime.now().uptimeNanoseconds)
        let sweptAt = Locked<UInt64?>(nil)
        let collectedAt = Locked<UInt64?>(nil)
        /// Whether `seconds` have passed since `last` (or it never ran); if so, now is the last time.
        @Sendable func due(_ last: Locked<UInt64?>, every seconds: Double) -> Bool {
            last.withLock { last in
                let now = DispatchTime.now().uptimeNanoseconds
                if let last, Double(now - last) / 1e9 < seconds { return false }
                last = now
                return true
            }
        }
        maintenance.start(interval: tick, name: "chronicle.maintenance") { [self] in
            runLibraryDeletions()
            if due(sweptAt, every: maintenancePolicy.horizonCheckSeconds) { sweepAbandonedUploads() }
            if due(collectedAt, every: maintenancePolicy.blobCollectionSeconds) { collectUnnamedBlobs() }
            let now = DispatchTime.now().uptimeNanoseconds
            let due = compacts && compactedAt.withLock { last in
                guard Double(now - last) / 1e9 >= every - tick / 2 else { return false }
                last = now
                return true
            }
            if due { runMaintenance() }
        }
    }

    /// Stops the maintenance thread after the compaction step it is on; returns once it has ended.
    public func stopMaintenance() {
        maintenance.stop()
        articles?.stop()
    }

    /// Compacts one library on the server (seal, snapshot, horizon) and wakes nobody: the ops are
    /// the same. Then builds its start image where one is due (`MaintenancePolicy.startImageOpsMin`).
    @discardableResult
    public func compact(library id: UUID, policy: CompactionPolicy) throws -> CompactionReport {
        let library = try library(id)
        let report = try library.compact(policy)
        defer { buildStartImageIfDue(library) }
        log.log("compact", ["library": .text(id.lowercased), "sealed": .integer(report.opsSealed),
                            "segments": .integer(Int64(report.segmentsWritten)),
                            "snapshot_seq": report.snapshotSeq.map(Value.integer) ?? .null,
                            "history_dropped_through": report.historyDroppedThrough.map(Value.integer) ?? .null])
        return report
    }

    // MARK: - SyncEndpoint (in-process callers)

    public func snapshot(library: UUID, token: String) async throws(ProtocolError) -> [UInt8] {
        try snapshotNow(library: library, token: token).frame
    }

    public func startImage(library: UUID, storeFormat: Int64, schemaFingerprint: String, token: String) async throws(ProtocolError) -> [UInt8]? {
        do {
            return try startImageNow(library: library, token: token, storeFormat: storeFormat, schemaFingerprint: schemaFingerprint).bytes.bytes
        } catch where error.code == .noStartImage {
            return nil
        }
    }

    /// The library's push; one that would leave a gap in its device's sequence waits up to
    /// `milliseconds` (holding no lock, blocking this thread) for a push to commit, and is
    /// tried again. Past the wait it is refused as before.
    private func pushWaitingForGaps(_ ops: [Op], from device: UUID, into library: ServerLibrary,
                                    milliseconds: Int) throws(ProtocolError) -> PushResponse {
        var wait = GapWait(milliseconds: milliseconds, metrics: metrics)
        while true {
            let generation = library.pushGeneration
            do {
                let response = try library.push(ops, from: device)
                wait.ended(filled: true)
                return response
            } catch let error where wait.holds(after: error) {
                library.waitForPush(after: generation, nanoseconds: wait.nanosecondsLeft)
            } catch {
                wait.ended(filled: false)
                throw error
            }
        }
    }

    /// `pushNow`, except that the wait for a device's push ahead (see `pushNow`) suspends the
    /// task instead of blocking its thread.
    public func push(_ segment: Segment, token: String) async throws(ProtocolError) -> PushResponse {
        let library = try authorize(token, library: segment.libraryID).1
        var wait = GapWait(milliseconds: limits.pushGapWaitMilliseconds, metrics: metrics)
        while true {
            let generation = library.pushGeneration
            do {
                let response = try pushNow(segment, token: token, gapWaitMilliseconds: 0)
                wait.ended(filled: true)
                return response
            } catch let error where wait.holds(after: error) {
                // Polled: in-process callers only (tests, the simulator, benchmarks); HTTP requests block in pushNow.
                while library.pushGeneration == generation, wait.nanosecondsLeft > 0 {
                    try? await Task.sleep(nanoseconds: 1_000_000)
                }
            } catch {
                wait.ended(filled: false)
                throw error
            }
        }
    }

    /// Cancelling the calling task answers a parked pull at once.
    public func pull(library: UUID, after cursor: Int64, limit: Int, waitMilliseconds: Int, token: String) async throws(ProtocolError) -> PullPage {
        let holder = Locked<(ticket: PullTicket?, cancelled: Bool)>((nil, false))
        let result: Result<PullPage, ProtocolError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ticket = pull(library: library, after: cursor, limit: limit, waitMilliseconds: waitMilliseconds, token: token) { result in
                    continuation.resume(returning: result)
                }
                let cancelNow = holder.withLock { state -> Bool in
                    state.ticket = ticket
                    return state.cancelled
                }
                if cancelNow { ticket?.answerNow() }
            }
        } onCancel: {
            holder.withLock { state -> PullTicket? in
                state.cancelled = true
                return state.ticket
            }?.answerNow()
        }
        return try result.get()
    }

    public func verdict(library: UUID, entity: UUID, token: String) async throws(ProtocolError) -> Verdict {
        try verdictNow(library: library, entity: entity, token: token)
    }
}

/// A parked pull: `answerNow()` ends its wait early (it is answered with whatever is there).
public struct PullTicket: Sendable {
    private let release: @Sendable () -> Void
    init(_ release: @escaping @Sendable () -> Void) { self.release = release }
    public func answerNow() { release() }
}

/// A library's newest snapshot frame, held weakly: it lives as long as a response sends it.
struct SharedSnapshotFrame: Sendable {
    let seq: Int64
    weak var frame: SharedBytes?
}

/// One push's wait for its device's push ahead: how long it may still wait, and its place in
/// the metrics (held while it waits; filled or refused when it ends).
struct GapWait {
    private let deadline: UInt64
    private let metrics: Metrics
    private var held = false

    init(milliseconds: Int, metrics: Metrics) {
        deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, milliseconds)) * 1_000_000
        self.metrics = metrics
    }

    var nanosecondsLeft: UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        return deadline > now ? deadline - now : 0
    }

    /// Whether a push refused with `error` waits and is tried again: a gap, with time left.
    mutating func holds(after error: ProtocolError) -> Bool {
        guard error.code == ProtocolError.Code.deviceSeqGap, nanosecondsLeft > 0 else { return false }
        if !held { held = true; metrics.heldForGap(1) }
        return true
    }

    /// The push was taken (`filled`) or refused after all.
    func ended(filled: Bool) {
        guard held else { return }
        metrics.gapWaitEnded(filled: filled)
        metrics.heldForGap(-1)
    }
}

/// The libraries a service holds open, least recently used first out: a server with many users
/// keeps a bounded number of SQLite connections, file descriptors and page caches, however many
/// libraries it has served since it started.
struct OpenLibraries {
    private struct Entry {
        var library: ServerLibrary
        var lastUsed: UInt64
    }

    private var byID: [UUID: Entry] = [:]
    private var uses: UInt64 = 0
    /// Libraries opened so far, again after a close included.
    private(set) var opened: UInt64 = 0

    var count: Int { byID.count }

    /// The open library, marked as just used; nil when it is not open.
    mutating func use(_ id: UUID) -> ServerLibrary? {
        guard byID[id] != nil else { return nil }
        uses &+= 1
        byID[id]!.lastUsed = uses
        return byID[id]!.library
    }

    /// Libraries being deleted (`SyncService.runLibraryDeletions`): never opened again meanwhile.
    var deleting: Set<UUID> = []
    /// Deletions finished so far: an open that read the library's owner before one finished reads it again.
    private(set) var deletions: UInt64 = 0

    /// Marks `id` as being deleted and closes it if nothing else holds it; true when it is not open.
    mutating func closeForDeletion(_ id: UUID) -> Bool {
        deleting.insert(id)
        return closeUnused(id)
    }

    /// Closes `id` if nothing else holds it; true when it is not open (any more).
    mutating func closeUnused(_ id: UUID) -> Bool {
        guard byID[id] != nil else { return true }
        guard isKnownUniquelyReferenced(&byID[id]!.library) else { return false }
        byID[id] = nil
        return true
    }

    /// `id`'s file is gone: it may be made again (given to a user again, by `add-user --library`).
    mutating func deleted(_ id: UUID) {
        deleting.remove(id)
        deletions &+= 1
    }

    /// Keeps `library` open, then closes the least recently used ones past `max` that nothing
    /// else holds: a library a request, a parked pull or a compaction still uses stays open (it
    /// is never open twice), and the count stays over `max` until it is let go.
    mutating func add(_ library: ServerLibrary, max: Int) {
        uses &+= 1
        opened &+= 1
        byID[library.libraryID] = Entry(library: library, lastUsed: uses)
        guard byID.count > max else { return }
        for id in byID.sorted(by: { $0.value.lastUsed < $1.value.lastUsed }).map(\.key) where byID.count > max {
            guard id != library.libraryID else { continue }
            // Only this table holds it: no request can reach it but through here, under its lock.
            if isKnownUniquelyReferenced(&byID[id]!.library) { byID[id] = nil }
        }
    }
}
