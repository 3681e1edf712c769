#!/usr/bin/env python3
"""doc_outputs.py: the outputs the docs show for the allocator's example
programs are what those programs print: pinning_demo in docs/tuning.md,
pool_demo in docs/allocator.md; the tables docs/tuning.md shows for
`ccbench replay` have the columns and the memory figures ccbench prints;
and every option of ccrun or ccbench that README.md and docs/*.md write in
a command is one the program's --help lists.

In every fenced block of such a doc, a line `$ COMMAND` whose command runs
the doc's program is run (bash, from the source root, `build/` standing for
the build tree), and its stdout must be, line for line, the lines after it
up to the next `$ ` line or the block's end. Both programs run on a
simulated device of fixed size and print byte counts only, so the outputs
are exact; commands of other programs (timings, pids) are left alone, and
so is a recording (CCALLOC_TRACE: it writes a file).

ccbench replay: each `$ build/bench/ccbench replay ...` line of
docs/tuning.md shown with its output is run the same way; its table lines
(those starting with `|`) must be as many as the doc's, the header and
rule lines equal, and every cell of a row equal but those of a time column
(a header naming ns/op or ms): byte counts, ratios, call counts and OOMs
on the simulated device are exact, times are not.

Options: in every code span and fenced line of the docs whose first word
is ccrun or ccbench (any path before it), each `--word` must appear in
that program's --help (ccbench's with its switch and sleep sub-commands'
own --help), so a renamed or removed option cannot stay in the docs.

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


def is_time_column(name):
    return "ns/op" in name or re.search(r"\bms\b", name) is not None


def replay_tables(src, build, env):
    """How many of docs/tuning.md's ccbench replay tables differ in a column or a figure that is not a time."""
    doc = "docs/tuning.md"
    with open(os.path.join(src, doc), encoding="utf-8") as f:
        text = f.read()
    checked, failed, header = 0, 0, []
    for start, lines in blocks(text):
        for line_no, cmd, want in commands(lines, start):
            if not cmd.startswith("build/bench/ccbench replay") or not any(w.startswith("|") for w in want):
                continue
            run = re.sub(r"(^|[\s=])build/", lambda m: m.group(1) + build.rstrip("/") + "/", cmd)
            got = subprocess.run(["bash", "-c", run], cwd=src, env=env, capture_output=True, text=True, timeout=120)
            rows_got = [r for r in got.stdout.split("\n") if r.startswith("|")]
            rows_want = [r for r in want if r.startswith("|")]
            checked += 1
            diff = []
            if len(rows_got) != len(rows_want):
                diff.append(f"{len(rows_got)} table lines printed, {len(rows_want)} shown")
            else:
                for n, (g, w) in enumerate(zip(rows_got, rows_want)):
                    gc = [c.strip() for c in g.strip("|").split("|")]
                    wc = [c.strip() for c in w.strip("|").split("|")]
                    if n + 1 < len(rows_want) and rows_want[n + 1].startswith("|---"):
                        header = wc  # a header row: the columns of the rows after it, here and in later commands
                    if w.startswith("|---") or wc is header or len(gc) != len(wc) or len(wc) != len(header):
                        if g != w:
                            diff.append(f"printed {g}\n  shown {w}")
                        continue
                    for name, a, b in zip(header, gc, wc):
                        if a != b and not is_time_column(name):
                            diff.append(f"{wc[0]} {wc[1]}, {name}: printed {a}, shown {b}")
            if diff:
                failed += 1
                print(f"{doc}:{line_no}: `{cmd}`:\n  " + "\n  ".join(diff))
    if checked < 3:
        print(f"{doc}: only {checked} ccbench replay tables found (expected at least 3): the examples moved?")
        return 1
    print(f"{doc}: {checked} ccbench replay tables, {failed} differ in more than times")
    return failed


# program -> its --help commands, relative to the build tree
HELPS = {
    "ccrun": [["runtime/ccrun", "--help"]],
    "ccbench": [["bench/ccbench", "--help"], ["bench/ccbench", "switch", "--help"], ["bench/ccbench", "sleep", "--help"]],
}


def options_in_help(src, build):
    """How many options the docs name that their program's --help does not list."""
    helps = {}
    for prog, cmds in HELPS.items():
        text = ""
        for cmd in cmds:
            got = subprocess.run([os.path.join(build, cmd[0])] + cmd[1:], capture_output=True, text=True, timeout=60)
            text += got.stdout
        helps[prog] = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    docs = ["README.md"] + sorted("docs/" + n for n in os.listdir(os.path.join(src, "docs")) if n.endswith(".md"))
    checked, missing = 0, 0
    for doc in docs:
        with open(os.path.join(src, doc), encoding="utf-8") as f:
            text = f.read()
        fenced = {n for start, lines in blocks(text) for n in range(start, start + len(lines))}
        for n, line in enumerate(text.split("\n"), 1):
            pieces = [line.lstrip("$ ")] if n in fenced else re.findall(r"`([^`]+)`", line)
            for code in pieces:
                words = code.split()
                prog = words[0].rsplit("/", 1)[-1] if words else ""
                if prog not in helps:
                    continue
                for opt in re.findall(r"(?<![\w-])--[a-z][a-z-]*", code):
                    checked += 1
                    if opt not in helps[prog]:
                        missing += 1
                        print(f"{doc}:{n}: {prog} {opt} is not in {prog} --help: `{code.strip()}`")
    print(f"docs: {checked} ccrun/ccbench options in commands, {missing} not in --help")
    return missing if checked >= 50 else 1


def main():
    src, build = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    env.pop("CCALLOC_CONF", None)
    env.pop("CCALLOC_TRACE", None)
    failed = sum(check(src, build, doc, program, least, env) for doc, program, least in CHECKS)
    failed += replay_tables(src, build, env)
    failed += options_in_help(src, build)
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
