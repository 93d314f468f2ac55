import Foundation
import Testing

/// The real binary, its output and its exit codes.
@Suite struct ToolEndToEndTests {
    @Test func readItLaterSessionFromInitToVerify() throws {
        let t = try Tool()
        let created = try t.run("init", "--json")
        #expect(created.status == 0)
        #expect(try created.object()["schema"] as? String == "readitlater")

        let article = try t.id("save", "https://example.com/offline-first", "--title", "Offline-first apps")
        try t.ok("tag", article, "reading")
        try t.ok("tag", String(article.prefix(8)), "sync")   // a unique prefix is enough
        try t.ok("untag", article, "sync")
        let highlight = try t.id("highlight", article, "--quote", "the network is only bookkeeping", "--color", "green", "--note", "core idea")
        try t.ok("note", article, "Read again on the plane")
        try t.ok("progress", article, "0.4")
        try t.ok("update", article, "--favorite", "true")
        let collection = try t.id("collection", "create", "Weekend")
        try t.ok("collection", "add", collection, article)
        try t.ok("collection", "rename", collection, "Long reads")

        let shown = try t.run("show", article, "--json").object()
        #expect(shown["title"] as? String == "Offline-first apps")
        #expect(shown["tags"] as? [String] == ["reading"])
        #expect(shown["progress"] as? Double == 0.4)
        #expect((shown["highlight"] as? [[String: Any]])?.first?["id"] as? String == highlight)
        #expect((shown["collection"] as? [[String: Any]])?.first?["name"] as? String == "Long reads")

        let hits = try #require(try t.run("search", "bookkeeping", "--json").json() as? [[String: Any]])
        #expect(hits.first?["id"] as? String == article)
        #expect((hits.first?["snippet"] as? String)?.contains("[bookkeeping]") == true)
        #expect((try t.run("search", "offl*", "--json").json() as? [[String: Any]])?.count == 1)

        let log = try #require(try t.run("log", "--json").json() as? [[String: Any]])
        #expect(log.count == 11)
        #expect(log.allSatisfy { $0["pending"] as? Bool == true })

        let audit = try t.run("audit", article)
        #expect(audit.status == 0)
        #expect(audit.stdout.contains("article.tag@1"))
        #expect(audit.stdout.contains("tags: superseded — added \"sync\""))

        let status = try t.run("status")
        #expect(status.stdout.contains("11 changes saved on this device"))
        let rebuilt = try t.run("rebuild", "--verify", "--json").object()
        #expect(rebuilt["verified"] as? Bool == true)
        let verified = try t.run("verify", "--json").object()
        #expect(verified["passed"] as? Bool == true)

        try t.ok("delete", article)
        #expect((try t.run("list", "--json").json() as? [Any])?.isEmpty == true)
        #expect((try t.run("list", "--all", "--json").json() as? [Any])?.count == 1)
        try t.ok("restore", article)
        #expect((try t.run("list", "--tag", "reading", "--json").json() as? [Any])?.count == 1)
    }

    @Test func badInputGetsAStableCodeASentenceAndANonZeroExit() throws {
        let t = try Tool()
        let missing = try t.run("status")
        #expect(missing.status == 4)
        #expect(missing.stderr.contains("No store at") && missing.stderr.contains("[store_missing]"))
        try t.ok("init")
        let article = try t.id("save", "https://example.com/a")
        let cases: [([String], Int32, String)] = [
            (["save", "not a url"], 3, "invalid_value"),
            (["progress", article, "1.5"], 3, "invalid_value"),
            (["progress", article, "abc"], 3, "invalid_value"),
            (["tag", "00000000-0000-4000-8000-000000000000", "x"], 3, "unknown_entity"),
            (["tag", "zzzz", "x"], 3, "unknown_entity"),
            (["tag", article], 2, "usage"),
            (["frobnicate"], 2, "usage"),
            (["list", "--limit", "-3"], 2, "usage"),
            (["save", "https://e.com", "--wat"], 2, "usage"),
            (["restore", article], 3, "invalid_value"),
            (["init"], 4, "store_exists"),
        ]
        for (arguments, status, code) in cases {
            let result = try t.run(arguments + ["--json"])
            #expect(result.status == status, "chronicle \(arguments.joined(separator: " ")) → \(result.status): \(result.stderr)")
            let error = try result.object()["error"] as? [String: Any]
            #expect(error?["code"] as? String == code, "chronicle \(arguments.joined(separator: " "))")
            #expect((error?["message"] as? String)?.isEmpty == false)
        }
        #expect(try t.run("status", "--json").object()["unsent_ops"] as? Int == 1, "refused commands wrote nothing")
    }

