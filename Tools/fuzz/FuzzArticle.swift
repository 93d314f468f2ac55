import Foundation

/// libFuzzer entry for the article fetcher's reading of pages: every input goes through
/// `ArticleExtractor.extract` with no charset, with UTF-8 and with Latin-1 (a page's bytes come
/// from anywhere on the web). The contract: no crash, no trap, and whatever comes back keeps the
/// reader's own limits (`ArticleContract.check`). Build and run with `bash Tools/fuzz/fuzz.sh article`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for charset in [nil, "utf-8", "iso-8859-1"] as [String?] {
        if let failure = ArticleContract.check(bytes, charset: charset) {
            FileHandle.standardError.write(Data("FUZZ CONTRACT VIOLATED: \(failure)\n".utf8))
            abort()
        }
    }
    return 0
}
