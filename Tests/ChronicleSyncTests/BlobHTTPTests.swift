import ChronicleCore
import ChronicleServer
@testable import ChronicleStore
@testable import ChronicleSync
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The blob routes over real HTTP: chunks, ranges, and every bad request a 4xx with a stable code.
@Suite struct BlobHTTPTests {
    typealias Rig = HTTPBadInputTests.Rig

    static func put(_ rig: Rig, _ ref: String, offset: Int64, length: Int64?, _ body: [UInt8], type: String = BlobLimits.mediaType,
                    token: String? = nil) async throws -> (status: Int, code: String?, body: [UInt8], allow: String?) {
        var query = "?offset=\(offset)"
        if let length { query += "&length=\(length)" }
        return try await rig.send("PUT", "/v1/libraries/\(rig.library)/blobs/\(ref)\(query)", headers: ["Content-Type": type], body: body, token: token)
    }

    static func status(_ rig: Rig, _ ref: BlobRef) async throws -> BlobStatus {
        let answer = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)/status")
        #expect(answer.status == 200)
        return try ProtocolJSON.decode(BlobStatus.self, from: answer.body, what: "status")
    }

    @Test func chunksRangesAndBadRequests() async throws {
        let rig = try Rig()
        let bytes = BlobSyncTests.file(11, bytes: 100_000)
        let ref = BlobRef.of(bytes)
        let length = Int64(bytes.count)
        #expect(try await Self.status(rig, ref) == BlobStatus(blob: ref, length: nil, received: 0, complete: false))

        // Bad requests, each refused before anything is kept.
        #expect(try await Self.put(rig, "sha256:nothex", offset: 0, length: length, bytes).code == "bad_blob_ref")
        #expect(try await Self.put(rig, ref.description, offset: 0, length: nil, bytes).code == "blob_length_missing")
        let wrongType = try await Self.put(rig, ref.description, offset: 0, length: length, bytes, type: "text/plain")
        #expect(wrongType.status == 415 && wrongType.code == "unsupported_media_type")
        #expect(try await Self.put(rig, ref.description, offset: 5, length: length, Array(bytes[0..<10])).code == "blob_offset_mismatch")
        #expect(try await Self.put(rig, ref.description, offset: 0, length: 10, Array(bytes[0..<20])).code == "chunk_out_of_range")
        let huge = try await Self.put(rig, ref.description, offset: 0, length: BlobLimits.blobBytesMax + 1, [1])
        #expect(huge.status == 413 && huge.code == "blob_too_large")
        let chunk = try await Self.put(rig, ref.description, offset: 0, length: BlobLimits.blobBytesMax,
                                       [UInt8](repeating: 7, count: BlobLimits.chunkBytesMax + 1))
        #expect(chunk.status == 413 && chunk.code == "chunk_too_large")
        let noToken = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)/status", token: "")
        #expect(noToken.status == 401)
        let otherLibrary = try await rig.send("GET", "/v1/libraries/\(UUID().lowercased)/blobs/\(ref)/status")
        #expect(otherLibrary.status == 403 && otherLibrary.code == "forbidden_library")
        let delete = try await rig.send("DELETE", "/v1/libraries/\(rig.library)/blobs/\(ref)")
        #expect(delete.status == 405 && delete.allow == "GET, PUT")
        #expect(try await Self.status(rig, ref).received == 0, "nothing was kept")

        // Two chunks; the first sent twice (a retry) changes nothing; a download waits for the end.
        let half = bytes.count / 2
        for _ in 0..<2 {
            let first = try await Self.put(rig, ref.description, offset: 0, length: length, Array(bytes[..<half]))
            #expect(first.status == 200)
        }
        #expect(try await Self.status(rig, ref) == BlobStatus(blob: ref, length: length, received: Int64(half), complete: false))
        let early = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)")
        #expect(early.status == 409 && early.code == "blob_incomplete")
        let otherLength = try await Self.put(rig, ref.description, offset: Int64(half), length: length + 1, Array(bytes[half...]))
        #expect(otherLength.status == 409 && otherLength.code == "blob_length_mismatch")
        #expect(try await Self.put(rig, ref.description, offset: Int64(half), length: length, Array(bytes[half...])).status == 200)
        #expect(try await Self.status(rig, ref).complete)

        // Whole, and in ranges.
        let whole = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)")
        #expect(whole.status == 200 && whole.body == bytes)
        let part = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)", headers: ["Range": "bytes=49990-50009"])
        #expect(part.status == 206 && part.body == Array(bytes[49_990...50_009]))
        let tail = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)", headers: ["Range": "bytes=99990-"])
        #expect(tail.status == 206 && tail.body == Array(bytes[99_990...]))
        for bad in ["bytes=-10", "bytes=5-1", "items=0-1", "bytes=0-1,5-6"] {
            let answer = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)", headers: ["Range": bad])
            #expect(answer.status == 416 && answer.code == "bad_range", "\(bad)")
        }
        let past = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)", headers: ["Range": "bytes=100000-"])
        #expect(past.status == 416 && past.code == "range_not_satisfiable")
        let missing = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(BlobRef.of([1, 2, 3]))")
        #expect(missing.status == 404 && missing.code == "blob_not_found")

        // Bytes that do not hash to the address: refused when the last arrives, and discarded.
        let liar = BlobRef.of([9, 9, 9])
        let refused = try await Self.put(rig, liar.description, offset: 0, length: 3, [1, 2, 3])
        #expect(refused.status == 422 && refused.code == "blob_digest_mismatch")
        #expect(try await Self.status(rig, liar).received == 0)
        // An empty file is a blob too.
        let empty = BlobRef.of([])
        #expect(try await Self.put(rig, empty.description, offset: 0, length: 0, []).status == 200)
        #expect(try await Self.status(rig, empty).complete)
        let metrics = try await rig.send("GET", "/metrics")
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("chronicle_blob_bytes_received_total") == false)
        #expect(String(decoding: metrics.body, as: UTF8.self).contains("chronicle_blob_bytes_total{direction=\"received\"}"))
    }

    /// A file larger than one answer carries is asked for in ranges; asked for whole it is refused
    /// with the range to ask for.
    @Test func aLargeFileIsDownloadedInRanges() async throws {
        let rig = try Rig()
        let bytes = BlobSyncTests.file(12, bytes: BlobLimits.rangeBytesMax + 1_000)
        let ref = try rig.a.store.addBlob(bytes)
        let report = await rig.a.sync()
        #expect(report.blobsUploaded == 1)
        let whole = try await rig.send("GET", "/v1/libraries/\(rig.library)/blobs/\(ref)")
        #expect(whole.status == 400 && whole.code == "range_required")
        let b = try rig.h.device("B")
        try await b.engine.fetchBlob(ref)
        #expect(try b.store.blob(ref) == bytes)
    }
}
