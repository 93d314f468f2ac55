
/// A limit a free library lives under; premium libraries have none. Declared in a schema
/// file's `caps` (`Schema.caps`) or given to the server (`chronicle serve --free-caps`).
/// Enforced by a trigger in the server's library database, so no code path can get around
/// it: an op that would pass it is rejected terminally with `free_tier_cap`.
///
/// ```swift
/// FreeTierCap(entity: "article", maximum: 1_000)                 // saved articles
/// FreeTierCap(entity: "highlight", per: "article_id", maximum: 50) // highlights per article
/// ```
public struct FreeTierCap: Sendable, Equatable, CustomStringConvertible {
    public var entity: String
    /// An `id` field: the cap counts rows per value of it (per article) instead of in total.
    public var per: String?
    public var maximum: Int

    public init(entity: String, per: String? = nil, maximum: Int) {
        self.entity = entity
        self.per = per
        self.maximum = maximum
    }

    /// The caps a library of `schema` lives under: the schema's own, each replaced by a cap the
    /// operator gave for the same entity (and field), then the operator's others (each applies
    /// where its entity exists).
    public static func caps(of schema: Schema, overriddenBy given: [FreeTierCap]) -> [FreeTierCap] {
        let declared = schema.caps.filter { cap in !given.contains { $0.entity == cap.entity && $0.per == cap.per } }
        return declared + given
    }

    /// `article=1000` or `highlight.article_id=50`, as `chronicle serve --free-cap` takes them.
    public init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let maximum = Int(parts[1]), maximum >= 0 else { return nil }
        let target = parts[0].split(separator: ".", maxSplits: 1).map(String.init)
        guard let entity = target.first, !entity.isEmpty else { return nil }
        self.init(entity: entity, per: target.count == 2 ? target[1] : nil, maximum: maximum)
    }

    public var description: String { "\(entity)\(per.map { ".\($0)" } ?? "")=\(maximum)" }

    /// The message a device shows when the cap refuses an op: what happened and what the person can do.
    func message(_ entity: EntitySpec, _ owner: EntitySpec?) -> String {
        let noun = maximum == 1 ? entity.name : entity.name + "s"
        if let owner {
            return "A free library holds at most \(maximum) \(noun) per \(owner.name), and this \(owner.name) has reached it. Delete one of its \(entity.name)s, or upgrade to premium for no limit."
        }
        return "A free library holds at most \(maximum) \(noun), and this one has reached it. Delete some \(entity.name)s, or upgrade to premium for no limit."
    }

    /// The triggers that enforce it (on creating a row and on restoring a deleted one).
    package func triggers(_ schema: Schema, _ projection: ProjectionSchema) throws -> [String] {
        // A server hosts libraries of several schemas: a cap applies where its entity exists.
        guard let spec = schema.entity(entity) else { return [] }
        var owner: EntitySpec?
        if let per {
            guard let field = spec.field(per), let target = field.references else {
                throw ChronicleError(.invalidValue, "Free-tier cap \(self): '\(entity).\(per)' is not an id field.")
            }
            owner = schema.entity(target)
        }
        let q = ProjectionSchema.quoted
        let table = q(spec.table)
        var counted: [String] = []
        if let per { counted.append("\(q(per)) = NEW.\(q(per))") }
        if spec.hasSoftDelete { counted.append("deleted_at IS NULL") }
        let filter = counted.isEmpty ? "" : " WHERE " + counted.joined(separator: " AND ")
        let full = "NOT \(projection.premiumCondition) AND (SELECT count(*) FROM \(table)\(filter)) >= \(maximum)"
        let raise = "SELECT RAISE(ABORT, '\(Self.prefix)\(message(spec, owner).replacingOccurrences(of: "'", with: "''"))')"
        let name = "chronicle_cap_\(entity)\(per.map { "_per_\($0)" } ?? "")"
        var statements = ["CREATE TRIGGER \(q(name + "_insert")) BEFORE INSERT ON \(table) WHEN \(full) BEGIN \(raise); END"]
        if spec.hasSoftDelete {
            statements.append("CREATE TRIGGER \(q(name + "_restore")) BEFORE UPDATE OF deleted_at ON \(table) WHEN NEW.deleted_at IS NULL AND OLD.deleted_at IS NOT NULL AND \(full) BEGIN \(raise); END")
        }
        return statements
    }

    /// Checks the cap against the schemas it may apply to: it must fit at least one.
    public func validate(against schemas: [Schema]) throws {
        let fits = schemas.contains { schema in
            guard let spec = schema.entity(entity) else { return false }
            guard let per else { return true }
            return spec.field(per)?.references != nil
        }
        if !fits {
            throw ChronicleError(.invalidValue, "The free-tier cap '\(self)' names no entity (or id field) of the schemas this server hosts (\(schemas.map(\.name).joined(separator: ", "))).")
        }
    }

    /// Trigger messages start with this, so the push loop can tell a cap from a real failure.
    package static let prefix = "free_tier_cap: "
}
