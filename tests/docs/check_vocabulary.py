#!/usr/bin/env python3
"""The repository speaks of dtrain only: no labels of how the work was organised, no tracker numbers, no
names of internal tools, no course-material wording and no machine paths, in any tracked file's name or text.

Each rule is a regular expression aimed at the unwanted use only, so the same word in its ordinary sense
passes ("stop" as a verb, "copy assignment", "Catch::Session", an upstream reference such as
"pmodels/mpich#6083" or "UCX issue 8738"). Sources of documents are cited by their titles (README.md,
"References").

KNOWN lists hits that are known and not yet reworded, as "path: rule"; each must still occur (so the list
only shrinks) and nothing else may. Keep it empty when you can.

Usage: check_vocabulary.py <repository root>
(scans the files git tracks or would track, or every file outside build* when git is absent)
Exits 1 listing every hit (file:line: rule: text), and every KNOWN entry that no longer occurs.
"""
import pathlib
import re
import subprocess
import sys

RULES = {
    "work-round label": re.compile(r"\bstop[ -]?[0-9]{2,}\b", re.I),
    "work session": re.compile(r"\b(this|previous|earlier|first|second|third|fourth|fifth|sixth|seventh|eighth|"
                               r"ninth|tenth) session\b|\bsession (before|after)\b|\bwork rounds?\b", re.I),
    "tracker number": re.compile(r"(?<![\w/])(?<!UCX )(?<!MPICH )(?<!Open MPI )\bissues? #?[0-9]+\b"
                                 r"|(?<![\w/&$])#[0-9]+(?=[ )\],;]|$)", re.I),
    "internal tool": re.compile(r"`duplicates\b|\bduplicates --|farm-studio|`issues\b|\bissues (list|show|new)\b"),
    "course wording": re.compile(r"\bassignment's\b|\b(Go|Needle|course) report\b|\bthe report's\b", re.I),
    "machine path": re.compile(r"(?<![\w.])/(work|root)/"),
}
# The rules' own text, and the list below, are not hits.
SELF = {"tests/docs/check_vocabulary.py"}
KNOWN = set()


def tracked(root):
    try:
        def ls(*flags):
            out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *flags], capture_output=True,
                                 check=True).stdout
            return {p for p in out.decode().split("\0") if p and (root / p).is_file()}
        # Tracked files, and new files inside folders (a renamed results folder before it is committed); not
        # the logs a test run leaves at the top.
        return sorted(ls("--cached") | {p for p in ls("--others", "--exclude-standard") if "/" in p})
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".git" not in p.parts
                and not p.parts[len(root.parts)].startswith("build")]


root = pathlib.Path(sys.argv[1]).resolve()
hits, seen = [], set()
files = tracked(root)
for rel in files:
    if rel in SELF:
        continue
    for rule, rx in RULES.items():
        if rule in ("work-round label", "work session", "tracker number") and rx.search(rel):
            hits.append((rel, rule, f"{rel}: {rule} in the path"))
    path = root / rel
    try:
        text = path.read_text(errors="strict")
    except (UnicodeDecodeError, OSError):
        continue  # binary (images) or missing
    for number, line in enumerate(text.splitlines(), 1):
        for rule, rx in RULES.items():
            m = rx.search(line)
            if m:
                hits.append((rel, rule, f"{rel}:{number}: {rule}: {line.strip()[:160]}"))

new = [h for h in hits if f"{h[0]}: {h[1]}" not in KNOWN]
for rel, rule, _ in hits:
    seen.add(f"{rel}: {rule}")
stale = sorted(KNOWN - seen)
for _, _, text in new:
    print(text)
for entry in stale:
    print(f"KNOWN entry no longer occurs, remove it from {sorted(SELF)[0]}: {entry}")
known_left = len(seen & KNOWN)
print(f"{'FAIL' if new or stale else 'OK'}: {len(files)} files, {len(new)} hits, {known_left} known entries "
      f"left to reword")
sys.exit(1 if new or stale else 0)
