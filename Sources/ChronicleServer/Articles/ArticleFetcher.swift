import ChronicleCore
import ChronicleStore
import Foundation
import ChronicleServerStore

/// Reads the pages people save (the article fetcher): an `article.save` the server
/// accepts is queued, its URL fetched (`ArticlePage`) and read (`ArticleExtractor`), and the
/// server appends an `article.parsed` op with the text and its word count, and the title and
/// author where the row has none. Devices get it with their next pull like any op; the text is
/// what `article_text_fts` searches.
///
/// A page that fails for good (404, not HTML, too large, a refused address), or keeps failing
/// `attemptsMax` times, is given empty text and a word count of 0, so no server fetches it again
/// and an app can say it could not be read. Nothing is kept of the queue: each library opened
/// is searched for saved pages with no text yet (`ServerLibrary.rowsAwaiting`), so a page the
/// server stopped before reading is read after its restart.
final class ArticleFetcher: @unchecked Sendable {
    struct Key: Hashable { var library: UUID; var article: UUID }
    enum Work { case page(Key, url: String, attempt: Int), scan(UUID) }

    let policy: ArticleFetchPolicy
    /// The service it works for (set once it is made; weak: the service owns the fetcher).
    private weak var service: SyncService?
    private let log: ServerLog
    private let condition = NSCondition()
    private var queue: [(work: Work, notBefore: DispatchTime)] = []
    private var queued: Set<Key> = []
    private var scanning: Set<UUID> = []
    private var stopping = false
    private var running = 0
    /// Workers writing an op now: `stop` waits for them, not for fetches.
    private var appending = 0
    private var started = false
    /// Pages read, given empty text, and tries that failed (`/metrics`); read under the lock.
    private var tally = (parsed: 0, unreadable: 0, retried: 0)
    var counts: (parsed: Int, unreadable: Int, retried: Int) {
        condition.lock()
        defer { condition.unlock() }
        return tally
    }

    init(policy: ArticleFetchPolicy, log: ServerLog) {
        self.policy = policy
        self.log = log
    }

    func attach(_ service: SyncService) {
        condition.lock()
        self.service = service
        condition.unlock()
    }

    private func library(_ id: UUID) throws -> ServerLibrary {
        condition.lock()
        let service = self.service
        condition.unlock()
        guard let service else { throw ChronicleError(.invariantViolated, "The article fetcher has no server.") }
        return try service.library(id)
    }

    /// Queues the page `url` of `article` in `library`, unless it is queued already.
    func enqueue(library: UUID, article: UUID, url: String) {
        add(.page(Key(library: library, article: article), url: url, attempt: 0), after: 0)
    }

    /// Queues a search of `library` for saved pages with no text yet.
    func scan(library: UUID) {
        add(.scan(library), after: 0)
    }

