import CMicroHTTPD

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
