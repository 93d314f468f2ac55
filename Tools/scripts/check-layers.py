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
- a module imports one of the package's modules it does not declare as a dependency;
- a library target depends on a module the graph below (`ALLOWED`) does not give it, or is not in
  the graph at all: a new module, or a new edge, is placed here on purpose;
- a generic module (the engine: `GENERIC`) reaches an app's module (`APPS`), or its code (doc
  comments aside) holds a string literal naming an op type of a reference app (`"article.`,
  `"job.`, `'note.` in SQL, …: the entity part of every op type in `Schemas/*/*.json`). The engine knows apps by
  their schemas, as data; an app's server-side work is a `ServerExtension` in a module of its own.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEVICE = ["ChronicleCore", "ChronicleStore", "ChronicleSync"]
SERVER_AND_TESTING = ["ChronicleServerStore", "ChronicleServer", "ChroniclePostgres", "ChronicleTesting"]
# The library targets and what each may depend on directly (the README's Modules picture).
ALLOWED = {
    "ChronicleCore": {"CLZ4", "CCrypto"},
    "ChronicleStore": {"ChronicleCore", "CSQLite", "CLZ4", "CCrypto"},
    "ChronicleSync": {"ChronicleStore"},
    "ChronicleServerStore": {"ChronicleStore", "CSQLite"},
    "ChronicleServer": {"ChronicleServerStore", "CMicroHTTPD", "CCrypto"},
    "ChroniclePostgres": {"ChronicleServerStore", "CPQ"},
    # The read-it-later app's article fetcher, a ServerExtension.
    "ChronicleArticles": {"ChronicleServer", "ChronicleServerStore", "CXML2", "CTLS"},
    "ChronicleTesting": {"ChronicleSync", "ChronicleServer", "ChronicleServerStore", "ChronicleStore", "CSpawn"},
}
# The engine: it names no app. Its sources are checked for the apps' op types.
GENERIC = ["ChronicleCore", "ChronicleStore", "ChronicleSync", "ChronicleServerStore", "ChronicleServer", "ChroniclePostgres"]
GENERIC_SOURCES = ["ChronicleServer", "ChronicleServerStore", "ChroniclePostgres", "ChronicleSync", "ChronicleStore"]
# Modules of the reference apps, which the engine never reaches.
APPS = ["ChronicleArticles"]
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


def app_op_prefixes():
    """The entity part of every op type the reference apps' schemas (`Schemas/<app>/v<N>.json`) declare."""
    prefixes = set()
    schemas = os.path.join(ROOT, "Schemas")
    for app in sorted(os.listdir(schemas)):
        directory = os.path.join(schemas, app)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith(".json"):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    schema = json.load(f)
                for op in schema.get("ops", []) if isinstance(schema, dict) else []:
                    if isinstance(op, dict) and "." in op.get("type", ""):
                        prefixes.add(op["type"].split(".", 1)[0])
    return sorted(prefixes)


def blank_comments(text, strings_too=False):
    """`text` with every comment's characters (doc comments too) turned into spaces, lines kept:
    a `//` inside a string literal is not a comment, nor a quote inside a comment a string.
    `strings_too`: string literals' characters too (their quotes kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (m := re.match(r'(#*)("""|")', text[i:i + 40])):
            hashes, quote = m.group(1), m.group(2)
            close = quote + hashes
            j = i + len(m.group(0))
            while j < n and not text.startswith(close, j):
                j += 2 if text[j] == "\\" and not hashes else 1
            j = min(n, j + len(close))
            out.append(re.sub(r"[^\n\"#]", " ", text[i:j]) if strings_too else text[i:j])
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] if "//" in line and '"' not in line.split("//", 1)[0] else line
                     for line in text.split("\n"))


# Sizes a reader can hold: no function (or initializer) in Sources longer than this many lines,
# no file longer than FILE_LINES_MAX.
FUNCTION_LINES_MAX = 80
FILE_LINES_MAX = 500
DECLARATION = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|package|static|final|"
                         r"override|mutating|nonisolated|convenience|required|class)\s+)*(func\s+[^\s(<]+|init[?!]?\s*[(<]|subscript|deinit)")


def oversized(rel, text):
    """Functions over FUNCTION_LINES_MAX lines and a file over FILE_LINES_MAX, counted on the code
    with comments and string literals blanked (their braces do not count)."""
    problems = []
    lines = text.split("\n")
    if len(lines) > FILE_LINES_MAX:
        problems.append(f"{rel}: {len(lines)} lines (at most {FILE_LINES_MAX})")
    code = blank_comments(text, strings_too=True).split("\n")
    for start, line in enumerate(code):
        match = DECLARATION.match(line)
        if not match:
            continue
        depth, opened, end = 0, False, start
        while end < len(code):
            for ch in code[end]:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                break
            if not opened and (depth < 0 or (end > start and DECLARATION.match(code[end]))):
                break   # a requirement without a body
            end += 1
        if opened and end - start + 1 > FUNCTION_LINES_MAX:
            problems.append(f"{rel}:{start + 1}: {match.group(1).strip()} is {end - start + 1} lines (at most {FUNCTION_LINES_MAX})")
    return problems


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

    for name, target in sorted(targets.items()):
        if target["type"] != "regular":
            continue
        if name not in ALLOWED:
            problems.append(f"Package.swift: library target {name} is not in check-layers.py's graph (ALLOWED)")
            continue
        for dep in sorted(set(graph[name]) - ALLOWED[name]):
            problems.append(f"Package.swift: {name} depends on {dep}, which the module graph does not allow")
    for module in GENERIC:
        for app in sorted(reach(module) & set(APPS)):
            problems.append(f"Package.swift: generic module {module} depends on the app module {app}")

    prefixes = app_op_prefixes()
    if not prefixes:
        problems.append("Schemas/: no op types found in the apps' schemas")
    # A string literal (plain or raw) that begins with an app's op type ("article.save", #"job.\(x)"#),
    # or one quoted in SQL inside a string ('article.save'): comments are blanked, so a quote is code's.
    app_literal = re.compile(r"""(#*"|')(""" + "|".join(map(re.escape, prefixes)) + r")\.") if prefixes else None
    for module in GENERIC_SOURCES:
        for path in swift_files(os.path.join(ROOT, "Sources", module)):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                code = blank_comments(f.read())
            for match in app_literal.finditer(code) if app_literal else []:
                line = code[:match.start()].count("\n") + 1
                problems.append(f"{rel}:{line}: the generic module {module} names the app op type {match.group(0)}… "
                                f"(an app's server-side work is a ServerExtension in a module of its own)")

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
            if rel.startswith("Sources/"):
                problems += oversized(rel, text)
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
    print(f"check-layers: {len(graph)} targets; device modules reach no server module; the library targets keep the "
          f"module graph; the engine names no app op type ({', '.join(prefixes)}); Core does no I/O; "
          f"no test double in production modules; no function in Sources over {FUNCTION_LINES_MAX} lines, no file over {FILE_LINES_MAX}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
