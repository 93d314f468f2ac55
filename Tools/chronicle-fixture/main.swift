// chronicle-fixture: writes the current version's store fixture, so the next
// version can prove it migrates stores made by this one.
//
//   swift run chronicle-fixture [--schema readitlater] [--out Tests/Fixtures]
//
// The store is made deterministically (seeded ids, a manual clock) by this build's
// own schema and op formats: confirmed ops of every op type from other devices and
// the server, soft deletes and restores, a cursor, the older of them sealed into
// segments (with a snapshot), and an outbox holding a pending op of every type this
// device can write. It is saved as a reviewable SQL dump
// (`sqlite3 .dump`) with `fixture.json` (versions, counts, the state digest).
import ChronicleCore
import ChronicleStore
import ChronicleTesting
import Foundation

struct FixtureError: Error, CustomStringConvertible { let description: String }

func argument(_ name: String, default value: String) -> String {
    let args = CommandLine.arguments
    guard let index = args.firstIndex(of: "--" + name), index + 1 < args.count else { return value }
    return args[index + 1]
}

if CommandLine.arguments.contains("--help") {
    print("usage: chronicle-fixture [--schema NAME] [--out DIR]\n  writes DIR/<schema>-v<version>-format-v<format>/{store.sql, fixture.json}")
    exit(0)
}

let schemaName = argument("schema", default: "readitlater")
guard let schema = Schema.named(schemaName) else { print("unknown schema \(schemaName)"); exit(2) }
let outRoot = argument("out", default: "Tests/Fixtures")

