import Foundation

/// Turns an op written under an older version of an op type into the next
/// version's shape, as data in the newer schema file (`"upcasters"`):
///
/// ```json
/// { "from": "article.update@1", "to": "article.update@2", "rename": { "byline": "author" } }
/// ```
///
/// `rename` moves payload keys, `drop` removes keys the new version no longer has,
/// `set` adds keys with a value when they are absent. Pure: the log keeps every op
/// exactly as written, and readers upcast on the way in (materializers, the
/// server's validation, snapshots), one step per version, to the current shape.
public struct Upcaster: Sendable, Equatable {
    public var fromType: String
    public var fromVersion: Int
    public var toType: String
    public var toVersion: Int
    public var rename: [String: String]
    public var drop: [String]
    public var set: Payload

    public func apply(_ op: Op) -> Op {
        var next = op
        next.type = toType
        next.version = toVersion
        var payload = Payload(minimumCapacity: op.payload.count)
        for (key, value) in op.payload where !drop.contains(key) {
            payload[rename[key] ?? key] = value
        }
        for (key, value) in set where payload[key] == nil { payload[key] = value }
        next.payload = payload
        return next
    }
}

extension ChronicleError.Code {
    /// An op whose type this build knows, at a version newer than it knows.
    public static let futureOpVersion = ChronicleError.Code(rawValue: "future_op_version")
}

extension Schema {
    /// The op in the current shape: itself when its `type@version` is current,
    /// otherwise upcast one version at a time. An op of an unknown type, or of a
    /// version newer than this build knows, is refused with a clear error (the
    /// caller sets it aside; it never blocks the ops behind it).
    public func upcast(_ op: Op) throws(ChronicleError) -> Op {
        if opNumber(op.type, version: op.version) != nil { return op }
        var current = op
        for _ in 0..<64 {
            guard let step = upcasterIndex["\(current.type)@\(current.version)"] else { break }
            current = upcasters[step].apply(current)
            if opNumber(current.type, version: current.version) != nil { return current }
        }
        let known = ops.filter { $0.type == op.type }.map(\.version).max()
        if let known, op.version > known {
            throw ChronicleError(.futureOpVersion, "Op \(op.opID.lowercased) is \(op.typeAndVersion), but this build of schema \(name) v\(version) knows '\(op.type)' up to version \(known). Update Chronicle to apply it; it is kept, not lost.")
        }
        throw ChronicleError(.unknownOpType, "Op \(op.opID.lowercased) has type \(op.typeAndVersion), which schema \(name) v\(version) does not know; it is kept, not lost.")
    }

    /// The op's type spec after upcasting, or nil if it cannot be read by this build.
    public func currentSpec(of op: Op) -> OpTypeSpec? {
        if let spec = opType(op.type, version: op.version) { return spec }
        return (try? upcast(op)).flatMap { opType($0.type, version: $0.version) }
    }
}
