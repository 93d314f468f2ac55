import ChronicleCore
import ChronicleStore
import CSQLite
import Foundation
import ChronicleServerStore

/// The herd's floor: raw SQLite running the server's own statements for the herd's pushes, on
/// the same two cores, with nothing else in the way.
///
/// For each of the herd's 200 first pushes (every device's 50 queued ops) the statements
/// `ServerLibrary.push` runs for a batch of new, valid ops are built before the clock starts (the
/// batch's checks of the device's sequence, the log's end and its op ids; per op the checks that
/// its row and the rows it names exist, its log row and its materializer steps; the device's new
/// sequence), in fresh library files made by `ServerLibrary.openOrCreate` (the same tables,
/// indexes and triggers), opened with the C API. Then all 200 pushes "arrive" at once: one
/// thread per core takes them in the devices' order, each a `BEGIN IMMEDIATE` … `COMMIT`
/// (synchronous FULL, as the server's) of its prepared statements, one writer per library, a
/// library's pushes in turn. Each push's time is from the start to its commit.
///
/// Left out, all in the floor's favour: HTTP, the token check, decoding the segment, validating
/// and upcasting each op, building the statements and their arguments, the answer, the WAL
/// checkpoints (automatic checkpoints are off), the 200 simulated devices, their pulls.
///
/// `stripped` goes further than the server could and still answer pulls, verdicts and its own
/// checks in good time: every index but the tables' keys and every trigger dropped, and each
/// library's pushes in one transaction (group commit). Commits still wait for the disk: a push
/// is answered only once it is durable.
struct HerdFloor {
    struct Result {
        var pushes: Int
        var ops: Int
        var threads: Int
        /// From the start to each push's commit.
        var latencies: Samples
        var seconds: Double
        var statements: Int
    }

    /// One library file of the floor and its pushes' prepared statements, in arrival order.
    final class Library: @unchecked Sendable {
        let db: RawDatabase
        var pushes: [[PreparedStep]] = []
        /// The position (in `pushes`) of the push that may run next.
        var next = 0
        let turn = NSCondition()

        init(db: RawDatabase) { self.db = db }
    }