@MainActor func makeFixture(_ schema: Schema, outRoot: String) throws {
    let ids = SeededIDGenerator(seed: 20_261_129)
    let clock = ManualClock(startMilliseconds: 1_780_000_000_000)
    let library = ids.makeUUID(), device = ids.makeUUID()
    let others = [ids.makeUUID(), ids.makeUUID()]
    let work = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-fixture-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: work) }
    let path = work + "/store.chronicle"
    let store = try DeviceStore.create(at: path, schema: schema, libraryID: library, deviceID: device, clock: clock, ids: ids)

    // MARK: - Payloads for every op type

    var known: [String: [UUID]] = [:]   // entity → ids that exist
    var counter = 0
    func value(for field: FieldSpec) -> Value? {
        counter += 1
        switch field.type {
        case .url: return .text("https://example.com/fixture/\(counter)")
        case .text:
            if let allowed = field.enumValues { return .text(allowed[counter % allowed.count]) }
            return .text("fixture text \(counter) ünïcode ✓")
        case .integer, .timestamp: return .integer(Int64(counter))
        case .real: return .real(field.maximum == 1 ? Double(counter % 100) / 100 : Double(counter))
        case .boolean: return .bool(counter % 2 == 0)
        case .id: return known[field.references!]?.last.map { .text($0.lowercased) }
        }
    }

    func payload(_ spec: OpTypeSpec) -> Payload? {
        let entity = schema.entity(spec.entity)!
        var p = Payload()
        for name in spec.fields {
            let field = entity.field(name)!
            if field.rule == .serverOnly && !spec.type.hasSuffix(".parsed") && !spec.type.hasSuffix(".plan") { continue }
            guard let v = value(for: field) else { if spec.required.contains(name) { return nil } else { continue } }
            p[name] = v
        }
        if let key = spec.valueKey, let fieldName = spec.field, let field = entity.field(fieldName) {
            if spec.action == .increment { p[key] = .integer(3) }
            else if field.type == .id { guard let v = value(for: field) else { return nil }; p[key] = v }
            else { p[key] = .text("tag\(counter % 3)") }
        }
        return p
    }

    // MARK: - Confirmed ops of every type, from other devices and the server

    var seq: Int64 = 0
    var deviceSeqs: [UUID: Int64] = [:]
    var confirmed: [Op] = []
    func confirm(_ spec: OpTypeSpec, entity: UUID, _ payload: Payload, from author: UUID) {
        seq += 1
        clock.advance(milliseconds: 60_000)
        deviceSeqs[author, default: 0] += 1
        confirmed.append(Op(opID: ids.makeUUID(), libraryID: library, deviceID: author, deviceSeq: deviceSeqs[author]!, type: spec.type,
                            version: spec.version, entityID: entity, payload: payload, deviceTime: clock.nowMilliseconds(), baseSeq: seq - 1,
                            serverSeq: seq, serverTime: clock.nowMilliseconds()))
    }
    let serverAuthored: Set<String> = Set(schema.ops.filter { spec in
        spec.fields.contains { schema.entity(spec.entity)?.field($0)?.rule == .serverOnly }
    }.map(\.type))
    for round in 0..<2 {
        for spec in schema.ops where spec.action == .create || spec.action == .upsert {
            let entity = spec.action == .upsert && spec.entity == schema.plan?.entity ? library : ids.makeUUID()
            guard let p = payload(spec) else { continue }
            confirm(spec, entity: entity, p, from: serverAuthored.contains(spec.type) ? Op.serverDeviceID : others[round % 2])
            known[spec.entity, default: []].append(entity)
        }
        for spec in schema.ops where spec.action != .create && spec.action != .upsert && spec.action != .restore {
            guard let target = known[spec.entity]?.first, let p = payload(spec) else { continue }
            confirm(spec, entity: target, p, from: serverAuthored.contains(spec.type) ? Op.serverDeviceID : others[(round + 1) % 2])
        }
        for spec in schema.ops where spec.action == .restore && round == 0 {
            guard let target = known[spec.entity]?.first else { continue }
            confirm(spec, entity: target, [:], from: others[0])
        }
    }
    try store.applyConfirmed(confirmed)
    // All but the newest 16 confirmed ops sealed, in segments of 12, with a snapshot at the seal
    // point: the fixture holds sealed history and its op ids as well as a hot log.
    var policy = CompactionPolicy()
    policy.keepOps = 16
    policy.segmentOpsMax = 12
    let compaction = try store.compact(policy)

    // MARK: - Pending ops of every type this device can write

    var pending = 0
    for spec in schema.ops where !serverAuthored.contains(spec.type) {
        let target: UUID? = spec.action == .create ? nil : spec.action == .upsert ? library : known[spec.entity]?.last
        if spec.action != .create && target == nil { continue }
        guard let p = payload(spec) else { continue }
        clock.advance(milliseconds: 1_000)
        do {
            let op = try store.write(spec.type, entity: target, payload: p)
            if spec.action == .create { known[spec.entity, default: []].append(op.entityID) }
            pending += 1
        } catch let error as ChronicleError where [.entityDeleted, .entityExists, .invalidValue].contains(error.code) {
            continue   // e.g. restoring a row that is not deleted
        }
    }

    // MARK: - Blobs (format v8): one queued to upload, one uploaded, one fetched in part

    var blobBytes = [UInt8]()
    var seed: UInt32 = 0x2026_1206
    for _ in 0..<6_000 { seed = seed &* 1_664_525 &+ 1_013_904_223; blobBytes.append(UInt8(truncatingIfNeeded: seed >> 24)) }
    clock.advance(milliseconds: 1_000)
    try store.addBlob(Array(blobBytes[0..<2_000]), mediaType: "image/jpeg")
    clock.advance(milliseconds: 1_000)
    let uploaded = try store.addBlob(Array(blobBytes[2_000..<4_000]), mediaType: "image/png")
    try store.recordBlobUploaded(uploaded, serverHolds: 2_000, complete: true)
    let fetching = BlobRef.of(Array(blobBytes[4_000..<6_000]))
    try store.appendFetchedBlob(fetching, length: 2_000, offset: 0, bytes: Array(blobBytes[4_000..<5_000]))
    let blobs = try store.blobs().count

    // MARK: - Dump

    let status = try store.status()
    let digest = try store.digest()
    let directory = "\(outRoot)/\(schema.name)-v\(schema.version)-format-v\(status.formatVersion)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    // posix_spawn (ChildProcess), not Foundation's Process: its start can crash the process
    // (swift-corelibs-foundation #5472; CHANGELOG, 2026-12-06 late).
    let dump = try ChildProcess.run("/usr/bin/sqlite3", [path, ".dump"], stderr: .inherit)
    guard dump.status == 0, !dump.signaled, !dump.output.isEmpty else {
        throw FixtureError(description: "sqlite3 .dump failed (exit status \(dump.status))")
    }
    try Data(dump.output).write(to: URL(fileURLWithPath: directory + "/store.sql"))
    let meta: [String: Any] = [
        "schema": schema.name, "schema_version": schema.version, "format_version": status.formatVersion,
        "digest": digest, "cursor": status.cursor, "confirmed_ops": status.confirmedOps, "pending_ops": status.unsentOps,
        "library_id": library.lowercased, "device_id": device.lowercased,
        "sealed_ops": compaction.opsSealed, "segments": compaction.segmentsWritten, "blobs": blobs,
        "op_types": Array(Set(confirmed.map(\.typeAndVersion))).sorted(),
        "pending_op_types": try store.pendingOps().map(\.typeAndVersion),
        "note": "Made by chronicle-fixture with this version's own schema and op formats. Never edit; regenerate only for a new version.",
    ]
    let json = try JSONSerialization.data(withJSONObject: meta, options: [.prettyPrinted, .sortedKeys])
    try json.write(to: URL(fileURLWithPath: directory + "/fixture.json"))
    print("wrote \(directory): \(status.confirmedOps) confirmed, \(pending) pending, digest \(digest)")
}

do {
    try makeFixture(schema, outRoot: outRoot)
} catch {
    print("chronicle-fixture: \(error)")
    exit(1)
}
