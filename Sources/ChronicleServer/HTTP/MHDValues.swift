import ChronicleCore
import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a request's headers and query arguments out of libmicrohttpd.
/// Only valid inside an access-handler call for that connection.
enum MHDValues {
    static func headers(of connection: MHDConnection) -> [String: String] {
        collect(connection, .HEADER_KIND, into: [:], collectHeader)
    }

    static func query(of connection: MHDConnection) -> [String: String] {
        collect(connection, .GET_ARGUMENT_KIND, into: [:], collectQueryArgument)
    }

    private static func collect(_ connection: MHDConnection, _ kind: MHD_ValueKind, into values: [String: String],
                                _ iterator: MHD_KeyValueIterator) -> [String: String] {
        var values = values
        withUnsafeMutablePointer(to: &values) { pointer in
            _ = MHD_get_connection_values(connection.pointer, kind, iterator, UnsafeMutableRawPointer(pointer))
        }
        return values
    }
}

/// MHD_KeyValueIterator for headers: lowercased names, repeats joined with ", ".
private func collectHeader(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?,
                           _ value: UnsafePointer<CChar>?) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let values = cls.assumingMemoryBound(to: [String: String].self)
    let name = String(cString: key).lowercased()
    let text = value.map { String(cString: $0) } ?? ""
    if let earlier = values.pointee[name] {
        values.pointee[name] = earlier + ", " + text
    } else {
        values.pointee[name] = text
    }
    return .YES
}

/// MHD_KeyValueIterator for query arguments: a bare key maps to "", the last
/// repeat wins.
private func collectQueryArgument(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind,
                                  _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let values = cls.assumingMemoryBound(to: [String: String].self)
    values.pointee[String(cString: key)] = value.map { String(cString: $0) } ?? ""
    return .YES
}

/// What a request's head says about how its body is framed, and whether any header hides a
/// NUL byte: libmicrohttpd hands values over as C strings, so `Bearer <token>\0junk` would
/// read as `Bearer <token>` without this look at each value's length.
struct RequestHead {
    var contentLengths: [String] = []
    var transferEncoding = false
    var nulInHeader = false

    init(of connection: MHDConnection) {
        withUnsafeMutablePointer(to: &self) { pointer in
            _ = MHD_get_connection_values_n(connection.pointer, .HEADER_KIND, inspectHeader, UnsafeMutableRawPointer(pointer))
        }
    }

    /// Why the request is refused before its body is read, if it is: a status, a code, a sentence.
    func refusal(nulInURI: Bool) -> (status: Int, code: String, message: String)? {
        if nulInURI || nulInHeader {
            return (400, "nul_byte", "A request's path, query and headers may not hold a NUL byte (%00 or a raw 0).")
        }
        if transferEncoding {
            // The API's clients always know their body's length. A chunked body's sizes are read by
            // libmicrohttpd where no cap of ours reaches them, so one that announces an absurd chunk
            // would hold the connection; none is taken (RFC 9110 §15.5.12).
            return (411, "length_required", "Send a request body with a Content-Length; chunked and other transfer codings are not accepted.")
        }
        if contentLengths.count > 1 {
            return (400, "bad_content_length", "The request has \(contentLengths.count) Content-Length headers; send one.")
        }
        if let length = contentLengths.first, WireNumber.byteCount.value(length) == nil {
            return (400, "bad_content_length", "Content-Length must be a whole number of bytes; got '\(length.prefix(40))'.")
        }
        return nil
    }
}

/// MHD_KeyValueIteratorN for `RequestHead`.
private func inspectHeader(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ keySize: Int,
                           _ value: UnsafePointer<CChar>?, _ valueSize: Int) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let head = cls.assumingMemoryBound(to: RequestHead.self)
    if strlen(key) != keySize || (value.map { strlen($0) != valueSize } ?? false) { head.pointee.nulInHeader = true }
    let name = String(cString: key).lowercased()
    if name == "content-length" { head.pointee.contentLengths.append(value.map { String(cString: $0) } ?? "") }
    if name == "transfer-encoding" { head.pointee.transferEncoding = true }
    return .YES
}
