import ChronicleCore
import ChronicleTesting
import ChronicleStore
import Foundation

/// Measurement 1: one local op per durable transaction through `DeviceStore.write`,
/// beside raw SQLite doing the same statements (outbox insert + the
/// materializer's steps, BEGIN IMMEDIATE … COMMIT, WAL + synchronous FULL).
struct WriteBenchmark {
    struct Result {
        var writes: Int
        var chronicle: Samples
        var baseline: Samples
        /// The disk alone: one 4 KiB write in place in a file beside the stores and its
        /// `fdatasync`, the least a durable commit can cost (a WAL commit writes its frames and
        /// syncs once).
        var disk: Samples
        var typeCounts: [String: Int]
    }

    let directory: String
    let writes: Int
    let seed: UInt64
    let vocabulary: Vocabulary

    func run() throws -> Result {
        let schema = Schema.readItLater
        let path = directory + "/write.chronicle"
        let clock = ManualClock()
        let store = try DeviceStore.create(at: path, schema: schema, clock: clock, ids: SeededV7IDGenerator(seed: seed, clock: clock))
        let raw = try StoreDDL.read(fromStoreAt: path, schema: schema).createBaseline(at: directory + "/write-raw.sqlite")
        let materializer = Materializer(schema: schema)
        let outbox = try raw.prepare(OutboxRow.insertSQL)
        let begin = try raw.prepare("BEGIN IMMEDIATE")
        let commit = try raw.prepare("COMMIT")
        let indexer = try RawSearchIndexer(db: raw, projection: ProjectionSchema(schema: schema))
        let disk = try DiskSync(path: directory + "/write-disk.bin")

        var rng = SplitMix64(seed: seed ^ 0x5717_E000)
        var articles: [UUID] = []
        let tags = (0..<200).map { vocabulary.words[30 + $0 * 5] }
        let colors = ["yellow", "green", "blue", "pink", "purple"]
        let warmup = min(200, writes / 10)
        var result = Result(writes: writes, chronicle: Samples(capacity: writes), baseline: Samples(capacity: writes),
                            disk: Samples(capacity: writes), typeCounts: [:])
        var throttle = Throttle()

        for index in 0..<(warmup + writes) {
            clock.advance(milliseconds: Int64(rng.int(50...3_000)))
            let type: String
            var entity: UUID? = nil
            var payload: Payload = [:]
            func someArticle(_ rng: inout SplitMix64) -> UUID {
                rng.chance(0.5) ? articles[articles.count - 1 - rng.below(min(articles.count, 100))] : articles[rng.below(articles.count)]
            }
            switch articles.isEmpty ? 0 : index % 4 {
            case 0:
                type = "article.save"
                payload = ["url": .text("https://\(vocabulary.words[rng.below(vocabulary.count)]).example/\(index)"),
                           "title": .text(vocabulary.title(words: rng.int(3...10), &rng))]
            case 1:
                type = "article.tag"
                entity = someArticle(&rng)
                payload = ["tag": .text(rng.pick(tags))]
            case 2:
                type = "article.progress"
                entity = someArticle(&rng)
                payload = ["progress": .real(Double(rng.below(101)) / 100)]
            default:
                type = "highlight.create"
                payload = ["article_id": .text(someArticle(&rng).lowercased),
                           "quote": .text(vocabulary.text(words: rng.int(5...30), &rng)),
                           "position": .integer(Int64(rng.below(20_000))),
                           "color": .text(rng.pick(colors))]
            }

            let t0 = nowNanoseconds()
            let op = try store.write(type, entity: entity, payload: payload)
            let t1 = nowNanoseconds()
            if type == "article.save" { articles.append(op.entityID) }

            // The same op, as hand-written SQLite: statements prepared ahead, values bound;
            // the FTS5 entries the op changes are brought up to date before commit.
            let outboxArguments = OutboxRow.arguments(op)
            let steps = try raw.prepared(materializer.steps(for: op))
            let watch = indexer.watch(op, schema: schema)
            let t2 = nowNanoseconds()
            try raw.run(begin, [])
            try raw.run(outbox, outboxArguments)
            try indexer.apply(steps, watching: watch)
            try indexer.flush()
            try raw.run(commit, [])
            let t3 = nowNanoseconds()
            try disk.writeAndSync()
            let t4 = nowNanoseconds()

            if index >= warmup {
                result.chronicle.add(t1 - t0)
                result.baseline.add(t3 - t2)
                result.disk.add(t4 - t3)
                result.typeCounts[type, default: 0] += 1
            }
            if throttle.ready() { progress("write: \(index + 1)/\(warmup + writes) (\(warmup) warm-up)") }
        }
        return result
    }
}

/// A 1 MiB file written 4 KiB at a time over its own bytes, each write made durable with
/// `fdatasync`. The file is filled and synced first, so no write changes its size and a sync
/// flushes data alone, as a WAL commit over a WAL that a checkpoint has reset does.
final class DiskSync {
    private let fd: Int32
    private let page = [UInt8](repeating: 0xA5, count: 4_096)
    private let pages = 256
    private var next = 0

    init(path: String) throws {
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw BenchError("cannot open \(path): \(String(cString: strerror(errno)))") }
        for index in 0..<pages { try write(at: index) }
        guard fsync(fd) == 0 else { throw BenchError("disk sync: \(String(cString: strerror(errno)))") }
    }

    deinit { close(fd) }

    private func write(at index: Int) throws {
        let written = page.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(index * $0.count)) }
        guard written == page.count else { throw BenchError("disk write: \(String(cString: strerror(errno)))") }
    }

    /// One 4 KiB write in place and its `fdatasync`.
    func writeAndSync() throws {
        try write(at: next)
        next = (next + 1) % pages
        guard fdatasync(fd) == 0 else { throw BenchError("disk sync: \(String(cString: strerror(errno)))") }
    }
}
