#!/usr/bin/env python3
"""Checks that the package's modules keep the layering docs/design.md describes.

    python3 Tools/scripts/check-layers.py [--package-json FILE]

Reads the target graph from `swift package dump-package` (or FILE, its saved output) and the
sources, and fails (exit 1, one line per problem) where:

- a device module (ChronicleCore, ChronicleStore, ChronicleSync) depends, directly or through
  another module, on the server's modules or on the test support;
- ChronicleCore reaches the file system or the network (it holds the pure logic: ops, schemas,
  rules, codecs, protocol messages);
- a production module (every library target but ChronicleTesting) or the `chronicle` tool holds
  a test double: the in-memory transport, the manual clock, seeded ids, fault injection;
- a module imports one of the package's modules it does not declare as a dependency.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEVICE = ["ChronicleCore", "ChronicleStore", "ChronicleSync"]
SERVER_AND_TESTING = ["ChronicleServerStore", "ChronicleServer", "ChroniclePostgres", "ChronicleTesting"]
# What Core may not touch: files, processes, sockets.
CORE_IO = re.compile(r"\b(FileManager|FileHandle|fopen|fread|fwrite|Glibc\.(open|read|write|close)|"
                     r"URLSession|InputStream|OutputStream|socket\(|posix_spawn|Process\(\))")
CORE_IMPORTS = re.compile(r"^\s*import\s+(Glibc|Darwin|Musl|FoundationNetworking|CSQLite|CMicroHTTPD|CPQ|CXML2|CTLS)\b",
                          re.M)
# Test doubles, by the names they go by; they live in ChronicleTesting only.
DOUBLES = re.compile(r"\b(class|struct|enum|actor)\s+(InMemoryTransport|ManualClock|SeededIDGenerator|"
                     r"FaultInjectingHandler|\w*Fake\w*|\w*Mock\w*|\w*Stub\w*)\b")
DOUBLE_SWITCHES = re.compile(r"CHRONICLE_FAULT_\w+")


def package():
    if len(sys.argv) == 3 and sys.argv[1] == "--package-json":
        with open(sys.argv[2]) as f:
            return json.load(f)
    scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), "chronicle-check-layers")
    out = subprocess.run(["swift", "package", "--scratch-path", scratch, "dump-package"], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def dependencies(target):
    names = []
    for dep in target.get("dependencies", []):
        for kind in ("byName", "target", "product"):
            if kind in dep:
                names.append(dep[kind][0])
    return names


def target_path(target):
    if target.get("path"):
        return os.path.join(ROOT, target["path"])
    base = "Tests" if target["type"] == "test" else "Sources"
    return os.path.join(ROOT, base, target["name"])


def swift_files(path):
    for directory, _, files in os.walk(path):
        for name in sorted(files):
            if name.endswith(".swift"):
                yield os.path.join(directory, name)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] if "//" in line and '"' not in line.split("//", 1)[0] else line
                     for line in text.split("\n"))


def main():
    targets = {t["name"]: t for t in package()["targets"]}
    graph = {name: dependencies(t) for name, t in targets.items()}
    problems = []

    def reach(name, seen=None):
        seen = set() if seen is None else seen
        for dep in graph.get(name, []):
            if dep not in seen:
                seen.add(dep)
                reach(dep, seen)
        return seen

    for module in DEVICE:
        if module not in graph:
            problems.append(f"Package.swift: no target {module}")
            continue
        for bad in sorted(reach(module) & set(SERVER_AND_TESTING)):
            problems.append(f"Package.swift: device module {module} depends on {bad}")

    modules = {name for name, t in targets.items() if t["type"] in ("regular", "executable", "test")}
    for name, target in sorted(targets.items()):
        if target["type"] not in ("regular", "executable", "test"):
            continue
        allowed = reach(name)
        production = target["type"] == "regular" and name != "ChronicleTesting" or name == "chronicle"
        for path in swift_files(target_path(target)):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            code = strip_comments(text)
            for imported in re.findall(r"^\s*(?:@testable\s+)?import\s+(\w+)", code, re.M):
                if imported in modules and imported != name and imported not in allowed:
                    problems.append(f"{rel}: imports {imported}, which {name} does not depend on")
            if name == "ChronicleCore":
                for match in CORE_IMPORTS.finditer(code):
                    problems.append(f"{rel}: ChronicleCore imports {match.group(1)} (Core does no I/O)")
                for match in CORE_IO.finditer(code):
                    line = code[:match.start()].count("\n") + 1
                    problems.append(f"{rel}:{line}: ChronicleCore uses {match.group(0)} (Core does no I/O)")
            if production:
                for match in DOUBLES.finditer(code):
                    line = code[:match.start()].count("\n") + 1
                    problems.append(f"{rel}:{line}: test double {match.group(2)} in production module {name}")
                for match in DOUBLE_SWITCHES.finditer(code):
                    line = code[:match.start()].count("\n") + 1
                    problems.append(f"{rel}:{line}: fault switch {match.group(0)} in production module {name}")

    for problem in problems:
        print(problem)
    if problems:
        print(f"check-layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-layers: {len(graph)} targets; device modules reach no server module; Core does no I/O; "
          f"no test double in production modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
