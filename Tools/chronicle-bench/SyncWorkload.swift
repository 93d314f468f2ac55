import ChronicleCore
import ChronicleStore
import Foundation

/// `ConfirmedWorkload`'s library re-authored by one device, as unconfirmed ops it
/// can push: the same saves, tags, highlights, notes, collections and episodes,
/// each op keeping its id, type, entity, payload and device clock, but with this
/// device's id and a gap-free `deviceSeq` from 1.
///
/// A device may not push the server's own ops, so those change: the `library.plan`
/// op at the head of the stream is dropped (one extra op is generated so exactly
/// `total` remain), and each `article.parsed` becomes a `note.create` on that
/// article whose body is the parsed text. The library keeps the same number of
/// ops and the same long texts to store and index (in `note_fts` rather than
/// `article_text_fts`, which only a premium plan fills); what it loses is the
/// parsed title and word count.
struct PushableLibrary {
    private var workload: ConfirmedWorkload
    let deviceID: UUID
    let total: Int
    private var deviceSeq: Int64 = 0
    private var rng: SplitMix64
    private(set) var produced = 0
    /// `article.parsed` ops turned into notes.
    private(set) var convertedParsed = 0
    /// Server ops left out (`library.plan`).
    private(set) var droppedServerOps = 0

    init(seed: UInt64, total: Int, libraryID: UUID, deviceID: UUID, vocabulary: Vocabulary) {
        workload = ConfirmedWorkload(seed: seed, total: total + 1, libraryID: libraryID, vocabulary: vocabulary)
        self.deviceID = deviceID
        self.total = total
        rng = SplitMix64(seed: seed ^ 0x5E_4D_11)
    }

    var isDone: Bool { workload.isDone }

    /// Op count per type of the generated stream (before the conversion above).
    var sourceTypeCounts: [String: Int] { workload.typeCounts }

    /// The next `count` ops, ready to push (fewer at the end).
    mutating func nextBatch(_ count: Int) -> [Op] {
        var batch: [Op] = []
        batch.reserveCapacity(count)
        while batch.count < count && !workload.isDone {
            for op in workload.nextBatch(count - batch.count) {
                guard let mine = reauthor(op) else { continue }
                batch.append(mine)
            }
        }
        produced += batch.count
        return batch
    }

    private mutating func reauthor(_ source: Op) -> Op? {
        var op = source
        if source.isServerAuthored {
            switch source.type {
            case "article.parsed":
                guard case .text(let text)? = source.payload["text"] else { preconditionFailure("article.parsed without text") }
                op.type = "note.create"
                op.entityID = rng.uuid7(milliseconds: source.deviceTime)
                op.payload = ["article_id": .text(source.entityID.lowercased), "body": .text(text)]
                convertedParsed += 1
            default:
                droppedServerOps += 1
                return nil
            }
        }
        deviceSeq += 1
        op.deviceID = deviceID
        op.deviceSeq = deviceSeq
        op.serverSeq = nil
        op.serverTime = nil
        return op
    }
}

/// Writes a realistic mix of local ops through `DeviceStore.write` (one durable
/// transaction each, exactly as an app does): saves with url and title, tags,
/// reading progress, highlights, notes, title and status edits, collections and
/// the odd delete. Targets are this device's own live rows, so the store accepts
/// every write and so will the server.
struct LocalWriter {
    static let mix: [(type: String, weight: Int)] = [
        ("article.save", 25), ("article.update", 5), ("article.progress", 20), ("article.tag", 20),
        ("highlight.create", 12), ("highlight.update", 2), ("note.create", 8), ("note.update", 2),
        ("collection.create", 1), ("collection.add_article", 4), ("article.delete", 1),
    ]

    private var rng: SplitMix64
    private let vocabulary: Vocabulary
    private let tags: [String]
    private let cumulative: [Int]
    private var articles: [UUID] = []
    private var highlights: [UUID] = []
    private var notes: [UUID] = []
    private var collections: [UUID] = []
    private(set) var typeCounts: [String: Int] = [:]

    init(seed: UInt64, vocabulary: Vocabulary) {
        rng = SplitMix64(seed: seed)
        self.vocabulary = vocabulary
        tags = (0..<120).map { vocabulary.words[40 + $0 * 11 % max(1, vocabulary.count - 40)] }
        var running = 0
        cumulative = Self.mix.map { running += $0.weight; return running }
    }

