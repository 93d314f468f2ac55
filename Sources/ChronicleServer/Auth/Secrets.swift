import CCrypto
import ChronicleCore
import Foundation

/// Password hashing (scrypt) and bearer tokens, from OpenSSL's libcrypto.
enum Secrets {
    /// scrypt cost: 2^14 × 8 × 1 takes tens of milliseconds and 16 MiB, OpenSSL's
    /// interactive-login recommendation.
    static let scryptN: UInt64 = 1 << 14
    static let scryptR: UInt64 = 8
    static let scryptP: UInt64 = 1

    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }

    /// Nil where OpenSSL refuses the parameters (a stored hash whose N is no power of two, say:
    /// a damaged row must not take the server down).
    private static func scrypt(_ password: String, salt: [UInt8], n: UInt64, r: UInt64, p: UInt64) -> [UInt8]? {
        var key = [UInt8](repeating: 0, count: 32)
        let utf8 = Array(password.utf8)
        let ok = utf8.withUnsafeBufferPointer { pw in
            pw.withMemoryRebound(to: CChar.self) { pwc in
                EVP_PBE_scrypt(pwc.baseAddress, pwc.count, salt, salt.count, n, r, p, 64 << 20, &key, key.count)
            }
        }
        return ok == 1 ? key : nil
    }

    /// `scrypt$N$r$p$<salt hex>$<key hex>`.
    static func hashPassword(_ password: String) -> String {
        let salt = randomBytes(16)
        // Our own parameters: OpenSSL takes them, or nothing can be hashed at all.
        guard let key = scrypt(password, salt: salt, n: scryptN, r: scryptR, p: scryptP) else { preconditionFailure("EVP_PBE_scrypt refused its own parameters") }
        return "scrypt$\(scryptN)$\(scryptR)$\(scryptP)$\(Hex.encode(salt))$\(Hex.encode(key))"
    }

    static func verifyPassword(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$").map(String.init)
        guard parts.count == 6, parts[0] == "scrypt", let n = UInt64(parts[1]), let r = UInt64(parts[2]), let p = UInt64(parts[3]),
              let salt = Hex.decode(parts[4]), let expected = Hex.decode(parts[5]), expected.count == 32 else { return false }
        // Bounded as stored by `hashPassword`: a damaged row asking for more work or memory fails.
        guard n <= scryptN, r <= scryptR, p <= scryptP, let key = scrypt(password, salt: salt, n: n, r: r, p: p) else { return false }
        return CRYPTO_memcmp(key, expected, 32) == 0
    }

    /// A new bearer token: `chr_` and 64 hex digits (256 random bits).
    static func newToken() -> String { "chr_" + Hex.encode(randomBytes(32)) }

    /// Tokens are stored only as their SHA-256.
    static func tokenHash(_ token: String) -> String { SHA256Hasher.hex(token) }
}
