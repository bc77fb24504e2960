#!/usr/bin/env python3
"""The code in README.md and docs/*.md works as shown.

Marker convention (an HTML comment on the line right before a fenced block, invisible when rendered):
  <!-- compile -->  before a ```cpp block: the block is a whole translation unit; it is compiled against
                    include/ with the MPI compiler (-std=c++17, the flags of the examples) and must build.
  <!-- run -->      before a ```sh block: every line is run with bash (-e, -o pipefail) in a scratch
                    directory where `build` is the build tree, `data` the repository's data/ and `scripts`
                    its scripts/, so commands are written as from the repository root. Mark only cheap
                    commands (seconds, no network, no root).
Other fenced blocks are illustrations (fragments) and are not checked. Besides, the README's first program
must be examples/quickstart/main.cpp, without its leading comment lines, character for character.

Usage: check_snippets.py --source <repo> --build <build dir> --cxx <mpicxx> [--only-compile|--only-run]
Prints one line per checked block (file:line) and exits 1 if any failed, 2 if a marker is misplaced.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

parser = argparse.ArgumentParser()
parser.add_argument("--source", required=True)
parser.add_argument("--build", required=True)
parser.add_argument("--cxx", required=True)
parser.add_argument("--only-compile", action="store_true")
parser.add_argument("--only-run", action="store_true")
args = parser.parse_args()
source, build = pathlib.Path(args.source).resolve(), pathlib.Path(args.build).resolve()

pages = [source / "README.md"] + sorted((source / "docs").glob("*.md"))
fence = re.compile(r"^```(\w*)\s*$")
marker = re.compile(r"^<!--\s*(compile|run)\s*-->\s*$")


def blocks(path):
    """(marker or None, language, first line number, text) of every fenced block of a page."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = fence.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        mark = marker.match(lines[start - 1]) if start > 0 else None
        yield (mark.group(1) if mark else None), lang, start + 1, "\n".join(lines[start + 1:j]) + "\n"
        i = j + 1


failures, checked = [], 0
compiled, ran = 0, 0
with tempfile.TemporaryDirectory(prefix="dtrain-docs-") as tmp:
    tmp = pathlib.Path(tmp)
    for name, target in (("build", build), ("data", source / "data"), ("scripts", source / "scripts")):
        os.symlink(target, tmp / name)
    for page in pages:
        rel = page.relative_to(source)
        for mark, lang, line, text in blocks(page):
            where = f"{rel}:{line}"
            if mark is None:
                continue
            if (mark == "compile") != (lang == "cpp") or (mark == "run") != (lang in ("sh", "bash")):
                print(f"{where}: <!-- {mark} --> stands before a ```{lang} block; compile goes with cpp, run with sh")
                sys.exit(2)
            if mark == "compile" and not args.only_run:
                compiled += 1
                src = tmp / f"snippet_{compiled}.cpp"
                src.write_text(text)
                cmd = [args.cxx, "-std=c++17", "-O0", "-Wall", "-Wextra", "-Wpedantic", "-c", str(src),
                       "-o", str(tmp / f"snippet_{compiled}.o"), f"-I{source / 'include'}",
                       f"-I{build / 'include'}"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                ok = r.returncode == 0
                print(f"{'ok  ' if ok else 'FAIL'} compile {where}")
                if not ok:
                    failures.append(f"{where}: the ```cpp block does not compile:\n{r.stderr[-4000:]}")
            elif mark == "run" and not args.only_compile:
                ran += 1
                r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=tmp, capture_output=True,
                                   text=True, timeout=600)
                ok = r.returncode == 0
                print(f"{'ok  ' if ok else 'FAIL'} run     {where}")
                if not ok:
                    failures.append(f"{where}: the ```sh block exited with {r.returncode}:\n{text}"
                                    f"--- output ---\n{(r.stdout + r.stderr)[-4000:]}")

# The README's first program is the quickstart example.
if not args.only_run:
    readme = next(t for m, lang, _, t in blocks(source / "README.md") if m == "compile")
    example = (source / "examples/quickstart/main.cpp").read_text().splitlines()
    while example and example[0].startswith("//"):
        example.pop(0)
    if readme != "\n".join(example) + "\n":
        failures.append("README.md: the first ```cpp block is not examples/quickstart/main.cpp (leading comment "
                        "lines left out); copy the example into the README")
    print(f"{'ok  ' if readme == chr(10).join(example) + chr(10) else 'FAIL'} README program = "
          f"examples/quickstart/main.cpp")

for f in failures:
    print("\n" + f)
print(f"{'FAIL' if failures else 'OK'}: {compiled} blocks compiled, {ran} run, {len(failures)} failed")
if compiled + ran == 0:
    print("FAIL: no marked block found; the markers are <!-- compile --> and <!-- run -->")
    sys.exit(1)
sys.exit(1 if failures else 0)
