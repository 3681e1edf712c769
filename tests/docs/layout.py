#!/usr/bin/env python3
"""tests/docs/layout.py — allocator/src/README.md's rules of the layout, checked.

- upstream/: every .c includes no project header but upstream.h (cuda.c
  and cudart.c also cudart.h, the CUDA runtime's table), and no file there
  (nor a support header upstream.h or cudart.h reaches) names an allocator
  type (cca_allocator, ccai_block, ccai_segment, cca_domain).
- core/: no code (comments and strings stripped) reads or sets the
  expandable flag of the allocator or a segment (->expandable): the core
  asks a->kind (the pages kind sets the flag for the reports).
- core/free_index.c, free_index_v1.c and live_map.c include only their own
  header: an index never sees the allocator.
- The layers (allocator/src/README.md, "The layers"): a file includes
  only files of its own layer or below; every source file is in one.
- allocator/src/README.md names every source file of allocator/src; its
  reading table's counts are the files' line counts, and the route (core/
  with the free index's version 1, plus classic) is at most 2,500 lines.
Usage: layout.py REPO. Exit 1 with one line per broken rule.
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
SRC = os.path.join(ROOT, "allocator", "src")
broken = []


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def code_of(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def project_includes(text):
    return re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.M)


ALLOCATOR_TYPES = re.compile(r"\b(cca_allocator|ccai_block|ccai_segment|cca_domain)\b")


def headers_reached(start):
    seen, todo = set(), [os.path.normpath(start)]
    while todo:
        path = todo.pop()
        if path in seen or not os.path.exists(path):
            continue
        seen.add(path)
        for inc in project_includes(read(path)):
            todo.append(os.path.normpath(os.path.join(os.path.dirname(path), inc)))
    return seen


up = os.path.join(SRC, "upstream")
for name in sorted(os.listdir(up)):
    path = os.path.join(up, name)
    text = read(path)
    if name.endswith(".c"):
        allowed = ("upstream.h", "cudart.h") if name in ("cuda.c", "cudart.c") else ("upstream.h",)
        others = [i for i in project_includes(text) if i not in allowed]
        if others:
            broken.append(f"upstream/{name}: includes {', '.join(others)}: an upstream file includes upstream.h only "
                          "(the CUDA upstream's also cudart.h)")
    found = ALLOCATOR_TYPES.search(code_of(text))
    if found:
        broken.append(f"upstream/{name}: names the allocator type {found.group(1)}")
for path in sorted(headers_reached(os.path.join(up, "upstream.h")) | headers_reached(os.path.join(up, "cudart.h"))):
    found = ALLOCATOR_TYPES.search(code_of(read(path)))
    if found:
        broken.append(f"{os.path.relpath(path, SRC)}: reached from upstream.h, names {found.group(1)}")

core = os.path.join(SRC, "core")
for name in sorted(os.listdir(core)):
    code = code_of(read(os.path.join(core, name)))
    for line in code.splitlines():
        if re.search(r"->expandable\b", line):
            broken.append(f"core/{name}: reads the expandable flag ({line.strip()}): ask a->kind")

for name, own in (("free_index.c", "free_index.h"), ("free_index_v1.c", "free_index_v1.h"), ("live_map.c", "live_map.h")):
    incs = project_includes(read(os.path.join(core, name)))
    if incs != [own]:
        broken.append(f"core/{name}: includes {incs}, not its own header {own} alone")

# The layers, bottom first: folders, or the stem of a file at src/'s top.
LAYERS = [("support/",), ("upstream/",), ("core/",), ("kinds/", "policies/"), ("domain_set",), ("sleep",),
          ("observe/",), ("alloc", "trim", "domain"), ("allocator",), ("plug",)]


def layer_of(rel):
    key = rel.split("/")[0] + "/" if "/" in rel else os.path.splitext(rel)[0]
    for k, names in enumerate(LAYERS):
        if key in names:
            return k
    return None


for folder, _, files in os.walk(SRC):
    for name in sorted(files):
        if not name.endswith((".c", ".h")):
            continue
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, SRC)
        mine = layer_of(rel)
        if mine is None:
            broken.append(f"{rel}: in no layer (tests/docs/layout.py, LAYERS)")
            continue
        for inc in project_includes(read(path)):
            target = os.path.normpath(os.path.join(folder, inc))
            if not os.path.exists(target):  # the build's include folder: src/core
                target = os.path.normpath(os.path.join(SRC, "core", inc))
            if not os.path.exists(target) or not target.startswith(SRC + os.sep):
                continue  # the public header, common/, the system's
            theirs = layer_of(os.path.relpath(target, SRC))
            if theirs is not None and theirs > mine:
                broken.append(f"{rel}: includes {os.path.relpath(target, SRC)}, a higher layer")

readme = read(os.path.join(SRC, "README.md"))
for folder, _, files in os.walk(SRC):
    for name in files:
        if name.endswith((".c", ".h")) and name not in readme:
            broken.append(f"allocator/src/README.md does not name {os.path.relpath(os.path.join(folder, name), SRC)}")

# The reading table: every numbered row's count is its files' wc -l, and the
# route (the rows before the "the route" row) sums to its stated total, at
# most ROUTE_MAX lines (issue 40: core/ with index v1, plus one kind).
ROUTE_MAX = 2500
route_total, in_route, stated = 0, True, None
for row in re.findall(r"^\| *(\d*) *\| *(.+?) *\| *\**([\d,+ ]+?)\** *\|", readme, flags=re.M):
    number, files, counts = row
    if not number:
        if "the route" in files:
            stated, in_route = int(counts.replace(",", "")), False
        continue
    names = re.findall(r"`([^`]+)`", files)
    parts = [int(c.replace(",", "")) for c in counts.split("+")]
    if len(names) != len(parts):
        continue  # a row that names more files than counts
    folder = os.path.dirname(names[0])
    for name, count in zip(names, parts):
        path = name if "/" in name else os.path.join(folder, name)
        if name.startswith("."):  # ".c": the same stem as the name before it
            path = os.path.splitext(prev)[0] + name
        full = os.path.join(SRC, path)
        prev = path
        if not os.path.exists(full):
            broken.append(f"allocator/src/README.md: row {number} names {path}, which does not exist")
            continue
        if os.path.isdir(full):  # a folder's row: all its files
            lines = sum(read(os.path.join(full, f)).count("\n") for f in os.listdir(full))
        else:
            lines = read(full).count("\n")
        if lines != count:
            broken.append(f"allocator/src/README.md: row {number} says {path} has {count} lines; it has {lines}")
        if in_route:
            route_total += lines
if stated is None:
    broken.append("allocator/src/README.md: no \"the route\" row")
elif stated != route_total or route_total > ROUTE_MAX:
    broken.append(f"allocator/src/README.md: the route is {route_total} lines (stated {stated}; at most {ROUTE_MAX})")

for line in broken:
    print(line)
print(f"layout: {len(broken)} broken rule(s)" if broken else "layout: every rule holds")
sys.exit(1 if broken else 0)
