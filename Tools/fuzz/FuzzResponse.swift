import Foundation

/// libFuzzer entry for the article fetcher's reading of HTTP answers: every input is a web
/// server's bytes, read by `PageResponseReader` whole and in pieces, under a small and a larger
/// body cap. The contract (`PageResponseContract.check`): no crash, no trap, the same answer
/// however the bytes arrive, a body within its cap. Build and run with `bash Tools/fuzz/fuzz.sh response`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let failure = PageResponseContract.check(Array(UnsafeBufferPointer(start: data, count: size))) {
        FileHandle.standardError.write(Data("FUZZ CONTRACT VIOLATED: \(failure)\n".utf8))
        abort()
    }
    return 0
}
