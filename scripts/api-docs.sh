#!/usr/bin/env bash
# Builds dtrain's API reference (HTML) from the `///` comments of include/dtrain with doxygen (Debian
# package doxygen: scripts/install-deps.sh --docs), by the settings of the Doxyfile at the top of the
# repository: namespace dtrain::detail and the detail/ folders are left out, and every undocumented public
# entity is a warning.
# Usage: scripts/api-docs.sh [OUTPUT_DIR]      (default: build-api-docs; the pages are in OUTPUT_DIR/html)
# Prints the warnings, then their count per file, most first. Exit status 0 when there were none, 1 when
# doxygen warned (WARN_AS_ERROR = FAIL_ON_WARNINGS: the pages are still written), 2 without doxygen.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-api-docs}
command -v doxygen > /dev/null ||
  { echo "api-docs.sh: doxygen is missing: run scripts/install-deps.sh --docs" >&2; exit 2; }
mkdir -p "$out"
log="$out/warnings.log"
status=0
# Settings after the Doxyfile's own override them: the output directory and the warnings' file.
{ cat Doxyfile; printf 'OUTPUT_DIRECTORY = %s\nWARN_LOGFILE = %s\n' "$out" "$log"; } | doxygen - || status=1
# A warning's first line starts with "<file>:<line>: warning:" ("error:" under WARN_AS_ERROR); the lines
# after it continue it.
count=$(grep -cE ': (warning|error): ' "$log" || true)
if [ "$count" -gt 0 ]; then
  cat "$log"
  echo "=== api-docs.sh: $count warning(s) per file"
  grep -oE '^[^:]*: *[0-9]*: (warning|error):' "$log" | sed 's/:.*//; s|^.*/include/||' | sort | uniq -c | sort -rn
  status=1
fi
echo "=== api-docs.sh: $count warning(s); reference in $out/html/index.html"
exit $status
