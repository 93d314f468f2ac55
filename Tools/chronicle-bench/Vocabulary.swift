import ChronicleCore
import Foundation

/// A made-up vocabulary whose word frequencies follow Zipf's law, so text and
/// queries have realistic hit counts: a handful of words are everywhere, most
/// are rare. Shorter words are the frequent ones, as in natural language.
struct Vocabulary: Sendable {
    let words: [String]
    /// Cumulative Zipf weights, `cumulative[r]` = sum of 1/(k+1)^s for k ≤ r.
    private let cumulative: [Double]

    init(size: Int, exponent: Double = 1.0, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
                      "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr"]
        let vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
        let codas = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st"]
        var seen = Set<String>()
        var made: [(word: String, order: Int)] = []
        while made.count < size {
            let syllables = 1 + rng.below(4)
            var word = ""
            for _ in 0..<syllables { word += rng.pick(onsets) + rng.pick(vowels) }
            word += rng.pick(codas)
            if seen.insert(word).inserted { made.append((word, made.count)) }
        }
        made.sort { ($0.word.count, $0.order) < ($1.word.count, $1.order) }
        words = made.map(\.word)
        var total = 0.0
        cumulative = (0..<size).map { rank in
            total += 1 / pow(Double(rank + 1), exponent)
            return total
        }
    }

    var count: Int { words.count }

    /// A rank drawn from the Zipf distribution.
    func sampleRank(_ rng: inout SplitMix64) -> Int {
        let target = rng.unit() * cumulative[cumulative.count - 1]
        var low = 0, high = cumulative.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cumulative[mid] < target { low = mid + 1 } else { high = mid }
        }
        return low
    }

    func sample(_ rng: inout SplitMix64) -> String { words[sampleRank(&rng)] }

    /// `count` Zipf-distributed words separated by spaces, with the odd sentence break.
    func text(words count: Int, _ rng: inout SplitMix64) -> String {
        var out = ""
        out.reserveCapacity(count * 8)
        for index in 0..<count {
            if index > 0 { out += rng.below(14) == 0 ? ". " : " " }
            out += sample(&rng)
        }
        return out
    }

    /// A title-like phrase: `count` words, capitalised first.
    func title(words count: Int, _ rng: inout SplitMix64) -> String {
        let text = self.text(words: count, &rng).replacingOccurrences(of: ". ", with: " ")
        return text.prefix(1).uppercased() + text.dropFirst()
    }

    /// A rank drawn log-uniformly from `range`: as many queries for frequent words as for rare ones.
    func logUniformRank(_ range: Range<Int>, _ rng: inout SplitMix64) -> Int {
        let low = log(Double(max(range.lowerBound, 1))), high = log(Double(range.upperBound))
        return min(range.upperBound - 1, max(range.lowerBound, Int(exp(low + (high - low) * rng.unit()))))
    }
}
