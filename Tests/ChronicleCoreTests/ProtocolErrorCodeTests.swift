import ChronicleCore
import Foundation
import Testing

/// The refusal codes a server answers and a device matches on are one typed list, and the API
/// document names every one of them.
@Suite struct ProtocolErrorCodeTests {
    @Test func everyCodeIsDistinctAndSnakeCase() {
        let raw = ProtocolError.Code.all.map(\.rawValue)
        #expect(Set(raw).count == raw.count, "a code listed twice")
        for code in raw {
            #expect(!code.isEmpty && code.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" }, "\(code)")
        }
    }

    @Test func theAPIDocumentNamesEveryCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("Schemas/api/openapi.yaml"), encoding: .utf8)
        let words = Set(document.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
        let missing = ProtocolError.Code.all.map(\.rawValue).filter { !words.contains($0) }
        #expect(missing.isEmpty, "Schemas/api/openapi.yaml does not name: \(missing.joined(separator: ", "))")
    }

    @Test func aRefusalCarriesItsTypedCodeAndAStoreErrorKeepsItsOwn() {
        let refusal = ProtocolError(409, .deviceSeqGap, "Gap.")
        #expect(refusal.code == .deviceSeqGap && refusal.code.rawValue == "device_seq_gap")
        let fromStore = ProtocolError(400, ChronicleError(.malformedPayload, "Bad."))
        #expect(fromStore.code == ProtocolError.Code(ChronicleError.Code.malformedPayload) && fromStore.code.rawValue == "malformed_payload")
    }
}
