import ChronicleCore
import Foundation

/// A deterministic stream of confirmed ops, as a server would deliver a busy
/// read-it-later library: several devices saving, tagging, reading,
/// highlighting, noting, organising collections and playing episodes, plus the
/// server's own ops (the premium plan, parsed article text). `serverSeq` is
/// gap-free from 1. Streams in batches, so a million ops never sit in memory,
/// and the same seed always gives the same ops (the baselines regenerate them).
/// Ids are time-ordered (version 7) from the author's clock, as devices make them.
struct ConfirmedWorkload {
    /// Op mix in parts per thousand; `article.parsed` comes on top (about 1 in 50 saves).
    static let mix: [(type: String, weight: Int)] = [
        ("article.save", 100), ("article.update", 50), ("article.progress", 170), ("article.tag", 150),
        ("article.untag", 20), ("article.delete", 10), ("article.restore", 5),
        ("highlight.create", 100), ("highlight.update", 25), ("highlight.delete", 10),
        ("note.create", 50), ("note.update", 20), ("note.delete", 5),
        ("collection.create", 5), ("collection.update", 5), ("collection.add", 70), ("collection.remove", 10),
        ("episode.save", 30), ("episode.update", 10), ("episode.position", 150), ("episode.delete", 5),
    ]

    let libraryID: UUID
    let total: Int
    private(set) var produced = 0
    private var rng: SplitMix64
    private let vocabulary: Vocabulary
    private let devices: [UUID]
    private var deviceSeqs: [Int64]
    private var deviceClocks: [Int64]
    private var serverSeq: Int64 = 0
    private var serverTime: Int64 = 1_780_000_000_000
    private var serverDeviceSeq: Int64 = 0
    private var articles: [UUID] = []
    private var highlights: [UUID] = []
    private var notes: [UUID] = []
    private var collections: [UUID] = []
    private var episodes: [UUID] = []
    private var deletedArticles: [UUID] = []
    private var parseQueue: [UUID] = []
    private var parseHead = 0
    private let tags: [String]
    private let cumulativeMix: [Int]
    /// Server-authored ops (plan + parsed text) produced so far.
    private(set) var serverOps = 0
    /// Op count per type, for the report.
    private(set) var typeCounts: [String: Int] = [:]

    init(seed: UInt64, total: Int, libraryID: UUID, vocabulary: Vocabulary) {
        self.total = total
        self.libraryID = libraryID
        self.vocabulary = vocabulary
        rng = SplitMix64(seed: seed)
        var seeded = SplitMix64(seed: seed ^ 0xD1CE)
        devices = (0..<5).map { _ in seeded.uuid() }
        deviceSeqs = Array(repeating: 0, count: 5)
        deviceClocks = (0..<5).map { 1_780_000_000_000 - Int64($0) * 37_000 }
        tags = (0..<300).map { vocabulary.words[40 + $0 * 7 % max(1, vocabulary.count - 40)] }
        var running = 0
        cumulativeMix = Self.mix.map { running += $0.weight; return running }
        precondition(running == 1000, "the op mix must add up to 1000")
    }

    var isDone: Bool { produced >= total }

    /// The next `count` ops (fewer at the end of the stream).
    mutating func nextBatch(_ count: Int) -> [Op] {
        let n = min(count, total - produced)
        var batch: [Op] = []
        batch.reserveCapacity(n)
        for _ in 0..<n { batch.append(nextOp()) }
        return batch
    }

    private mutating func nextOp() -> Op {
        produced += 1
        serverSeq += 1
        serverTime += Int64(rng.int(1...2_000))
        if serverSeq == 1 {
            return serverOp("library.plan", entity: libraryID, payload: ["plan": .text("premium")])
        }
        if parseHead < parseQueue.count, rng.chance(0.1) {
            let article = parseQueue[parseHead]
            parseHead += 1
            let words = rng.int(300...1_200)
            return serverOp("article.parsed", entity: article, payload: [
                "title": .text(vocabulary.title(words: rng.int(4...9), &rng)),
                "text": .text(vocabulary.text(words: words, &rng)),
                "word_count": .integer(Int64(words)),
            ])
        }
        let roll = rng.below(1000)
        let type = Self.mix[cumulativeMix.firstIndex { roll < $0 }!].type
        return deviceOp(type)
    }

    private mutating func serverOp(_ type: String, entity: UUID, payload: Payload) -> Op {
        serverDeviceSeq += 1
        serverOps += 1
        typeCounts[type, default: 0] += 1
        return Op(opID: rng.uuid7(milliseconds: serverTime), libraryID: libraryID, deviceID: Op.serverDeviceID, deviceSeq: serverDeviceSeq,
                  type: type, version: 1, entityID: entity, payload: payload, deviceTime: serverTime,
                  baseSeq: serverSeq - 1, serverSeq: serverSeq, serverTime: serverTime)
    }

    /// Half the edits go to recent rows, half anywhere in the library.
    private mutating func target(_ pool: [UUID]) -> UUID? {
        guard !pool.isEmpty else { return nil }
        if rng.chance(0.5) { return pool[pool.count - 1 - rng.below(min(pool.count, 1_000))] }
        return pool[rng.below(pool.count)]
    }

