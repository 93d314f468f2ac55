import ChronicleCore
import ChronicleServer
import ChronicleStore
import ChronicleSync
import Foundation

extension Simulator {
    /// Devices at most, the new ones included.
    static let devicesMax = 16

    /// A new device signs in to the library and syncs at once (`FaultPlan.newDeviceRate`). Its
    /// store has never held anything, so its first round asks for the server's start image (built
    /// after each compaction in these runs), and starts from the snapshot or the whole log where
    /// there is none or it cannot be taken. Half the time the server compacts first, so that an
    /// image of its newest state is there. With the seed's crash rate, half the time the device
    /// takes the image itself and is killed after one of the adoption's steps
    /// (`DeviceStore.adoptStartImage(_:afterStep:)`): opened again, its store must be either the
    /// empty one or the whole image.
    func joinNewDevice() async throws {
        if random.chance(0.5) { try compactServer() }
        let index = devices.count
        let device = try makeDevice(index: index, name: "d\(index)", plan: plan)
        devices.append(device)
        devicesJoined += 1
        let image = try server.service.library(libraryID).currentStartImage()
        log.fault(.newDevice, "\(device.name) signs in to the library mid-run; the server's start image: "
                  + (image.map { "of the snapshot at seq \($0.seq)" } ?? "none"))
        if let image, plan.crashRate > 0, random.chance(0.5) {
            try await takeStartImageCrashing(device, imageSeq: image.seq)
        }
        _ = try await sync(device)
        try checkDevice(device)
    }

    /// `device` downloads the start image through its faults and adopts it, killed after the
    /// adoption step the seed picks; then checks its store is the empty one (killed before the
    /// rename) or the image (after it), and that `verify()` passes either way.
    private func takeStartImageCrashing(_ device: SimulatedDevice, imageSeq: Int64) async throws {
        let store = device.store
        let file = store.startImagePath
        defer { try? FileManager.default.removeItem(atPath: file) }
        let fetched = (try? await device.transport.startImage(storeFormat: DeviceStore.storeFormatVersion,
                                                               schemaFingerprint: store.schema.fingerprint, to: file)) ?? false
        if device.transport.takeCrashRequest() {
            log.record("\(device.name) restarts after its crash")
            try device.crashAndRestart()
            return
        }
        guard fetched else {
            log.record("\(device.name) could not fetch the start image; its round tries again")
            return
        }
        let crashAfter = random.between(1...3)
        do {
            try store.adoptStartImage(file, afterStep: { step, what in
                if step == crashAfter { throw CrashTakingStartImage(step: step, what: what) }
            })
            throw Violation("a crash while taking the start image is simulated", "\(device.name): the adoption ended without its step \(crashAfter)")
        } catch let crash as CrashTakingStartImage {
            log.fault(.deviceCrash, "\(device.name) crashes while taking the start image, after step \(crash.step): \(crash.what)")
        }
        try device.crashAndRestart()
        let reopened = device.store
        let pristine = try reopened.isPristine()
        if crashAfter < 3 && !pristine {
            throw Violation("a store killed before the start image replaced it is still the empty one",
                            "\(device.name): after step \(crashAfter) its store holds history up to seq \(try reopened.cursor())")
        }
        if crashAfter == 3 {
            guard !pristine, try reopened.cursor() == imageSeq, reopened.deviceID == device.deviceID else {
                throw Violation("a store killed after the start image replaced it is the whole image, as this device",
                                "\(device.name): cursor \(try reopened.cursor()) (the image's seq \(imageSeq)), device \(reopened.deviceID.lowercased.suffix(6))")
            }
        }
        log.record("\(device.name) opens again: " + (pristine ? "the empty store" : "the start image, at seq \(imageSeq)"))
        try checkDevice(device)
    }
}

/// Thrown from `adoptStartImage`'s step hook where the simulation kills the device.
struct CrashTakingStartImage: Error {
    var step: Int
    var what: String
}
