@testable import ChronicleArticles
import Foundation
import Testing

/// Replays what libFuzzer kept for the reader of HTTP answers (`Tests/Fuzz/Corpus/response/`)
/// and every input it ever stopped on (`Tests/Fuzz/Crashes/response/`) through
/// `PageResponseReader`, checking the contract the fuzzer enforces (`PageResponseContract`).
/// Refresh the corpus with `bash Tools/fuzz/fuzz.sh response` (`Tools/fuzz/README.md`).
@Suite struct ResponseCorpusTests {
    @Test func everyKeptInputIsReadWithinTheContract() throws {
        let inputs = ArticleCorpusTests.inputs("response")
        #expect(inputs.count >= 20, "expected the response corpus under \(ArticleCorpusTests.fuzzDirectory.path)/Corpus/response")
        for file in inputs {
            #expect(PageResponseContract.check(Array(try Data(contentsOf: file))) == nil, "\(file.lastPathComponent)")
        }
    }

    /// The contract can fail: a reader whose answer depended on how the bytes arrived would be caught.
    @Test func theContractTellsAnAnswerReadWholeFromOneCutShort() {
        let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".utf8)
        #expect(PageResponseContract.outcome(answer, bodyBytesMax: 48, pieces: 1)
            == .read(status: 200, fields: ["content-length": "5"], body: Array("hello".utf8)))
        #expect(PageResponseContract.outcome(Array(answer.dropLast()), bodyBytesMax: 48, pieces: 1) == .failed(.truncated))
        #expect(PageResponseContract.outcome(answer, bodyBytesMax: 4, pieces: 3) == .failed(.bodyTooLarge))
    }
}
