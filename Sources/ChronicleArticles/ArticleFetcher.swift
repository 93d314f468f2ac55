import ChronicleCore
import ChronicleServer
import ChronicleServerStore
import ChronicleStore
import Foundation

/// Reads the pages people save (the article fetcher), a `ServerExtension` of the read-it-later
/// app: an `article.save` the server accepts is queued, its URL fetched (`ArticlePage`) and read (`ArticleExtractor`), and the
/// server appends an `article.parsed` op with the text and its word count, and the title and
/// author where the row has none. Devices get it with their next pull like any op; the text is
/// what `article_text_fts` searches.
///
/// A page that fails for good (404, not HTML, too large, a refused address), or keeps failing
/// `attemptsMax` times, is given empty text and a word count of 0, so no server fetches it again
/// and an app can say it could not be read. Nothing is kept of the queue: each library opened
/// is searched for saved pages with no text yet (`ServerLibrary.rowsAwaiting`), so a page the
/// server stopped before reading is read after its restart.
///
/// ```swift
/// var policy = ArticleFetchPolicy()          // public addresses only
/// let server = try SyncServer(dataDirectory: dir, extensions: [ArticleFetcher(policy: policy)])
/// ```
public final class ArticleFetcher: ServerExtension, @unchecked Sendable {
    struct Key: Hashable { var library: UUID; var article: UUID }
    enum Work { case page(Key, url: String, attempt: Int), scan(UUID) }

    public let policy: ArticleFetchPolicy
    /// The service it works for (set once it is made; weak: the service owns the fetcher).
    private weak var service: SyncService?
    /// The service's log, once attached.
    private var log = ServerLog(to: nil)
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
    public var counts: (parsed: Int, unreadable: Int, retried: Int) {
        condition.lock()
        defer { condition.unlock() }
        return tally
    }

    /// A fetcher that reads pages under `policy` once a service is given it (`SyncServer`'s
    /// `extensions`); it starts its threads with the first page.
    public init(policy: ArticleFetchPolicy) {
        self.policy = policy
    }

    // MARK: - ServerExtension

    public var summary: String {
        policy.allowsPrivateAddresses ? "article fetcher (private addresses too)" : "article fetcher"
    }

    public func attach(to service: SyncService) {
        condition.lock()
        self.service = service
        log = service.log
        condition.unlock()
    }

    /// Queues the pages of the `article.save` ops a push accepted.
    public func accepted(_ ops: [Op], library: UUID) {
        for op in ops where op.type == ArticleContract.saveOp {
            if let url = op.payload[ArticleContract.urlField]?.textValue { enqueue(library: library, article: op.entityID, url: url) }
        }
    }

    /// Pages saved while no server read them (it stopped first) are read now.
    public func opened(library: UUID) {
        scan(library: library)
    }

    /// The fetcher's `/metrics` lines.
    public func metricsText() -> String {
        let counts = counts, pending = pending
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

    // MARK: - The queue

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
    public func stop() {
        condition.lock()
        stopping = true
        queue.removeAll()
        condition.broadcast()
        while appending > 0 { condition.wait() }
        condition.unlock()
    }

    /// Work in the queue (pages and scans), for tests and `/metrics`.
    public var pending: Int {
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
                for (article, url) in try library(id).rowsAwaiting(entity: ArticleContract.entity, field: ArticleContract.textField,
                                                                      urlField: ArticleContract.urlField, limit: 10_000) {
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
                guard row.exists, !row.deleted, row.fields[ArticleContract.textField]?.isNull ?? true,
                      let address = row.fields[ArticleContract.urlField]?.textValue else { return false }
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
                var payload: Payload = [ArticleContract.textField: .text(parsed.text),
                                        ArticleContract.wordCountField: .integer(Int64(parsed.wordCount))]
                if let title = parsed.title, row.fields[ArticleContract.titleField]?.textValue?.isEmpty ?? true {
                    payload[ArticleContract.titleField] = .text(title)
                }
                if let author = parsed.author, row.fields[ArticleContract.authorField]?.textValue?.isEmpty ?? true {
                    payload[ArticleContract.authorField] = .text(author)
                }
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
                condition.lock()
                let service = self.service
                condition.unlock()
                guard let service else { throw ChronicleError(.invariantViolated, "The article fetcher has no server.") }
                // Wakes the library's parked pulls, as a push does.
                let op = try service.appendServerOp(ArticleContract.parsedOp, entity: key.article, payload: payload, library: key.library)
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
