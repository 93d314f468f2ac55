import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The C callbacks libmicrohttpd calls on its worker threads. They are plain
// nonisolated functions; `cls` is the server's ServerCore (retained by
// HTTPServer for the daemon's lifetime) and `*con_cls` a RequestContext
// retained here on the first call and released in the completion notice.

/// MHD_AccessHandlerCallback: called once when a request's head has arrived,
/// once per body chunk, once when the body is complete, and once more after
/// each resume.
func chronicleAccessHandler(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
    _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?,
    _ uploadDataSize: UnsafeMutablePointer<Int>?, _ requestState: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let uploadDataSize, let requestState else { return .NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()

    guard let existing = requestState.pointee, existing != nulInURIMarker else {
        core.headWaits.forget(chronicle_mhd_connection_fd(connection))   // its head is in
        let handle = MHDConnection(pointer: connection)
        let context = RequestContext(core: core, connection: handle,
                                     method: method.map { String(cString: $0) } ?? "",
                                     path: url.map { String(cString: $0) } ?? "",
                                     remoteAddress: SocketAddress.describe(chronicle_mhd_client_address(connection)),
                                     nulInURI: requestState.pointee == nulInURIMarker)
        requestState.pointee = Unmanaged.passRetained(context).toOpaque()
        return core.begin(context)
    }
    let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()

    if uploadDataSize.pointee > 0 {
        core.receive(UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee), for: context)
        uploadDataSize.pointee = 0 // all consumed (kept or, past the cap, dropped)
        return .YES
    }
    return core.advance(context)
}

/// MHD_RequestCompletedCallback: the request is over; balance the retain
/// taken on the first access-handler call.
func chronicleRequestCompleted(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
    _ requestState: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ reason: MHD_RequestTerminationCode
) {
    guard let cls, let requestState, let existing = requestState.pointee else { return }
    requestState.pointee = nil
    if existing == nulInURIMarker { return }   // the request ended before its head was complete
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    // The connection waits for its next request's head (or closes: its notice ends the watch).
    if let connection { core.headWaits.watch(socket: chronicle_mhd_connection_fd(connection)) }
    let context = Unmanaged<RequestContext>.fromOpaque(existing).takeRetainedValue()
    core.complete(context, normally: reason == .REQUEST_TERMINATED_COMPLETED_OK)
}

/// MHD_LogCallback: keeps MHD's messages (never printed) so a failed start
/// can say why.
func chronicleMHDLog(_ cls: UnsafeMutableRawPointer?, _ format: UnsafePointer<CChar>?, _ arguments: CVaListPointer?) {
    guard let cls, let format, let arguments else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    _ = vsnprintf(&buffer, buffer.count, format, arguments)
    var message = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    while message.last?.isNewline == true { message.removeLast() }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    core.record(message: message)
}

/// The request state a request starts with when its raw URI holds `%00`: libmicrohttpd decodes
/// the path into a C string, so `…/blobs/sha256:<hex>%00junk` would reach the routes as the path
/// without its tail. Not an object: only compared, never retained or read.
nonisolated(unsafe) let nulInURIMarker = UnsafeMutableRawPointer(bitPattern: 0x1)!

/// MHD's URI log callback: the request line's URI before any decoding, once per request. Its
/// answer becomes the request's first state (see `nulInURIMarker`).
func chronicleURILog(_ cls: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?, _ connection: OpaquePointer?) -> UnsafeMutableRawPointer? {
    guard let uri else { return nil }
    return URIRules.holdsEncodedNUL(uri) ? nulInURIMarker : nil
}

/// MHD's connection notice: a new connection whose first bytes are a TLS handshake is shut
/// at once (this port speaks plain HTTP), instead of waiting for a request line until the idle
/// timeout; any other is watched while it waits for a request's head (`ServerCore.headWaits`) until it closes.
func chronicleConnectionNotice(_ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
                               _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                               _ notice: MHD_ConnectionNotificationCode) {
    guard let cls, let connection else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    let socket = chronicle_mhd_connection_fd(connection)
    switch notice {
    case .CONNECTION_NOTIFY_STARTED:
        if PlainPort.looksLikeTLS(socket) { PlainPort.shutDown(socket) } else { core.headWaits.watch(socket: socket) }
    case .CONNECTION_NOTIFY_CLOSED:
        core.headWaits.forget(socket)
    default:
        break
    }
}

/// What the raw request URI may not hold.
enum URIRules {
    /// Whether the URI holds `%00` (either case of hex is the same byte).
    static func holdsEncodedNUL(_ uri: UnsafePointer<CChar>) -> Bool {
        var pointer = uri
        while pointer.pointee != 0 {
            if pointer.pointee == 0x25, pointer[1] == 0x30, pointer[2] == 0x30 { return true }
            pointer += 1
        }
        return false
    }
}
