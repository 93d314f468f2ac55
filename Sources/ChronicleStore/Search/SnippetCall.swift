import CSQLite
import ChronicleCore

/// FTS5 calls this for each `chronicle_snippet(…)` of a matched row (`SearchSnippet`): the
/// passage is picked from the phrase instances (1), placed (2), its column tokenized only up
/// to its end (3) and marked (4).
func chronicleSnippet(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ context: OpaquePointer?,
                      _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let context else { return }
    do {
        let call = try SnippetCall(api, fts, count, values)
        let instances = try call.instances()
        let (column, start) = call.window(over: instances)
        guard let (text, bytes) = try call.text(of: column) else { return chronicleResult(context, []) }
        let window = try call.tokenize(text, bytes, from: start)
        guard !window.ranges.isEmpty else { return chronicleResult(context, []) }
        chronicleResult(context, call.passage(text, bytes, window, instances, column: column, start: start))
    } catch let failure as SnippetCall.Failure {
        fail(context, failure.message, code: failure.code)
    } catch {
        fail(context, "\(error)", code: SQLITE_ERROR)
    }
}

/// One call of `chronicle_snippet`: the FTS5 functions it reads through and its arguments.
struct SnippetCall {
    /// What to answer the call with instead of a passage.
    struct Failure: Error {
        var message: String
        var code: Int32
    }

