import ChronicleCore
import Foundation

extension LogTables {
    /// Ops decoded from the log, each with the SQL that applies it.
    typealias PreparedOps = [(op: Op, steps: [SQLStep])]
    static let prefetchCacheKilobytes = 2_000
    /// Ops (or snapshot rows) per chunk handed from a reading thread to the writer.
    static let prefetchChunkOps = 1_000

    /// `forEachConfirmedOp` with the reading on another thread: a read connection of
    /// `readers` streams the log (and sealed segments), decodes each op and builds its
    /// statements, while the calling thread runs the statements of the chunk before.
    /// Reading and decoding were a quarter of a rebuild's time, spent on a core that sat idle.
    ///
    /// Only for a caller that holds the writer and has not changed the confirmed log in
    /// its transaction (`rebuild`): the read connection sees the last commit, which is then
    /// the same log the writer sees. Errors on either side stop both; the reading thread
    /// is waited for before this returns.
    static func forEachPreparedOp(readers: ReaderPool, libraryID: UUID, after: Int64, upTo: Int64?, _ materializer: Materializer,
                                  _ body: (Op, [SQLStep]) throws -> Void) throws {
        try PrefetchChannel<(op: Op, steps: [SQLStep])>.stream(capacity: 4, produce: { channel in
            try readers.read { db in
                // One pass in order: a small page cache is enough, and keeps the rebuild's peak down.
                try db.execute("PRAGMA cache_size = -\(prefetchCacheKilobytes)")
                defer { try? db.execute("PRAGMA cache_size = -\(Database.Options.defaultCacheKilobytes)") }
                var chunk: PreparedOps = []
                chunk.reserveCapacity(prefetchChunkOps)
                try LogTables.forEachConfirmedOp(in: db, libraryID: libraryID, after: after, upTo: upTo) { op in
                    chunk.append((op, materializer.steps(for: op)))
                    if chunk.count == prefetchChunkOps {
                        try channel.put(chunk)
                        chunk.removeAll(keepingCapacity: true)
                    }
                }
                if !chunk.isEmpty { try channel.put(chunk) }
            }
        }, consume: { item in try body(item.op, item.steps) })
    }
}

/// A bounded hand-over of chunks (ops, snapshot rows) from a reading thread to the writer.
final class PrefetchChannel<Element>: @unchecked Sendable {
    typealias Chunk = [Element]

    private let condition = NSCondition()
    private let capacity: Int
    private var chunks: [Chunk] = []
    /// Chunks the consumer has applied, freed by the producer (see `recycle`).
    private var spent: [Chunk] = []
    private var finished = false
    private var failure: Error?
    private var cancelled = false

    init(capacity: Int) { self.capacity = capacity }

    /// Runs `produce` on a new thread, putting chunks into a channel of `capacity`, while this
    /// thread hands each element to `consume` in order and gives each chunk back to be freed
    /// there. Either side failing stops both (the producer's error is rethrown after the
    /// elements it put); the producing thread is waited for before this returns.
    static func stream(capacity: Int, produce: @escaping @Sendable (PrefetchChannel) throws -> Void,
                       consume: (Element) throws -> Void) throws {
        let channel = PrefetchChannel(capacity: capacity)
        let producer = Thread {
            do {
                try produce(channel)
                channel.finish(nil)
            } catch {
                channel.finish(error)
            }
        }
        producer.start()
        defer {
            channel.cancel()
            channel.waitUntilFinished()
        }
        while let chunk = try channel.take() {
            for element in chunk { try consume(element) }
            channel.recycle(chunk)
        }
    }

    /// Waits for room; throws once the consumer has stopped. Frees the chunks the consumer
    /// has handed back, on this thread and outside the lock.
    func put(_ chunk: Chunk) throws {
        var applied: [Chunk] = []
        defer { applied.removeAll() }  // runs after the unlock below
        condition.lock()
        defer { condition.unlock() }
        while chunks.count >= capacity && !cancelled { condition.wait() }
        if cancelled { throw PrefetchCancelled() }
        chunks.append(chunk)
        swap(&applied, &spent)
        condition.broadcast()
    }

    /// The consumer is done with `chunk`: its ops, statements and values are freed by the
    /// producer's next `put`. Freeing a million ops' strings and arrays (allocated on the
    /// producer's thread) was about a tenth of the writer's time in a rebuild.
    func recycle(_ chunk: Chunk) {
        condition.lock()
        spent.append(chunk)
        condition.unlock()
    }

    /// The producer is done (with its error, if any).
    func finish(_ error: Error?) {
        condition.lock()
        finished = true
        failure = error
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk; nil at the end; rethrows the producer's error.
    func take() throws -> Chunk? {
        condition.lock()
        defer { condition.unlock() }
        while chunks.isEmpty && !finished { condition.wait() }
        if !chunks.isEmpty {
            let chunk = chunks.removeFirst()
            condition.broadcast()
            return chunk
        }
        if let failure, !(failure is PrefetchCancelled) { throw failure }
        return nil
    }

    /// The consumer stops: a waiting or later `put` throws.
    func cancel() {
        condition.lock()
        cancelled = true
        chunks.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    func waitUntilFinished() {
        condition.lock()
        while !finished { condition.wait() }
        condition.unlock()
    }
}

/// What `PrefetchChannel.put` throws once the consumer has stopped.
struct PrefetchCancelled: Error {}
