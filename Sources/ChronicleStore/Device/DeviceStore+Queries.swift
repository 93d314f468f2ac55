import ChronicleCore
import Foundation

/// What the store knows about itself, for `chronicle status`.
public struct StoreStatus: Sendable {
    public var path: String
    public var formatVersion: Int64
    public var schema: String
    public var libraryID: String
    public var deviceID: String
    /// Highest server seq applied.
    public var cursor: Int64
    public var confirmedOps: Int64
    /// Ops written here and not yet confirmed by the server.
    public var unsentOps: Int64
    public var lastDeviceSeq: Int64
    /// Milliseconds since 1970 of the last successful sync, if any.
    public var lastSyncAt: Int64?
    public var fileBytes: Int64
}

/// One projection row: its scalar fields and set fields.
public struct EntityRow: Sendable {
    public var entityType: String
    public var id: String
    public var fields: [(name: String, value: Value)]
    public var sets: [(name: String, values: [Value])]
    /// True when queued local ops have touched the row and the server has not confirmed them yet.
    public var pending: Bool

    public subscript(_ name: String) -> Value? { fields.first { $0.name == name }?.value }
}

extension DeviceStore {
    /// SQLite keeps booleans as 0/1; give them back as booleans.
    static func typed(_ value: Value, _ field: FieldSpec?) -> Value {
        if field?.type == .boolean, let i = value.integerValue, value.textValue == nil { return .bool(i != 0) }
        return value
    }

    public func status() throws -> StoreStatus {
        try read { db in
            let meta = Dictionary(uniqueKeysWithValues: try db.query("SELECT key, value FROM chronicle_meta") { ($0.text(0), $0.value(1)) })
            let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? nil
            let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int64) ?? nil
            return StoreStatus(
                path: path,
                formatVersion: meta["format_version"]?.integerValue ?? 0,
                schema: "\(schema.name) v\(meta["schema_version"]?.integerValue ?? 0)",
                libraryID: libraryID.lowercased, deviceID: deviceID.lowercased,
                cursor: meta["cursor"]?.integerValue ?? 0,
                confirmedOps: try Self.confirmedCount(in: db),
                unsentOps: try db.scalarInt("SELECT count(*) FROM chronicle_outbox") ?? 0,
                lastDeviceSeq: meta["last_device_seq"]?.integerValue ?? 0,
                lastSyncAt: meta["last_sync_at"]?.integerValue,
                fileBytes: (bytes ?? 0) + (wal ?? 0))
        }
    }

    /// The entity type of the row with this id, searching every entity table.
    public func entityType(of id: UUID) throws -> EntitySpec? {
        try read { db in try Self.entityType(of: id, schema, in: db) }
    }

    /// One row with its set fields, or nil.
    public func row(_ id: UUID) throws -> EntityRow? {
        guard let entity = try entityType(of: id) else { return nil }
        return try rows(entity.name, where: "t.id = ?1", [.text(id.lowercased)], includeDeleted: true).first
    }

    /// Rows of one entity type, newest first, optionally filtered by SQL over `t`.
    public func rows(_ entityName: String, where filter: String? = nil, _ arguments: [Value] = [],
                     includeDeleted: Bool = false, limit: Int = 1000) throws -> [EntityRow] {
        try read { db in
            try Self.rows(entityName, schema, where: filter, arguments, includeDeleted: includeDeleted, limit: limit,
                          markPending: true, in: db)
        }
    }

    /// The projection query behind `rows` and the server's verdicts. `markPending` reads
    /// `chronicle_shadowed` (device stores only).
    static func rows(_ entityName: String, _ schema: Schema, where filter: String? = nil, _ arguments: [Value] = [],
                     includeDeleted: Bool, limit: Int, markPending: Bool, in db: Database) throws -> [EntityRow] {
        guard let entity = schema.entity(entityName) else {
            throw ChronicleError(.unknownEntity, "Schema \(schema.name) has no entity type '\(entityName)'; it has \(schema.entities.map(\.name).joined(separator: ", ")).")
        }
        let names = entity.scalarFields.map(\.name)
        var conditions: [String] = []
        if let filter { conditions.append(filter) }
        if !includeDeleted && entity.hasSoftDelete { conditions.append("t.deleted_at IS NULL") }
        let whereClause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let columns = (["id", "created_at"] + names).map { "t." + ProjectionSchema.quoted($0) }.joined(separator: ", ")
        let pending = markPending ? "EXISTS (SELECT 1 FROM chronicle_shadowed s WHERE s.entity = ?\(arguments.count + 1) AND s.id = t.id)" : "0"
        let sql = """
            SELECT \(columns), \(pending)
            FROM \(ProjectionSchema.quoted(entity.table)) t\(whereClause) ORDER BY t.created_at DESC, t.id LIMIT \(limit)
            """
        var result = try db.query(sql, arguments + (markPending ? [.text(entity.name)] : [])) { row -> EntityRow in
            var fields: [(String, Value)] = [("created_at", row.value(1))]
            for (offset, field) in entity.scalarFields.enumerated() {
                fields.append((field.name, Self.typed(row.value(Int32(offset + 2)), field)))
            }
            return EntityRow(entityType: entity.name, id: row.text(0), fields: fields, sets: [],
                             pending: row.int(Int32(names.count + 2)) == 1)
        }
        for index in result.indices {
            for field in entity.setFields {
                let values = try db.query("SELECT value FROM \(ProjectionSchema.quoted(entity.setTable(field))) WHERE id = ?1 ORDER BY value",
                                          [.text(result[index].id)]) { $0.value(0) }
                result[index].sets.append((field.name, values))
            }
        }
        return result
    }

    /// The entity type of the row with this id, searching every entity table.
    static func entityType(of id: UUID, _ schema: Schema, in db: Database) throws -> EntitySpec? {
        for entity in schema.entities {
            if try db.scalarInt("SELECT 1 FROM \(ProjectionSchema.quoted(entity.table)) WHERE id = ?1", [.text(id.lowercased)]) != nil {
                return entity
            }
        }
        return nil
    }
}

extension DeviceStore {
    /// Rows whose id starts with `prefix` (a whole id or a short form of it), across every entity type.
    public func rows(matchingIDPrefix prefix: String, limit: Int = 10) throws -> [(entity: String, id: String)] {
        let cleaned = prefix.lowercased()
        guard !cleaned.isEmpty, cleaned.allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return [] }
        return try read { db in
            var found: [(String, String)] = []
            for entity in schema.entities {
                found += try db.query("SELECT id FROM \(ProjectionSchema.quoted(entity.table)) WHERE id >= ?1 AND id < ?1 || 'g' LIMIT ?2",
                                      [.text(cleaned), .integer(Int64(limit))]) { (entity.name, $0.text(0)) }
            }
            return found
        }
    }
}