    private mutating func deviceOp(_ wanted: String) -> Op {
        let device = rng.below(devices.count)
        deviceSeqs[device] += 1
        deviceClocks[device] += Int64(rng.int(200...5_000))
        let now = deviceClocks[device]
        var type = wanted
        var entity: UUID
        var payload: Payload = [:]
        // An op whose target does not exist yet becomes a save.
        let possible: Bool
        switch type {
        case "article.save", "collection.create", "episode.save": possible = true
        case "highlight.update", "highlight.delete": possible = !highlights.isEmpty
        case "note.update", "note.delete": possible = !notes.isEmpty
        case "collection.update": possible = !collections.isEmpty
        case "collection.add", "collection.remove": possible = !collections.isEmpty && !articles.isEmpty
        case "episode.update", "episode.position", "episode.delete": possible = !episodes.isEmpty
        case "article.restore": possible = !deletedArticles.isEmpty
        default: possible = !articles.isEmpty
        }
        if !possible { type = "article.save" }

        switch type {
        case "article.save":
            entity = rng.uuid7(milliseconds: now)
            articles.append(entity)
            payload["url"] = .text("https://\(vocabulary.words[rng.below(vocabulary.count)]).example/\(rng.below(1_000_000))")
            payload["title"] = .text(vocabulary.title(words: rng.int(3...10), &rng))
            if rng.chance(0.3) { payload["byline"] = .text(vocabulary.title(words: 2, &rng)) }
            if rng.chance(0.1) { payload["favorite"] = .bool(true) }
            if rng.below(50) == 0 { parseQueue.append(entity) }
        case "article.update":
            entity = target(articles)!
            if rng.chance(0.5) { payload["title"] = .text(vocabulary.title(words: rng.int(3...10), &rng)) }
            if rng.chance(0.4) { payload["status"] = .text(rng.chance(0.7) ? "archived" : "saved") }
            if rng.chance(0.3) { payload["favorite"] = .bool(rng.chance(0.5)) }
            if payload.isEmpty || rng.chance(0.1) { payload["byline"] = .text(vocabulary.title(words: 2, &rng)) }
        case "article.progress":
            entity = target(articles)!
            payload["progress"] = .real(Double(rng.below(101)) / 100)
        case "article.tag", "article.untag":
            entity = target(articles)!
            payload["tag"] = .text(tags[min(tags.count - 1, vocabulary.sampleRank(&rng) % tags.count)])
        case "article.delete":
            entity = target(articles)!
            deletedArticles.append(entity)
            if deletedArticles.count > 1_000 { deletedArticles.removeFirst(500) }
        case "article.restore":
            entity = deletedArticles.remove(at: rng.below(deletedArticles.count))
        case "highlight.create":
            entity = rng.uuid7(milliseconds: now)
            highlights.append(entity)
            payload["article_id"] = .text(target(articles)!.lowercased)
            payload["quote"] = .text(vocabulary.text(words: rng.int(5...30), &rng))
            payload["position"] = .integer(Int64(rng.below(20_000)))
            payload["color"] = .text(rng.pick(["yellow", "green", "blue", "pink", "purple"]))
            if rng.chance(0.2) { payload["note"] = .text(vocabulary.text(words: rng.int(3...20), &rng)) }
        case "highlight.update":
            entity = target(highlights)!
            if rng.chance(0.5) { payload["color"] = .text(rng.pick(["yellow", "green", "blue", "pink", "purple"])) }
            else { payload["note"] = .text(vocabulary.text(words: rng.int(3...20), &rng)) }
        case "note.create":
            entity = rng.uuid7(milliseconds: now)
            notes.append(entity)
            payload["article_id"] = .text(target(articles)!.lowercased)
            payload["body"] = .text(vocabulary.text(words: rng.int(10...80), &rng))
        case "note.update":
            entity = target(notes)!
            payload["body"] = .text(vocabulary.text(words: rng.int(10...80), &rng))
        case "collection.create":
            entity = rng.uuid7(milliseconds: now)
            collections.append(entity)
            payload["name"] = .text(vocabulary.title(words: rng.int(1...3), &rng))
            payload["position"] = .real(Double(collections.count))
        case "collection.update":
            entity = target(collections)!
            payload["name"] = .text(vocabulary.title(words: rng.int(1...3), &rng))
        case "collection.add", "collection.remove":
            entity = target(collections)!
            payload["article_id"] = .text(target(articles)!.lowercased)
        case "episode.save":
            entity = rng.uuid7(milliseconds: now)
            episodes.append(entity)
            payload["title"] = .text(vocabulary.title(words: rng.int(3...8), &rng))
            payload["feed"] = .text("https://feeds.\(vocabulary.words[rng.below(vocabulary.count)]).example/rss")
            payload["audio_ref"] = .text("sha256:\(String(rng.next(), radix: 16))\(String(rng.next(), radix: 16))")
            payload["duration"] = .real(Double(rng.int(300...7_200)))
            if rng.chance(0.05) { payload["transcript"] = .text(vocabulary.text(words: rng.int(200...800), &rng)) }
        case "episode.update":
            entity = target(episodes)!
            payload["title"] = .text(vocabulary.title(words: rng.int(3...8), &rng))
        case "episode.position":
            entity = target(episodes)!
            payload["position"] = .real(Double(rng.below(7_200)))
        case "episode.delete", "note.delete", "highlight.delete":
            entity = target(type.hasPrefix("episode") ? episodes : type.hasPrefix("note") ? notes : highlights)!
        default:
            preconditionFailure("no generator for \(type)")
        }

        typeCounts[type, default: 0] += 1
        return Op(opID: rng.uuid7(milliseconds: now), libraryID: libraryID, deviceID: devices[device], deviceSeq: deviceSeqs[device],
                  type: type, version: 1, entityID: entity, payload: payload, deviceTime: deviceClocks[device],
                  baseSeq: max(0, serverSeq - 1 - Int64(rng.below(50))), serverSeq: serverSeq, serverTime: serverTime)
    }
}