    private let fts: OpaquePointer
    private let values: UnsafeMutablePointer<OpaquePointer?>
    private let instCount: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> Int32
    private let inst: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?) -> Int32
    private let phraseSize: @convention(c) (OpaquePointer?, Int32) -> Int32
    private let phraseCount: @convention(c) (OpaquePointer?) -> Int32
    private let columnCount: @convention(c) (OpaquePointer?) -> Int32
    private let columnSize: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int32>?) -> Int32
    private let columnText: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>?, UnsafeMutablePointer<Int32>?) -> Int32
    private let tokenizer: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutableRawPointer?,
                                          (@convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32, Int32, Int32) -> Int32)?) -> Int32
    /// Over a phrase index: the columns' text comes as arguments 5…, tokenized by `words`.
    private let pairs: Bool
    private let words: WordTokenizer?
    private let open: [UInt8], close: [UInt8], ellipsis: [UInt8]
    /// The passage's length in tokens.
    private let tokens: Int32

    init(_ api: UnsafePointer<Fts5ExtensionApi>?, _ fts: OpaquePointer?, _ count: Int32, _ values: UnsafeMutablePointer<OpaquePointer?>?) throws {
        guard let api, let fts, let values else {
            throw Failure(message: "expects an open marker, a close marker, an ellipsis and a token count", code: SQLITE_ERROR)
        }
        let a = api.pointee
        guard let instCount = a.xInstCount, let inst = a.xInst, let phraseSize = a.xPhraseSize, let phraseCount = a.xPhraseCount,
              let columnCount = a.xColumnCount, let columnSize = a.xColumnSize, let columnText = a.xColumnText,
              let tokenize = a.xTokenize, let userData = a.xUserData else {
            throw Failure(message: "this SQLite's FTS5 lacks a needed API", code: SQLITE_ERROR)
        }
        // Four arguments, or four and the text of every column over a phrase index.
        let pairs = count == 4 + columnCount(fts) && count > 4
        guard count == 4 || pairs else {
            throw Failure(message: "expects an open marker, a close marker, an ellipsis and a token count (and over a phrase index the text of every column)",
                          code: SQLITE_ERROR)
        }
        let words = userData(fts).map { Unmanaged<WordTokenizer>.fromOpaque($0).takeUnretainedValue() }
        if pairs && words == nil { throw Failure(message: "has no word tokenizer for a phrase index", code: SQLITE_ERROR) }
        (self.fts, self.values, self.pairs, self.words) = (fts, values, pairs, words)
        (self.instCount, self.inst, self.phraseSize, self.phraseCount) = (instCount, inst, phraseSize, phraseCount)
        (self.columnCount, self.columnSize, self.columnText, self.tokenizer) = (columnCount, columnSize, columnText, tokenize)
        (open, close, ellipsis) = (valueBytes(values[0]), valueBytes(values[1]), valueBytes(values[2]))
        tokens = Int32(max(1, min(64, sqlite3_value_int(values[3]))))
    }

    /// 1. The phrase instances, by column and offset.
    func instances() throws -> [Instance] {
        var n: Int32 = 0
        var rc = instCount(fts, &n)
        guard rc == SQLITE_OK else { throw Failure(message: "could not read the row's matches", code: rc) }
        let phrases = Int(max(0, phraseCount(fts)))
        var instances: [Instance] = []
        instances.reserveCapacity(Int(n))
        for i in 0..<n {
            var phrase: Int32 = 0, column: Int32 = 0, offset: Int32 = 0
            rc = inst(fts, i, &phrase, &column, &offset)
            guard rc == SQLITE_OK else { throw Failure(message: "could not read the row's matches", code: rc) }
            guard phrase >= 0, Int(phrase) < phrases else { continue }
            instances.append(Instance(phrase: phrase, column: column, offset: offset, size: max(1, phraseSize(fts, phrase)) + (pairs ? 1 : 0)))
        }
        instances.sort { ($0.column, $0.offset) < ($1.column, $1.offset) }
        return instances
    }

    /// 2. The window: from each instance, the distinct phrases (then instances) that fit in
    /// `tokens`; its column and first token. No instance (a match through NOT, say): the start of
    /// the first column with text.
    func window(over instances: [Instance]) -> (column: Int32, start: Int32) {
        guard !instances.isEmpty else { return (firstColumnWithText(), 0) }
        var best = (distinct: -1, total: 0, index: 0, end: Int32(0))
        var lastCounted = [Int](repeating: -1, count: Int(max(0, phraseCount(fts))))
        for i in instances.indices {
            let anchor = instances[i]
            var distinct = 0, total = 0, end = anchor.end
            var j = i
            while j < instances.count, instances[j].column == anchor.column, instances[j].offset < anchor.offset + tokens {
                let candidate = instances[j]
                if j == i || candidate.end <= anchor.offset + tokens {
                    if lastCounted[Int(candidate.phrase)] != i { lastCounted[Int(candidate.phrase)] = i; distinct += 1 }
                    total += 1
                    end = max(end, candidate.end)
                }
                j += 1
            }
            if distinct > best.distinct || (distinct == best.distinct && total > best.total) {
                best = (distinct, total, i, end)
            }
        }
        let anchor = instances[best.index]
        let span = min(tokens, best.end - anchor.offset)
        var start = anchor.offset - (tokens - span) / 2
        var size: Int32 = 0
        if columnSize(fts, anchor.column, &size) == SQLITE_OK, start + tokens > size { start = size - tokens }
        return (anchor.column, max(0, start))
    }

    private func firstColumnWithText() -> Int32 {
        for c in 0..<columnCount(fts) {
            var text: UnsafePointer<CChar>?
            var bytes: Int32 = 0
            if pairs {
                if sqlite3_value_bytes(values[Int(4 + c)]) > 0 { return c }
            } else if columnText(fts, c, &text, &bytes) == SQLITE_OK, bytes > 0 { return c }
        }
        return 0
    }

    /// 3a. The column's text and its length in bytes; nil when it has none.
    func text(of column: Int32) throws -> (UnsafePointer<CChar>, Int32)? {
        var text: UnsafePointer<CChar>?
        var bytes: Int32 = 0
        if pairs {
            // The text, then its length (sqlite3_value_bytes after sqlite3_value_text, as SQLite asks).
            let value = values[Int(4 + column)]
            text = UnsafeRawPointer(sqlite3_value_text(value)).map { $0.assumingMemoryBound(to: CChar.self) }
            bytes = sqlite3_value_bytes(value)
        } else {
            let rc = columnText(fts, column, &text, &bytes)
            guard rc == SQLITE_OK else { throw Failure(message: "could not read the row's text", code: rc) }
        }
        guard let text, bytes > 0 else { return nil }
        return (text, bytes)
    }

    /// 3b. The text tokenized only up to the window's end: the byte ranges of its tokens.
    func tokenize(_ text: UnsafePointer<CChar>, _ bytes: Int32, from start: Int32) throws -> TokenWindow {
        let window = TokenWindow(start: start, end: start + tokens)
        let rc = withExtendedLifetime(window) {
            let context = Unmanaged.passUnretained(window).toOpaque()
            if pairs, let words { return words.tokenize(text, bytes, context, collectToken) }
            return tokenizer(fts, text, bytes, context, collectToken)
        }
        guard rc == SQLITE_OK || rc == SQLITE_DONE else { throw Failure(message: "could not tokenize the row's text", code: rc) }
        return window
    }

    /// 4. The passage, each run of matched tokens between one pair of markers. Like snippet(), a
    /// passage at the text's start or end keeps what lies before its first token or after its
    /// last (an opening quote, a closing full stop).
    func passage(_ text: UnsafePointer<CChar>, _ bytes: Int32, _ window: TokenWindow, _ instances: [Instance],
                 column: Int32, start: Int32) -> [UInt8] {
        var lit = [Bool](repeating: false, count: window.ranges.count)
        for instance in instances where instance.column == column {
            let from = max(instance.offset, start), to = min(instance.end, start + Int32(window.ranges.count))
            if from < to { for t in from..<to { lit[Int(t - start)] = true } }
        }
        let source = UnsafeRawBufferPointer(start: text, count: Int(bytes))
        func copy(_ from: Int32, _ to: Int32, into out: inout [UInt8]) {
            let lower = Int(max(0, min(from, bytes))), upper = Int(max(0, min(to, bytes)))
            if lower < upper { out.append(contentsOf: source[lower..<upper]) }
        }
        let first = window.ranges[0]
        var out: [UInt8] = []
        out.reserveCapacity(Int(window.ranges.last!.end - first.start) + 32)
        if start > 0 { out += ellipsis }
        var cursor = start > 0 ? first.start : 0, previousEnd = cursor, inRun = false
        for (k, range) in window.ranges.enumerated() {
            if lit[k] && !inRun {
                copy(cursor, range.start, into: &out)
                out += open
                cursor = range.start
                inRun = true
            } else if !lit[k] && inRun {
                copy(cursor, previousEnd, into: &out)
                out += close
                cursor = previousEnd
                inRun = false
            }
            previousEnd = range.end
        }
        copy(cursor, previousEnd, into: &out)
        if inRun { out += close }
        if window.more { out += ellipsis } else { copy(previousEnd, bytes, into: &out) }
        return out
    }
}
