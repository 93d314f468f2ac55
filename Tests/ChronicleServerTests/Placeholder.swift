import Testing
@testable import ChronicleServer