    private func add(_ work: Work, after seconds: Double) {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return }
        switch work {
        case .page(let key, _, let attempt):
            guard attempt > 0 || !queued.contains(key) else { return }
            queued.insert(key)
        case .scan(let id):
            guard !scanning.contains(id) else { return }
            scanning.insert(id)
        }
        queue.append((work, .now() + seconds))
        if !started {
            started = true
            for index in 0..<max(1, policy.workers) {
                let thread = Thread { [self] in runWorker() }
                thread.name = "chronicle.articles.\(index)"
                thread.start()
            }
        }
        condition.signal()
    }

    /// Stops taking work, and returns once no worker is between a fetch and its op (a fetch
    /// under way is left to end on its own; its op is not written).
    func stop() {
        condition.lock()
        stopping = true
        queue.removeAll()
        condition.broadcast()
        while appending > 0 { condition.wait() }
        condition.unlock()
    }

    /// Work in the queue (pages and scans), for tests and `/metrics`.
    var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return queue.count + running
    }

    private func runWorker() {
        while let next = take() {
            let stop = handle(next)
            condition.lock()
            running -= 1
            if case .page(let key, _, _) = next, !stop { queued.remove(key) }
            if case .scan(let id) = next { scanning.remove(id) }
            condition.broadcast()
            condition.unlock()
        }
    }

    /// The next piece of work due, waiting for one; nil once stopping.
    private func take() -> Work? {
        condition.lock()
        defer { condition.unlock() }
        while !stopping {
            let now = DispatchTime.now()
            if let index = queue.firstIndex(where: { $0.notBefore <= now }) {
                running += 1
                return queue.remove(at: index).work
            }
            if let soonest = queue.map(\.notBefore).min() {
                let wait = Double(soonest.uptimeNanoseconds - min(soonest.uptimeNanoseconds, now.uptimeNanoseconds)) / 1e9
                _ = condition.wait(until: Date().addingTimeInterval(wait))
            } else {
                condition.wait()
            }
        }
        return nil
    }

    /// Does one piece of work; true where it queued the page again (it stays queued).
    private func handle(_ work: Work) -> Bool {
        switch work {
        case .scan(let id):
            do {
                for (article, url) in try library(id).rowsAwaiting(entity: "article", field: "text", urlField: "url", limit: 10_000) {
                    enqueue(library: id, article: article, url: url)
                }
            } catch {
                log.log("article_scan_failed", ["library": .text(id.lowercased), "error": .text("\(error)")])
            }
            return false
        case .page(let key, let url, let attempt):
            do {
                let target = try library(key.library)
                let row = try target.verdict(key.article)
                // Deleted, or read already (by another server). The address read is the row's (as the
                // server stored it), not the one queued.
                guard row.exists, !row.deleted, row.fields["text"]?.isNull ?? true, let address = row.fields["url"]?.textValue else { return false }
                let page = ArticlePage.fetch(address, policy: policy)
                var parsed = ParsedArticle(title: nil, author: nil, text: "", wordCount: 0, truncated: false)
                var reason: String?
                switch page {
                case .page(let bytes, let charset, let finalURL):
                    if let read = ArticleExtractor.extract(html: bytes, url: finalURL, charset: charset) { parsed = read } else { reason = "an empty page" }
                case .failed(let permanent, let why):
                    if !permanent && attempt + 1 < policy.attemptsMax {
                        let delay = policy.retryDelaysSeconds.isEmpty ? 60 : policy.retryDelaysSeconds[min(attempt, policy.retryDelaysSeconds.count - 1)]
                        condition.lock(); tally.retried += 1; condition.unlock()
                        log.log("article_retry", ["library": .text(key.library.lowercased), "article": .text(key.article.lowercased),
                                                  "attempt": .integer(Int64(attempt + 1)), "reason": .text(why), "in_s": .real(delay)])
                        add(.page(key, url: url, attempt: attempt + 1), after: delay)
                        return true
                    }
                    reason = why
                }
                var payload: Payload = ["text": .text(parsed.text), "word_count": .integer(Int64(parsed.wordCount))]
                if let title = parsed.title, row.fields["title"]?.textValue?.isEmpty ?? true { payload["title"] = .text(title) }
                if let author = parsed.author, row.fields["author"]?.textValue?.isEmpty ?? true { payload["author"] = .text(author) }
                condition.lock()
                let stopped = stopping
                if !stopped { appending += 1 }
                condition.unlock()
                guard !stopped else { return false }
                defer {
                    condition.lock()
                    appending -= 1
                    condition.broadcast()
                    condition.unlock()
                }
                let op = try target.appendServerOp("article.parsed", entity: key.article, payload: payload)
                condition.lock()
                let service = self.service
                condition.unlock()
                service?.appended(by: op)
                condition.lock()
                if reason == nil { tally.parsed += 1 } else { tally.unreadable += 1 }
                condition.unlock()
                var fields: [String: Value] = ["library": .text(key.library.lowercased), "article": .text(key.article.lowercased),
                                               "words": .integer(Int64(parsed.wordCount)), "seq": .integer(op.serverSeq ?? 0)]
                if let reason { fields["unreadable"] = .text(reason) }
                if parsed.truncated { fields["truncated"] = .bool(true) }
                log.log("article_parsed", fields)
            } catch {
                log.log("article_fetch_failed", ["library": .text(key.library.lowercased), "article": .text(key.article.lowercased),
                                                 "error": .text("\(error)")])
            }
            return false
        }
    }
}
