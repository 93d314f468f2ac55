import Foundation

/// What the reader of HTTP answers (`PageResponseReader`) keeps to, whatever bytes a web server
/// sends: the fuzzer (`Tools/fuzz/FuzzResponse.swift`) and the corpus replay
/// (`ResponseCorpusTests`) check every input against it.
enum PageResponseContract {
    enum Outcome: Equatable {
        case read(status: Int, fields: [String: String], body: [UInt8])
        case failed(PageResponseReader.Failure)
    }

    /// The reader fed `bytes` in pieces of `pieces` bytes, then the end of the stream.
    static func outcome(_ bytes: [UInt8], bodyBytesMax: Int, pieces: Int) -> Outcome {
        var reader = PageResponseReader(bodyBytesMax: bodyBytesMax)
        do {
            var index = 0
            while index < bytes.count {
                let end = min(bytes.count, index + pieces)
                try reader.feed(bytes[index..<end])
                index = end
            }
            try reader.finish()
        } catch {
            return .failed(error)
        }
        guard let head = reader.head else { return .failed(.truncated) }
        return .read(status: head.status, fields: head.fields, body: reader.body)
    }

    /// Nil where the reader kept to the contract on `bytes`; else what it broke.
    static func check(_ bytes: [UInt8]) -> String? {
        for cap in [48, 4_096] {
            let whole = outcome(bytes, bodyBytesMax: cap, pieces: max(1, bytes.count))
            for pieces in [1, 7, 1 + Int(bytes.first ?? 0) % 61] where outcome(bytes, bodyBytesMax: cap, pieces: pieces) != whole {
                return "fed in pieces of \(pieces) (body cap \(cap)), the answer differs from the one read whole"
            }
            guard case .read(let status, let fields, let body) = whole else { continue }
            if body.count > cap { return "a body of \(body.count) bytes past the cap of \(cap)" }
            if !(200...999).contains(status) { return "status \(status) returned (interim answers are skipped)" }
            if fields.keys.contains(where: { $0.isEmpty || $0 != $0.lowercased() }) { return "a field name empty or not lowercased" }
            if let length = fields["content-length"], fields["transfer-encoding"] == nil, status != 204, status != 304,
               let bytes = Int(length.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""),
               bytes != body.count {
                return "a body of \(body.count) bytes under Content-Length \(bytes)"
            }
        }
        return nil
    }
}
