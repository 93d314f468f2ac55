/// libFuzzer entry for the snapshot decoders: every input goes through
/// `SnapshotCodec.decode` (LZ4 frame + body) and `SnapshotCodec.decodeBody`,
/// each under the default and under tight limits. Build and run with
/// `bash Tools/fuzz/fuzz.sh snapshot`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzContract.snapshot(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
