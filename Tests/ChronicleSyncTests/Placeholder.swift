import Testing
@testable import ChronicleSync
