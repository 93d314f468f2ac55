#!/usr/bin/env bash
# Builds the API documentation of the public modules with the toolchain's own DocC: symbol graphs
# from a build of its own (`.build/docc`, so the main build's flags stay as they are), then
# `docc convert` of each module's catalog (`Sources/<Module>/<Module>.docc`), failing on any
# warning: a broken symbol link, a catalog that names a symbol that is not there.
#   bash Tools/scripts/docs.sh [OUTPUT_DIR]     # default .build/docs; one <Module>.doccarchive each
set -euo pipefail
cd "$(dirname "$0")/../.."
modules=(ChronicleCore ChronicleStore ChronicleSync ChronicleServerStore ChronicleServer ChroniclePostgres ChronicleArticles)
out="${1:-.build/docs}"
graphs=".build/docc/symbol-graphs"
docc="$(command -v docc || echo /opt/swift/usr/bin/docc)"
# Every public type says in a line what it is: a `///` summary right above it (attributes aside).
python3 - "${modules[@]}" <<'PY'
import os, re, sys
missing = []
for module in sys.argv[1:]:
    for root, _, files in os.walk(os.path.join("Sources", module)):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            path = os.path.join(root, name)
            lines = open(path, encoding="utf-8").read().split("\n")
            for i, line in enumerate(lines):
                if re.match(r"^\s*(?:@\w+\s+)*public\s+(?:final\s+)?(?:struct|enum|class|protocol|actor|typealias)\s+\w+", line):
                    j = i - 1
                    while j >= 0 and lines[j].strip().startswith("@"):
                        j -= 1
                    if j < 0 or not lines[j].strip().startswith("///"):
                        missing.append(f"{path}:{i + 1}: a public type without a summary: {line.strip()[:80]}")
for problem in missing:
    print(problem, file=sys.stderr)
sys.exit(1 if missing else 0)
PY
# The graphs stay between runs: an incremental build writes only those of the modules it compiles again.
mkdir -p "$graphs" "$out"
swift build --scratch-path .build/docc \
  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" >/dev/null
for module in "${modules[@]}"; do
  if [ ! -f "$graphs/$module.symbols.json" ]; then
    echo "docs.sh: no symbol graph for $module; remove .build/docc and run again" >&2; exit 1
  fi
  rm -rf "$graphs/$module" && mkdir -p "$graphs/$module"
  cp "$graphs/$module".symbols.json "$graphs/$module"/
  cp "$graphs/$module"@*.symbols.json "$graphs/$module"/ 2>/dev/null || true
  "$docc" convert "Sources/$module/$module.docc" --additional-symbol-graph-dir "$graphs/$module" \
    --fallback-display-name "$module" --fallback-bundle-identifier "org.chronicle.$module" \
    --output-path "$out/$module.doccarchive" --warnings-as-errors >"$out/$module.log" 2>&1 \
    || { cat "$out/$module.log" >&2; echo "docs.sh: $module's documentation has problems (above)" >&2; exit 1; }
  echo "docs.sh: $module → $out/$module.doccarchive"
done
