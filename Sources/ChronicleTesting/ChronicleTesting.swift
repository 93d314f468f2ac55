// The seeded simulator lives here (issue 4).
import ChronicleSync
