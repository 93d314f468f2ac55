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

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0x0F)]) }
        return String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let h = nibble(utf8[i]), let l = nibble(utf8[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
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
        return "scrypt$\(scryptN)$\(scryptR)$\(scryptP)$\(hex(salt))$\(hex(key))"
    }

    static func verifyPassword(_ password: String, against stored: String) -> Bool {
        let parts = stored.split(separator: "$").map(String.init)
        guard parts.count == 6, parts[0] == "scrypt", let n = UInt64(parts[1]), let r = UInt64(parts[2]), let p = UInt64(parts[3]),
              let salt = unhex(parts[4]), let expected = unhex(parts[5]), expected.count == 32 else { return false }
        // Bounded as stored by `hashPassword`: a damaged row asking for more work or memory fails.
        guard n <= scryptN, r <= scryptR, p <= scryptP, let key = scrypt(password, salt: salt, n: n, r: r, p: p) else { return false }
        return CRYPTO_memcmp(key, expected, 32) == 0
    }

    /// A new bearer token: `chr_` and 64 hex digits (256 random bits).
    static func newToken() -> String { "chr_" + hex(randomBytes(32)) }

    /// Tokens are stored only as their SHA-256.
    static func tokenHash(_ token: String) -> String { SHA256Hasher.hex(token) }
}
