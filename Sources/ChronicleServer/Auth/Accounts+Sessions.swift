import ChronicleCore
import Foundation

/// Access tokens: what a device sends on every request once it has one, so that its device token
/// (`chr_…`, long-lived, kept in its credentials file) crosses the network only to get the next.
///
/// `POST /v1/session` with the device token gives `chra_` and 64 random hex digits, good for an
/// hour by default. The accounts keep only its SHA-256, with the device and the hash of the device
/// token it was given for (`device_sessions`), as they keep device tokens: a copy of the accounts
/// gives a thief nothing to send. An access token is refused past its expiry (401
/// `token_expired`; the device gets the next with its device token), and at once when its device
/// is revoked or signs in again (its device token's hash is no longer the registration's). Each
/// device keeps at most `sessionsPerDeviceMax`; expired ones are deleted as new ones are given.
extension Accounts {
    public static let accessTokenPrefix = "chra_"
    /// `chra_` and 64 hex digits.
    static let accessTokenLength = 5 + 64
    /// The most access tokens a device holds at once: the oldest goes when one more is given.
    static let sessionsPerDeviceMax = 8

    /// The code of a request whose access token expired.

    /// A new access token for the device whose device token is `deviceToken`, good for
    /// `lifetimeSeconds`, with its expiry (ms since the epoch). An access token cannot get
    /// another: only the device token can, so a leaked access token is good for its lifetime only.
    public func openSession(deviceToken: String, lifetimeSeconds: Int) throws(ProtocolError) -> (token: String, expiresAt: Int64, identity: DeviceIdentity) {
        guard deviceToken.hasPrefix("chr_"), let identity = try authenticate(deviceToken) else {
            throw ProtocolError(401, .unauthorized, "A session is opened with the device's own token (chr_…), which is missing, malformed or no longer valid; sign in again with `chronicle login`.")
        }
        let now = clock.nowMilliseconds()
        let expiresAt = now + Int64(lifetimeSeconds) * 1000
        let token = Self.accessTokenPrefix + Hex.encode(Secrets.randomBytes(32))
        let device = identity.deviceID.lowercased
        do {
            // Quiet: a new token revokes nothing. (A token the cap deletes may still be taken
            // until its expiry by a server that checked it before; an expired one never is.)
            try storage.quietTransaction { sql in
                try sql.execute("DELETE FROM \(t.sessions) WHERE expires_at <= ?1", [.integer(now)])
                try sql.execute("""
                    DELETE FROM \(t.sessions) WHERE device_id = ?1 AND token_hash NOT IN
                      (SELECT token_hash FROM \(t.sessions) WHERE device_id = ?1 ORDER BY expires_at DESC LIMIT ?2)
                    """, [.text(device), .integer(Int64(Self.sessionsPerDeviceMax - 1))])
                try sql.execute("INSERT INTO \(t.sessions)(token_hash, device_id, device_token_hash, expires_at) VALUES (?1, ?2, ?3, ?4)",
                                [.text(Secrets.tokenHash(token)), .text(device), .text(Secrets.tokenHash(deviceToken)), .integer(expiresAt)])
            }
        } catch {
            throw unavailable(error, "The server could not record the session")
        }
        return (token, expiresAt, identity)
    }

    /// The device behind access token `token`, nil where no registered device holds it (never
    /// given, its device revoked or signed in again, or deleted past its expiry); 401
    /// `token_expired` past its expiry.
    func authenticateAccess(_ token: String) throws(ProtocolError) -> DeviceIdentity? {
        guard token.utf8.count == Self.accessTokenLength else { return nil }
        let hash = Secrets.tokenHash(token)
        let found = try cachedToken(hash) { sql in
            try sql.rows("""
                SELECT d.device_id, d.library_id, d.user_name, s.expires_at FROM \(t.sessions) s
                JOIN \(t.devices) d ON d.device_id = s.device_id AND d.token_hash = s.device_token_hash
                WHERE s.token_hash = ?1
                """, [.text(hash)]).first.map { row in CachedToken(identity: try identity(row), expiresAt: row.int(3)) }
        }
        guard let found else { return nil }
        if let expiresAt = found.expiresAt, expiresAt <= clock.nowMilliseconds() {
            throw ProtocolError(401, .tokenExpired, "The access token expired; the device gets the next with its device token (POST /v1/session).")
        }
        return found.identity
    }
}
