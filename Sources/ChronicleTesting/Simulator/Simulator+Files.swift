import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

/// Files (`FaultPlan.fileRate`): devices add them and name them in ops, or fetch the ones others
/// added; the engine uploads them after its rounds, through the same faults as everything else.
extension Simulator {
    /// Fields that name a file in the schemas the simulation runs.
    static let fileFields: Set<String> = ["audio_ref", "blob_ref"]

    /// Adds a file (mostly small; one in eight spans two chunks) and names it in an op where
    /// the schema has one that takes a file; or, three times in ten, fetches a file some device
    /// added. A fetched file must be that file's bytes.
    func addOrFetchFile(on device: SimulatedDevice) async throws {
        if !files.isEmpty, random.chance(0.3) {
            try await fetchFile(on: device)
            return
        }
        let count = random.chance(0.125) ? random.between((BlobLimits.chunkBytes + 1)...(2 * BlobLimits.chunkBytes)) : random.between(1...4_000)
        var state = random.next() | 1
        let bytes = (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
        let ref: BlobRef
        do {
            ref = try device.store.addBlob(bytes)
        } catch let error as ChronicleError {
            guard error.code == .diskFull, device.diskFullPages != nil else {
                throw Violation("a file is kept, or refused only when the disk is full", "\(device.name): \(error.code) \(error.message)")
            }
            log.record("\(device.name) cannot keep a file of \(count) bytes: the disk is full")
            return
        }
        files[ref] = bytes
        log.record("\(device.name) adds file \(ref.hex.prefix(8)) (\(count) bytes)")
        let workload = workload(for: device)
        let specs = workload.deviceOps.filter { spec in spec.fields.contains { Self.fileFields.contains($0) } }
        guard !specs.isEmpty else { return }
        let spec = random.pick(specs)
        guard var planned = try workload.plan(spec, on: device.store),
              let field = spec.fields.first(where: { Self.fileFields.contains($0) }) else { return }
        planned.payload[field] = .text(ref.description)
        try write(planned, on: device)
    }

    /// Fetches a file some device added: it may not be on the server yet, and the network may
    /// fail; what arrives must be the file's bytes.
    func fetchFile(on device: SimulatedDevice) async throws {
        let ref = random.pick(files.keys.sorted())
        let info: BlobInfo
        do {
            info = try await device.engine.fetchBlob(ref)
        } catch {
            log.record("\(device.name) cannot fetch \(ref.hex.prefix(8)): \(sanitize("\(error)").prefix(120))")
            return
        }
        guard info.isHeld, try device.store.blob(ref) == files[ref] else {
            throw Violation("a file fetched is that file's bytes", "\(device.name) fetched \(ref.hex.prefix(8)) (\(info.state.rawValue), \(info.received) bytes)")
        }
        filesFetched += 1
        log.record("\(device.name) fetches file \(ref.hex.prefix(8))")
    }

    /// After convergence: every file a row names is on the server whenever any device holds it,
    /// every copy (devices', the server's, and the one a fresh device fetches) is the file's
    /// bytes, and no device has files left to upload.
    func checkFiles(fetchingWith fresh: SimulatedDevice) async throws {
        guard !files.isEmpty else { return }
        for device in devices {
            let backlog = try device.store.blobUploadBacklog()
            if backlog.count > 0 {
                throw Violation("after convergence no device has files left to upload", "\(device.name): \(backlog.count) files, \(backlog.bytes) bytes")
            }
        }
        let named = try server.service.library(libraryID).blobNames(deletedBefore: nil).names
        for (ref, bytes) in files.sorted(by: { $0.key < $1.key }) where named.contains(ref.hex) {
            var held = false
            for device in devices {
                guard let copy = try device.store.blob(ref) else { continue }
                guard copy == bytes else {
                    throw Violation("a device's copy of a file is the file's bytes", "\(device.name) holds \(copy.count) bytes of \(ref.hex.prefix(8)), not its \(bytes.count)")
                }
                held = true
            }
            let status = try server.service.blobs.status(library: libraryID, blob: ref)
            if held && !status.complete {
                throw Violation("a file a row names is on the server while any device holds it",
                                "\(ref.hex.prefix(8)): the server holds \(status.received) of \(bytes.count) bytes")
            }
            guard status.complete else { continue }
            do {
                _ = try await fresh.engine.fetchBlob(ref)
            } catch {
                throw Violation("a file on the server can be fetched", "\(ref.hex.prefix(8)): \(sanitize("\(error)"))")
            }
            if try fresh.store.blob(ref) != bytes {
                throw Violation("a file fetched is that file's bytes", "a fresh device's copy of \(ref.hex.prefix(8)) differs")
            }
        }
        log.record("files: \(files.count) added, \(named.count) named, \(filesFetched) fetched in the safety phase; every copy checked")
    }
}
