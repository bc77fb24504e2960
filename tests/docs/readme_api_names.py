#!/usr/bin/env python3
"""Every type and function the README and the guide's API pages name in backticks exists in include/dtrain.

The pages: README.md and, next to it, docs/{getting-started,models,data,distributed,performance,inference,
troubleshooting,checkpoints}.md (the pages that document dtrain's own API).

A name is the identifier at the start of a backticked span (`DistOptimizer<Policy, Opt>` names
DistOptimizer, `save_model(path, model)` names save_model, `options.nonfinite` names nothing). Types
(CamelCase) must be declared as a class, struct, enum, alias, or be an enumerator; functions
(snake_case followed by "(") must be declared or defined somewhere under include/dtrain. Prints each name
that is missing with its page and line and exits 1 if any is.
Usage: readme_api_names.py <README.md> <include-dir>
"""
import pathlib
import re
import sys

readme, include = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
guide = ["getting-started", "models", "data", "distributed", "performance", "inference", "troubleshooting",
         "checkpoints"]
pages = [readme] + [readme.parent / "docs" / f"{name}.md" for name in guide]
headers = "\n".join(p.read_text() for p in include.rglob("*.hpp"))
# Enumerators (`StateSync::Average` is often written `Average`): the names inside enum bodies.
enumerators = set()
for body in re.findall(r"\benum\s+(?:class\s+)?\w+[^{;]*\{([^}]*)\}", headers):
    body = re.sub(r"//[^\n]*", "", body)
    enumerators.update(re.findall(r"\b([A-Z]\w*)\s*(?:=[^,]*)?(?:,|$)", body.strip()))

# Words that appear first in backticks but are not dtrain entities (std, MPI, CMake, shell, values).
ignore = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Bcast", "MPI_COMM_WORLD", "MPI_Comm", "MPI_THREAD_MULTIPLE",
          "MPI_Abort", "MPI_Comm_split_type", "Shape", "T", "Opt", "Policy", "Comm", "P", "U",
          "relu",  # `relu(nan)` is PyTorch's
          "CMakePresets", "Imported", "include", "find_package", "add_subdirectory", "project"}  # CMake
missing = []
checked = set()
lines = [(page.relative_to(readme.parent), number + 1, line) for page in pages if page.exists()
         for number, line in enumerate(page.read_text().splitlines())]
for page, number, line in lines:
    for span in re.findall(r"`([^`]+)`", line):
        m = re.match(r"(?:dtrain::)?([A-Za-z_][A-Za-z0-9_]*)(\(|<|\b)", span)
        if not m:
            continue
        name, after = m.group(1), m.group(2)
        if name in ignore or name.startswith(("std", "xt", "DTRAIN_")):
            continue
        is_type = name[0].isupper() and "_" not in name and len(name) > 1 and not name.isupper()  # not ON, PATH
        is_function = after == "(" and name[0].islower()
        if is_type:
            declared = name in enumerators or re.search(r"\b(class|struct|enum class|enum|using)\s+" + name + r"\b", headers)
        elif is_function:
            declared = re.search(r"\b" + name + r"\s*\(", headers) and re.search(
                r"[\w>&*:]\s+(\w+::)*" + name + r"\s*\(", headers)
        else:
            continue
        checked.add(name)
        if not declared:
            missing.append(f"{page}:{number}: `{span}`: no {'type' if is_type else 'function'} "
                           f"{name} under {include}")
for m in missing:
    print(m)
print(f"{'FAIL' if missing else 'OK'}: {len(checked)} names checked, {len(missing)} named in the README or the guide "
      f"not found in the headers")
sys.exit(1 if missing else 0)
