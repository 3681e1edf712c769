#!/usr/bin/env python3
"""tests/docs/layout_catches.py — layout.py's layer rule can fail: on a copy
of allocator/src, an include upward and a file in no layer are each named.

Usage: layout_catches.py REPO. Exit 1 naming what layout.py let pass.
"""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = sys.argv[1]
LAYOUT = os.path.join(REPO, "tests", "docs", "layout.py")
failed = []


def run_on(mutate, expect):
    with tempfile.TemporaryDirectory() as root:
        src = os.path.join(root, "allocator", "src")
        shutil.copytree(os.path.join(REPO, "allocator", "src"), src)
        mutate(src)
        out = subprocess.run([sys.executable, LAYOUT, root], capture_output=True, text=True)
        if out.returncode != 1 or expect not in out.stdout:
            failed.append(f"expected exit 1 and {expect!r}; got {out.returncode}: {out.stdout.strip()}")


def include_upward(src):  # the core reaching the invariant walk
    path = os.path.join(src, "core", "segment.c")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace('#include "block.h"', '#include "block.h"\n#include "../observe/check.h"', 1))


def no_layer(src):  # a new top-level file the layers do not place
    with open(os.path.join(src, "extra.c"), "w", encoding="utf-8") as f:
        f.write('#include "core/internal.h"\n')


def support_upward(src):  # a support file reaching the stats
    path = os.path.join(src, "support", "size.c")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write('#include "../observe/stats.h"\n' + text)


run_on(include_upward, "core/segment.c: includes observe/check.h, a higher layer")
run_on(no_layer, "extra.c: in no layer")
run_on(support_upward, "support/size.c: includes observe/stats.h, a higher layer")
for line in failed:
    print(line)
sys.exit(1 if failed else 0)
