#!/usr/bin/env python3
"""doc_outputs.py: the outputs the docs show for the allocator's example
programs are what those programs print: pinning_demo in docs/tuning.md,
pool_demo in docs/allocator.md.

In every fenced block of such a doc, a line `$ COMMAND` whose command runs
the doc's program is run (bash, from the source root, `build/` standing for
the build tree), and its stdout must be, line for line, the lines after it
up to the next `$ ` line or the block's end. Both programs run on a
simulated device of fixed size and print byte counts only, so the outputs
are exact; commands of other programs (timings, pids) are left alone, and
so is a recording (CCALLOC_TRACE: it writes a file).

  doc_outputs.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import subprocess
import sys

# (doc, program, the fewest commands of that program the doc must show)
CHECKS = [
    ("docs/tuning.md", "build/allocator/pinning_demo", 8),
    ("docs/allocator.md", "build/allocator/pool_demo", 1),
]


def blocks(text):
    """The fenced blocks of a Markdown text: (first line number, lines)."""
    out, cur, start = [], None, 0
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            if cur is None:
                cur, start = [], n + 1
            else:
                out.append((start, cur))
                cur = None
        elif cur is not None:
            cur.append(line)
    return out


def commands(lines, start):
    """(line number, command, expected output lines) of each `$ ` line."""
    found = []
    for i, line in enumerate(lines):
        if not line.startswith("$ "):
            continue
        want = []
        for later in lines[i + 1:]:
            if later.startswith("$ "):
                break
            want.append(later)
        found.append((start + i, line[2:], want))
    return found


def check(src, build, doc, program, least, env):
    """How many of the doc's commands of `program` differ (1 when fewer than `least` are shown)."""
    with open(os.path.join(src, doc), encoding="utf-8") as f:
        text = f.read()
    checked, failed = 0, 0
    for start, lines in blocks(text):
        for line_no, cmd, want in commands(lines, start):
            if program not in cmd or "CCALLOC_TRACE" in cmd:  # a recording writes a file: not run
                continue
            run = re.sub(r"(^|[\s=])build/", lambda m: m.group(1) + build.rstrip("/") + "/", cmd)
            got = subprocess.run(["bash", "-c", run], cwd=src, env=env, capture_output=True, text=True, timeout=60)
            got_lines = got.stdout.rstrip("\n").split("\n")
            checked += 1
            if got_lines != want:
                failed += 1
                print(f"{doc}:{line_no}: `{cmd}` printed\n" + "\n".join(got_lines) + "\nthe doc shows\n" + "\n".join(want))
    name = os.path.basename(program)
    if checked < least:
        print(f"{doc}: only {checked} {name} commands found (expected at least {least}): the examples moved?")
        return 1
    print(f"{doc}: {checked} {name} commands, {failed} differ")
    return failed


def main():
    src, build = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    env.pop("CCALLOC_CONF", None)
    env.pop("CCALLOC_TRACE", None)
    failed = sum(check(src, build, doc, program, least, env) for doc, program, least in CHECKS)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
