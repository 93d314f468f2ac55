import Foundation

/// Turns whatever a person typed into a safe FTS5 query.
///
/// Every word becomes a quoted FTS5 string, so operators (`AND`, `NEAR`, `-`,
/// `:`, parentheses) are taken literally and nothing typed can raise an SQL
/// error. `"two words"` is a phrase, `word*` a prefix, words are ANDed; a
/// term with no letter or digit (emoji, stray punctuation) is dropped because
/// the tokenizer would ignore it anyway.
///
/// ```swift
/// SearchQuery("swift conc*").match      // "swift" "conc"*
/// SearchQuery("\"offline first\" (").match  // "offline first"
/// ```
public struct SearchQuery: Sendable, Equatable {
    /// One word of a query, or a prefix (`sync*`).
    public struct Term: Sendable, Equatable {
        public var text: String
        public var isPrefix: Bool
    }

    public let terms: [Term]

    public init(_ input: String) {
        var terms: [Term] = []
        var index = input.startIndex
        func add(_ raw: Substring, prefix: Bool) {
            let text = String(raw)
            guard text.contains(where: { $0.isLetter || $0.isNumber }) else { return }
            terms.append(Term(text: text, isPrefix: prefix))
        }
        while index < input.endIndex {
            let character = input[index]
            if character.isWhitespace {
                index = input.index(after: index)
            } else if character == "\"" {
                let start = input.index(after: index)
                let end = input[start...].firstIndex(of: "\"") ?? input.endIndex
                var next = end < input.endIndex ? input.index(after: end) : end
                var prefix = false
                if next < input.endIndex, input[next] == "*" { prefix = true; next = input.index(after: next) }
                add(input[start..<end], prefix: prefix)
                index = next
            } else {
                let end = input[index...].firstIndex(where: { $0.isWhitespace || $0 == "\"" }) ?? input.endIndex
                var word = input[index..<end]
                var prefix = false
                while word.hasSuffix("*") { word = word.dropLast(); prefix = true }
                add(word, prefix: prefix)
                index = end
            }
        }
        self.terms = terms
    }

    public var isEmpty: Bool { terms.isEmpty }

    /// The FTS5 MATCH expression.
    public var match: String {
        terms.map { term in
            "\"" + term.text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (term.isPrefix ? "*" : "")
        }.joined(separator: " ")
    }
}