    /// Builds the floor's libraries under `directory` from `written[i]`, device i's ops (device i
    /// belongs to library `i % libraryIDs.count`), and times the burst on `threads` threads.
    static func measure(directory: String, libraryIDs: [UUID], written: [[Op]], schema: Schema, threads: Int,
                        stripped: Bool = false) throws -> Result {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let materializer = Materializer(schema: schema)
        var libraries: [Library] = []
        for (index, libraryID) in libraryIDs.enumerated() {
            let path = "\(directory)/floor-\(index).sqlite"
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            // The server's own DDL: made by the server, then left to the raw connection alone.
            do { _ = try ServerLibrary.openOrCreate(at: path, libraryID: libraryID, schema: schema) }
            let db = try RawDatabase(path: path)
            try db.exec("PRAGMA cache_size = -\(ServerLibrary.cacheKilobytes)")
            try db.exec("PRAGMA wal_autocheckpoint = 0")
            if stripped {
                for row in try db.rows("SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL") {
                    guard let type = row[0], let name = row[1] else { continue }
                    try db.exec("DROP \(type.uppercased()) \(ProjectionSchema.quoted(name))")
                }
                db.clearCache()
            }
            libraries.append(Library(db: db))
        }

        // Every push's statements, prepared and with their arguments, before the clock; the work in
        // arrival order: a transaction, and how many pushes its commit answers.
        var order: [(library: Int, position: Int, answers: Int)] = []
        var seqs = [Int64](repeating: 0, count: libraryIDs.count)
        var statements = 0, opCount = 0
        let now = (written.flatMap { $0 }.map(\.deviceTime).max() ?? 0) + 1
        for (device, ops) in written.enumerated() where !ops.isEmpty {
            let index = device % libraryIDs.count
            let library = libraries[index]
            let db = library.db
            let deviceKey = ops[0].deviceID.lowercased
            let idList = Value.text("[" + ops.map { "\"\($0.opID.lowercased)\"" }.joined(separator: ",") + "]")
            var steps: [PreparedStep] = [
                PreparedStep(statement: try db.prepare("SELECT last_device_seq FROM chronicle_devices WHERE device_id = ?1"), arguments: [.text(deviceKey)]),
                PreparedStep(statement: try db.prepare("SELECT server_seq, server_time FROM chronicle_log ORDER BY server_seq DESC LIMIT 1"), arguments: []),
                PreparedStep(statement: try db.prepare("SELECT (SELECT last_seq FROM chronicle_segments ORDER BY first_seq DESC LIMIT 1)"), arguments: []),
                PreparedStep(statement: try db.prepare("SELECT value FROM chronicle_meta WHERE key = 'history_base_seq'"), arguments: []),
                PreparedStep(statement: try db.prepare("""
                    SELECT op_id, server_seq, device_id FROM chronicle_log WHERE op_id IN (SELECT value FROM json_each(?1))
                    UNION ALL SELECT op_id, server_seq, device_id FROM chronicle_sealed_ops WHERE op_id IN (SELECT value FROM json_each(?1))
                    """), arguments: [idList]),
                PreparedStep(statement: try db.prepare("SELECT op_id, code, message, device_id FROM chronicle_rejected_ops WHERE op_id IN (SELECT value FROM json_each(?1))"),
                             arguments: [idList]),
            ]
            for op in ops {
                let (spec, normalized) = try schema.validate(type: op.type, version: op.version, payload: op.payload, serverAuthored: false)
                if let entity = schema.entity(spec.entity) {
                    steps.append(PreparedStep(statement: try db.prepare("SELECT 1 FROM \(ProjectionSchema.quoted(entity.table)) WHERE id = ?1"),
                                              arguments: [.text(op.entityID.lowercased)]))
                    for (field, target) in schema.references(of: spec, payload: normalized) {
                        guard let other = field.references.flatMap(schema.entity) else { continue }
                        steps.append(PreparedStep(statement: try db.prepare("SELECT 1 FROM \(ProjectionSchema.quoted(other.table)) WHERE id = ?1"),
                                                  arguments: [.text(target)]))
                    }
                }
                seqs[index] += 1
                var accepted = op
                accepted.payload = normalized
                accepted.serverSeq = seqs[index]
                accepted.serverTime = now
                steps.append(PreparedStep(statement: try db.prepare(LogRow.insertSQL), arguments: LogRow.arguments(accepted)))
                steps += try db.prepared(materializer.steps(for: accepted))
            }
            steps.append(PreparedStep(statement: try db.prepare("""
                INSERT INTO chronicle_devices(device_id, last_device_seq) VALUES (?1, ?2)
                ON CONFLICT(device_id) DO UPDATE SET last_device_seq = excluded.last_device_seq
                """), arguments: [.text(deviceKey), .integer(ops.last!.deviceSeq)]))
            order.append((index, library.pushes.count, 1))
            library.pushes.append(steps)
            statements += steps.count
            opCount += ops.count
        }

        if stripped {
            // Each library's pushes in one transaction, which answers them all at its commit.
            order = libraries.indices.filter { !libraries[$0].pushes.isEmpty }.map { ($0, 0, libraries[$0].pushes.count) }
            for library in libraries { library.pushes = [library.pushes.flatMap { $0 }] }
        }
        // All at once: each thread takes the next push in arrival order.
        let (arrivals, files) = (order, libraries)
        let taken = Locked(0)
        let finished = Locked<[UInt64]>([])
        let failure = Locked<String?>(nil)
        let start = nowNanoseconds()
        let group = DispatchGroup()
        for _ in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                while true {
                    let k = taken.withLock { value -> Int in value += 1; return value - 1 }
                    guard k < arrivals.count, failure.withLock({ $0 }) == nil else { return }
                    let library = files[arrivals[k].library], position = arrivals[k].position
                    library.turn.lock()
                    while library.next != position { library.turn.wait() }
                    library.turn.unlock()
                    do {
                        try library.db.exec("BEGIN IMMEDIATE")
                        try library.db.execute(library.pushes[position])
                        try library.db.exec("COMMIT")
                    } catch {
                        failure.withLock { $0 = "\(error)" }
                    }
                    let end = nowNanoseconds()
                    finished.withLock { $0 += Array(repeating: end - start, count: arrivals[k].answers) }
                    library.turn.lock()
                    library.next += 1
                    library.turn.broadcast()
                    library.turn.unlock()
                }
            }.start()
        }
        group.wait()
        let seconds = Double(nowNanoseconds() - start) / 1e9
        if let message = failure.withLock({ $0 }) { throw BenchError("herd floor: \(message)") }
        var samples = Samples(capacity: order.count)
        for value in finished.withLock({ $0 }) { samples.add(value) }
        return Result(pushes: samples.count, ops: opCount, threads: threads, latencies: samples, seconds: seconds, statements: statements)
    }
}