    @Test func rebuildVerifyFailsLoudlyWhenTheProjectionHadDrifted() throws {
        let t = try Tool()
        try t.ok("init")
        let article = try t.id("save", "https://example.com/d", "--title", "Original")
        // Someone edits a projection table behind the engine's back.
        _ = try Tool.exec(URL(fileURLWithPath: "/usr/bin/sqlite3"), [t.store, "UPDATE article SET title = 'Tampered'"])
        let verify = try t.run("verify")
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("FAIL digest equals a replay of the log"))
        let rebuilt = try t.run("rebuild", "--verify")
        #expect(rebuilt.status == 1)
        #expect(rebuilt.stderr.contains("[digest_mismatch]"))
        #expect(try t.run("show", article, "--json").object()["title"] as? String == "Original", "the rebuild restored the log's state")
        #expect(try t.run("verify").status == 0)
    }

    @Test func futureStoreIsRefusedAndLeftUntouched() throws {
        let t = try Tool()
        try t.ok("init")
        _ = try Tool.exec(URL(fileURLWithPath: "/usr/bin/sqlite3"), [t.store, "UPDATE chronicle_meta SET value = 97 WHERE key = 'format_version'; PRAGMA journal_mode=DELETE;"])
        let before = try Data(contentsOf: URL(fileURLWithPath: t.store))
        let result = try t.run("status")
        #expect(result.status == 4)
        #expect(result.stderr.contains("format v97") && result.stderr.contains("[future_store_version]"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: t.store)) == before)
    }

    @Test func everyCommandAnswersHelp() throws {
        let t = try Tool()
        let overview = try t.run("--help")
        #expect(overview.status == 0 && overview.stdout.contains("Commands:"))
        let names = ["init", "save", "update", "tag", "untag", "highlight", "note", "progress", "collection", "delete", "restore",
                     "op", "list", "show", "search", "log", "audit", "status", "rebuild", "verify"]
        for name in names {
            let help = try t.run(name, "--help")
            #expect(help.status == 0 && help.stdout.contains("Usage: chronicle \(name)"), "\(name) --help")
            #expect(overview.stdout.contains("  \(name) "), "overview lists \(name)")
        }
    }

    @Test func genericOpCommandDrivesTheFieldServiceSchema() throws {
        let t = try Tool()
        try t.ok("init", "--schema", "fieldservice")
        let job = try t.id("op", "job.create", "--payload", #"{"title":"Fix boiler","customer":"Ada"}"#)
        let part = try t.id("op", "part.add", "--payload", "{\"job_id\":\"\(job)\",\"sku\":\"VALVE-22\"}")
        try t.ok("op", "part.adjust", part, "--payload", #"{"delta":4}"#)
        #expect(try t.run("show", part, "--json").object()["quantity"] as? Int == 4)
        #expect(try t.run("op", "part.adjust", part, "--payload", "{nope").status == 3)
        let jobs = try #require(try t.run("list", "--entity", "job", "--json").json() as? [[String: Any]])
        #expect(jobs.first?["customer"] as? String == "Ada")
    }
}

@Suite struct ProgressBarTests {
    /// Long work draws a progress bar on a terminal and stays quiet when piped.
    @Test func rebuildDrawsProgressOnATerminalOnly() throws {
        let t = try Tool()
        try t.ok("init")
        let article = try t.id("save", "https://example.com/p")
        for i in 0..<3 { try t.ok("tag", article, "t\(i)") }
        let piped = try t.run("rebuild")
        #expect(piped.status == 0)
        #expect(!piped.stderr.contains("Rebuilding"), "nothing on stderr when it is not a terminal")

        // util-linux `script` gives the child a pseudo-terminal.
        let script = URL(fileURLWithPath: "/usr/bin/script")
        try #require(FileManager.default.isExecutableFile(atPath: script.path))
        let command = "\(Tool.binary.path) --store \(t.store) rebuild"
        let onTerminal = try Tool.exec(script, ["-qec", command, "/dev/null"])
        #expect(onTerminal.status == 0, "\(onTerminal.stderr)")
        #expect(onTerminal.stdout.contains("Rebuilding") && onTerminal.stdout.contains("100%"))
        #expect(onTerminal.stdout.contains("Rebuilt from"))
    }
}
