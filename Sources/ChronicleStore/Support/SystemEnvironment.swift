import ChronicleCore
import CCrypto
import Foundation

/// The system clock: the one place production code reads the time.
public struct SystemClock: ChronicleClock {
    public init() {}
    public func nowMilliseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

/// Random version-4 UUIDs from OpenSSL's CSPRNG: the one place production code draws randomness.
public struct SystemIDGenerator: IDGenerator {
    public init() {}
    public func makeUUID() -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        precondition(RAND_bytes(&bytes, 16) == 1, "RAND_bytes failed")
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