    /// Writes `count` ops and returns them (as queued: unconfirmed, in deviceSeq order).
    @discardableResult
    mutating func write(_ count: Int, to store: DeviceStore, progressLabel: String? = nil) throws -> [Op] {
        var written: [Op] = []
        written.reserveCapacity(count)
        var throttle = Throttle()
        let started = nowNanoseconds()
        while written.count < count {
            written.append(try writeOne(to: store))
            if let progressLabel, throttle.ready(), written.count > 1 {
                let seconds = Double(nowNanoseconds() - started) / 1e9
                progress("\(progressLabel): \(formatCount(Double(written.count)))/\(formatCount(Double(count))) local writes, \(formatCount(Double(written.count) / seconds)) writes/s")
            }
        }
        return written
    }

    private mutating func pick(_ pool: [UUID]) -> UUID {
        // Half the edits go to recent rows, half anywhere.
        if rng.chance(0.5) { return pool[pool.count - 1 - rng.below(min(pool.count, 200))] }
        return pool[rng.below(pool.count)]
    }

    private mutating func writeOne(to store: DeviceStore) throws -> Op {
        let roll = rng.below(cumulative.last!)
        var type = Self.mix[cumulative.firstIndex { roll < $0 }!].type
        switch type {
        case "highlight.update" where highlights.isEmpty, "note.update" where notes.isEmpty,
             "collection.add_article" where collections.isEmpty:
            type = "article.save"
        case "article.delete" where articles.count < 20:
            type = "article.save"
        default:
            if articles.isEmpty { type = "article.save" }
        }
        var entity: UUID? = nil
        var payload: Payload = [:]
        switch type {
        case "article.save":
            payload["url"] = .text("https://\(vocabulary.words[rng.below(vocabulary.count)]).example/\(rng.below(1_000_000))")
            payload["title"] = .text(vocabulary.title(words: rng.int(3...10), &rng))
            if rng.chance(0.3) { payload["author"] = .text(vocabulary.title(words: 2, &rng)) }
        case "article.update":
            entity = pick(articles)
            if rng.chance(0.5) { payload["title"] = .text(vocabulary.title(words: rng.int(3...10), &rng)) }
            else { payload["status"] = .text(rng.chance(0.7) ? "archived" : "saved") }
        case "article.progress":
            entity = pick(articles)
            payload["progress"] = .real(Double(rng.below(101)) / 100)
        case "article.tag":
            entity = pick(articles)
            payload["tag"] = .text(tags[vocabulary.sampleRank(&rng) % tags.count])
        case "article.delete":
            let index = rng.below(articles.count)
            entity = articles.remove(at: index)
        case "highlight.create":
            payload["article_id"] = .text(pick(articles).lowercased)
            payload["quote"] = .text(vocabulary.text(words: rng.int(5...30), &rng))
            payload["position"] = .integer(Int64(rng.below(20_000)))
            payload["color"] = .text(rng.pick(["yellow", "green", "blue", "pink", "purple"]))
            if rng.chance(0.2) { payload["note"] = .text(vocabulary.text(words: rng.int(3...20), &rng)) }
        case "highlight.update":
            entity = pick(highlights)
            payload["note"] = .text(vocabulary.text(words: rng.int(3...20), &rng))
        case "note.create":
            payload["article_id"] = .text(pick(articles).lowercased)
            payload["body"] = .text(vocabulary.text(words: rng.int(10...80), &rng))
        case "note.update":
            entity = pick(notes)
            payload["body"] = .text(vocabulary.text(words: rng.int(10...80), &rng))
        case "collection.create":
            payload["name"] = .text(vocabulary.title(words: rng.int(1...3), &rng))
        case "collection.add_article":
            entity = pick(collections)
            payload["article_id"] = .text(pick(articles).lowercased)
        default:
            preconditionFailure("no generator for \(type)")
        }
        let op = try store.write(type, entity: entity, payload: payload)
        switch type {
        case "article.save": articles.append(op.entityID)
        case "highlight.create": highlights.append(op.entityID)
        case "note.create": notes.append(op.entityID)
        case "collection.create": collections.append(op.entityID)
        default: break
        }
        typeCounts[type, default: 0] += 1
        return op
    }
}
