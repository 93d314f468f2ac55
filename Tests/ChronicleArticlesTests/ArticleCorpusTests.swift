@testable import ChronicleArticles
import Foundation
import Testing

/// Replays what libFuzzer kept for the page reader (`Tests/Fuzz/Corpus/article/`) and every
/// input it ever stopped on (`Tests/Fuzz/Crashes/article/`) through `ArticleExtractor.extract`,
/// checking the contract the fuzzer enforces (`ArticleContract`). Refresh the corpus with
/// `bash Tools/fuzz/fuzz.sh article` (`Tools/fuzz/README.md`).
@Suite struct ArticleCorpusTests {
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz")

    /// What libFuzzer kept for `target`, and every input it stopped on.
    static func inputs(_ target: String = "article") -> [URL] {
        ["Corpus", "Crashes"].flatMap { kind -> [URL] in
            let root = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target)
            return ((try? FileManager.default.contentsOfDirectory(at: root, includingPropertiesForKeys: nil)) ?? [])
        }.sorted { $0.path < $1.path }
    }

    @Test func everyKeptInputIsReadWithinTheContract() throws {
        let inputs = Self.inputs()
        #expect(inputs.count >= 3, "expected the article corpus under \(Self.fuzzDirectory.path)/Corpus/article")
        for file in inputs {
            let bytes = Array(try Data(contentsOf: file))
            for charset in [nil, "utf-8", "iso-8859-1"] as [String?] {
                #expect(ArticleContract.check(bytes, charset: charset) == nil, "\(file.lastPathComponent), charset \(charset ?? "none")")
            }
        }
    }

    /// The first finding: bytes libxml2 took for UCS-4 and could not convert gave no document (and
    /// a line on stderr); now they are read as UTF-8, then Latin-1, and give an answer.
    @Test func bytesLibxml2CannotConvertStillGiveAnAnswer() throws {
        let bytes: [UInt8] = [0x3C, 0, 0, 0, 0, 0, 0, 0] + Array("main><p>text</p>".utf8)
        for charset in [nil, "utf-8", "ucs-4"] as [String?] {
            #expect(ArticleExtractor.extract(html: bytes, url: "https://example.com/", charset: charset) != nil)
        }
    }
}
