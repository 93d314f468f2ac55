/// libFuzzer entry for the segment decoders: every input goes through
/// `SegmentCodec.decode` (LZ4 frame + body), `SegmentCodec.decodeBody`,
/// `WireJSON.decode` and `LZ4Frame.decompress`, each under the default and
/// under tight limits. Build and run with `bash Tools/fuzz/fuzz.sh segment`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzContract.segment(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
