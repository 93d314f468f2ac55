#!/usr/bin/env python3
"""Checks that the documentation names only what exists.

Over README.md, SECURITY.md, BENCHMARKS.md, docs/*.md and Schemas/**/*.md (CHANGELOG.md is
history and is not checked), outside fenced code blocks:

- every relative Markdown link's target exists, and a link's #anchor into a .md file (or into
  the same file) names a heading of that file by its GitHub slug;
- every inline code span that reads as a path in this repository exists: one that starts with
  a top-level entry of the repository (Sources/, Tests/, Tools/, Schemas/, docs/, Package.swift,
  ...), looked up from the repository's root or from the document's own directory; or one
  that ends in a known extension (.md, .swift, .json, .yaml, ...), which may also be written as
  the end of a path (`device-v9.md`, `store/device-v9.md`). Spans with spaces (commands),
  absolute paths, URLs and placeholders (`<id>`, `…`, `*`, `$X`, a word such as PATH, DIR
  or NAME, `vN`) are not paths.

Prints each problem as FILE:LINE: message and exits 1 if there is any; otherwise prints one
line of summary and exits 0. Python 3 standard library only.

    python3 Tools/scripts/check-docs.py [--verbose]    (--verbose lists every link and path it checks)
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SKIPPED_DIRS = {".git", ".build", ".swiftpm", "node_modules"}
VERBOSE = "--verbose" in sys.argv[1:]
EXTENSIONS = (".md", ".swift", ".json", ".yaml", ".yml", ".sh", ".py", ".txt", ".dict", ".h",
              ".modulemap", ".sql", ".c")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
# Words that stand for a value in a path (`DIR/server.lock`, `PATH.damaged-TIME`, `device-vN.md`).
PLACEHOLDERS = {"PATH", "DIR", "DEST", "FILE", "NAME", "ID", "TIME", "N", "D", "S", "F", "X", "CONNINFO", "PEM",
                "TYPE", "URL", "SEQ", "TEXT", "BLOB", "DEVICE", "LIBRARY", "USER", "STORE", "VERSION", "PART"}


def documents():
    """The files checked, relative to the root, in a stable order."""
    found = [name for name in ("README.md", "SECURITY.md", "BENCHMARKS.md")
             if os.path.isfile(os.path.join(ROOT, name))]
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        found += sorted("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    schemas = os.path.join(ROOT, "Schemas")
    for directory, dirs, files in os.walk(schemas):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".md"):
                found.append(os.path.relpath(os.path.join(directory, f), ROOT))
    return found


def repository_files():
    """Every file and directory of the working tree, relative to the root (build output left out)."""
    paths = set()
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        relative = os.path.relpath(directory, ROOT)
        if relative != ".":
            paths.add(relative.replace(os.sep, "/"))
        for f in files:
            paths.add(os.path.normpath(os.path.join(relative, f)).replace(os.sep, "/"))
    return paths


def blank_fences(text):
    """The text with every fenced code block's lines emptied (line numbers kept)."""
    lines = text.split("\n")
    fence = None
    for i, line in enumerate(lines):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                lines[i] = ""
        else:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                    and line.strip() == match.group(1):
                fence = None
            lines[i] = ""
    return "\n".join(lines)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text)                          # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    """The anchors of a Markdown file's headings, duplicates numbered as GitHub numbers them."""
    if path not in anchor_cache:
        with open(path, encoding="utf-8") as f:
            text = blank_fences(f.read())
        seen = {}
        found = set()
        for line in text.split("\n"):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else "%s-%d" % (base, count))
        anchor_cache[path] = found
    return anchor_cache[path]


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def is_placeholder(token):
    if any(c in token for c in "<>…*${}~|?[]()'\",;="):
        return True
    if "..." in token or token.startswith("-"):
        return True
    words = re.split(r"[^A-Za-z0-9]+", token)
    return any(w in PLACEHOLDERS or re.fullmatch(r"v[A-Z]", w) for w in words)


def check_link(document, line, target, problems):
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return 0   # a URL (https:, mailto:, ...)
    path, _, anchor = target.partition("#")
    if VERBOSE:
        print("%s:%d: link %s" % (document, line, target), file=sys.stderr)
    here = os.path.dirname(os.path.join(ROOT, document))
    resolved = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, document)
    if not os.path.exists(resolved):
        problems.append("%s:%d: link target '%s' does not exist" % (document, line, target))
        return 1
    if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
        if anchor.lower() not in anchors(resolved):
            problems.append("%s:%d: link '%s': no heading of %s has the anchor '#%s'"
                            % (document, line, target, os.path.relpath(resolved, ROOT), anchor))
    return 1


def check_path(document, line, token, tops, files, problems):
    """Checks one code span; returns 1 if it was read as a path."""
    if any(c.isspace() for c in token) or "://" in token or token.startswith("/"):
        return 0
    if is_placeholder(token):
        return 0
    if token.startswith(".") and "/" not in token:
        return 0   # the end of a file's name (`.start-image.json`), not a file
    clean = token.rstrip("/")
    if clean.startswith("./"):
        clean = clean[2:]
    first = clean.split("/")[0]
    rooted = "/" in token and first in tops
    named = clean.endswith(EXTENSIONS)
    if not rooted and not named:
        return 0
    here = os.path.relpath(os.path.dirname(os.path.join(ROOT, document)), ROOT)
    candidates = {os.path.normpath(clean).replace(os.sep, "/"),
                  os.path.normpath(os.path.join(here, clean)).replace(os.sep, "/")}
    if VERBOSE:
        print("%s:%d: path `%s`" % (document, line, token), file=sys.stderr)
    if any(c in files for c in candidates):
        return 1
    if not rooted and any(f.endswith("/" + clean) for f in files):
        return 1
    problems.append("%s:%d: `%s` names no file or directory of the repository" % (document, line, token))
    return 1


def main():
    files = repository_files()
    tops = {p for p in files if "/" not in p}
    problems = []
    checked = {"documents": 0, "links": 0, "paths": 0}
    for document in documents():
        with open(os.path.join(ROOT, document), encoding="utf-8") as f:
            text = blank_fences(f.read())
        checked["documents"] += 1
        spans = []
        for match in CODE_SPAN.finditer(text):
            spans.append((match.start(), match.end()))
            checked["paths"] += check_path(document, line_of(text, match.start()), match.group(2).strip(),
                                           tops, files, problems)
        # Links are read with the code spans blanked (newlines kept), so `[a](b)` in code is no link.
        prose = list(text)
        for start, end in spans:
            for i in range(start, end):
                if prose[i] != "\n":
                    prose[i] = " "
        prose = "".join(prose)
        for match in INLINE_LINK.finditer(prose):
            checked["links"] += check_link(document, line_of(prose, match.start()), match.group(1), problems)
        for match in REFERENCE_LINK.finditer(prose):
            checked["links"] += check_link(document, line_of(prose, match.start()), match.group(1), problems)
    order = {d: i for i, d in enumerate(documents())}
    problems.sort(key=lambda p: (order.get(p.split(":")[0], 0), int(p.split(":")[1])))
    for problem in problems:
        print(problem)
    sys.stdout.flush()
    if problems:
        print("check-docs: %d problem%s in %d documents." % (len(problems), "" if len(problems) == 1 else "s",
                                                             checked["documents"]), file=sys.stderr)
        return 1
    print("check-docs: %(documents)d documents, %(links)d relative links and %(paths)d paths named in code, all found." % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
