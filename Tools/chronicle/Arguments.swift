import ChronicleCore

/// A small command-line parser: positional arguments and `--name value` /
/// `--flag` options, in any order. (No argument-parser package can be fetched
/// here, and this tool needs only this much.)
struct Arguments {
    private(set) var positional: [String] = []
    private var options: [String: String] = [:]
    private var flags: Set<String> = []
    private var consumed: Set<String> = []

    /// Options that take a value; everything else starting with `--` is a flag.
    static let valued: Set<String> = [
        "store", "title", "byline", "author", "quote", "color", "note", "position", "limit", "entity", "at", "schema",
        "library", "device", "payload", "tag", "status", "favorite", "id", "data", "port", "host", "threads", "body-memory-mb", "open-libraries", "server", "user", "keep", "value", "field", "free-caps", "keep-ops", "keep-days", "segment-ops", "horizon-days",
        "compact-keep-ops", "compact-keep-days", "compact-segment-ops", "compact-snapshot-ops", "compact-every", "to", "postgres", "replicas", "postgres-pool", "postgres-timeout", "type", "upload-expiry-days", "unnamed-file-days", "start-image-ops", "access-token-minutes", "fetch-ca-file",
    ]

    init(_ raw: [String]) throws(ChronicleError) {
        var index = 0
        var onlyPositional = false
        while index < raw.count {
            let item = raw[index]
            index += 1
            if onlyPositional || !item.hasPrefix("--") || item == "-" {
                positional.append(item)
                continue
            }
            if item == "--" { onlyPositional = true; continue }
            var name = String(item.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if Self.valued.contains(name) {
                if let inline {
                    options[name] = inline
                } else {
                    guard index < raw.count else { throw ChronicleError(.usage, "--\(name) needs a value.") }
                    options[name] = raw[index]
                    index += 1
                }
            } else {
                guard inline == nil else { throw ChronicleError(.usage, "--\(name) takes no value.") }
                flags.insert(name)
            }
        }
    }

    mutating func flag(_ name: String) -> Bool {
        consumed.insert(name)
        return flags.contains(name)
    }

    mutating func option(_ name: String) -> String? {
        consumed.insert(name)
        return options[name]
    }

    /// Peeks without consuming (global options read before dispatch).
    func peek(_ name: String) -> String? { options[name] }
    func has(_ name: String) -> Bool { flags.contains(name) }

    mutating func takePositional() -> String? {
        positional.isEmpty ? nil : positional.removeFirst()
    }

    mutating func requirePositional(_ what: String, usage: String) throws(ChronicleError) -> String {
        guard let value = takePositional() else { throw ChronicleError(.usage, "Missing \(what). Usage: \(usage)") }
        return value
    }

    /// Fails on anything the command did not ask for, so typos are never ignored silently.
    func finish(usage: String) throws(ChronicleError) {
        if let extra = positional.first { throw ChronicleError(.usage, "Unexpected argument '\(extra)'. Usage: \(usage)") }
        for name in Set(options.keys).union(flags).subtracting(consumed).sorted() {
            throw ChronicleError(.usage, "Unknown option --\(name) for this command. Usage: \(usage)")
        }
    }
}
