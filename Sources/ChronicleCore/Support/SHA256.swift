import CCrypto

/// Incremental SHA-256 from OpenSSL's libcrypto.
public final class SHA256Hasher {
    private let context: OpaquePointer

    public init() {
        guard let ctx = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed: out of memory") }
        precondition(EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex(sha256) failed")
        context = ctx
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1)
    }

    public func update(_ string: String) {
        var s = string
        s.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    public func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        out.withUnsafeMutableBufferPointer { buffer in
            precondition(EVP_DigestFinal_ex(context, buffer.baseAddress, &length) == 1 && length == 32)
        }
        return out
    }

    public func hexDigest() -> String {
        Hex.encode(finalize())
    }

    public static func hex(_ string: String) -> String {
        let hasher = SHA256Hasher()
        hasher.update(string)
        return hasher.hexDigest()
    }
}
