#!/usr/bin/env python3
"""results_scripts.py [ROOT] — every table that a results folder's own
Python script made is what that script makes today from the committed data.

- Reads the fenced code blocks of bench/results/*/README.md for lines
  `python3 SCRIPT ARGS`, SCRIPT a .py file of bench/results (a comment after
  `#` is dropped). A SCRIPT written from the repository root
  (bench/results/...) runs there; any other runs in the README's folder.
- `... > OUT`: the output must equal OUT byte for byte.
- No `>`: the README's section whose heading quotes the command (e.g.
  "## The tables (`python3 summary.py pages whole-maps`)") is what the
  script printed: every table row of that section must be a line of the
  output. A command with neither an OUT nor such a section is an error.
- Fails when no command is found at all, so a parser that sees nothing
  cannot pass. Prints each difference; exit 1 if any. Standard library only.
"""
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def commands(readme):
    for block in FENCE.findall(open(readme, encoding="utf-8").read()):
        for line in block.splitlines():
            line = line.split("#", 1)[0].strip()
            words = shlex.split(line) if line.startswith("python3 ") else []
            if len(words) >= 2 and words[1].endswith(".py"):
                yield line, words[1:]


def section_rows(readme, command):
    """The table rows of the section whose heading quotes `command`."""
    text = open(readme, encoding="utf-8").read()
    m = re.search(r"^(#+) [^\n]*`" + re.escape(command) + r"`[^\n]*$", text, re.M)
    if not m:
        return None
    rest = text[m.end():]
    end = re.search(r"^#{1,%d} " % len(m.group(1)), rest, re.M)
    return [l for l in (rest[:end.start()] if end else rest).splitlines() if l.startswith("|")]


def main():
    failures, checked = [], 0
    for readme in sorted(glob.glob(os.path.join(ROOT, "bench/results/*/README.md"))):
        folder = os.path.dirname(readme)
        for line, words in commands(readme):
            out = None
            if ">" in words:
                at = words.index(">")
                words, out = words[:at], words[at + 1]
            cwd = ROOT if words[0].startswith("bench/results/") else folder
            where = os.path.relpath(readme, ROOT)
            run = subprocess.run([sys.executable] + words, cwd=cwd, capture_output=True, text=True)
            if run.returncode != 0:
                failures.append(f"{where}: `{line}` exits {run.returncode}: {run.stderr.strip()[-300:]}")
                continue
            checked += 1
            if out is not None:
                want = open(os.path.join(cwd, out), encoding="utf-8").read()
                if run.stdout != want:
                    diff = difflib.unified_diff(want.splitlines(), run.stdout.splitlines(), out, "today", lineterm="")
                    failures.append(f"{where}: `{line}` no longer makes {out}:\n" + "\n".join(list(diff)[:20]))
                continue
            rows = section_rows(readme, "python3 " + " ".join(words))
            if rows is None:
                failures.append(f"{where}: `{line}` writes no file and no section's heading quotes it")
                continue
            printed = set(run.stdout.splitlines())
            missing = [r for r in rows if r not in printed]
            if not rows or missing:
                failures.append(f"{where}: `{line}`: {len(missing)} of {len(rows)} rows of its section are not "
                                f"what it prints, e.g.\n  " + "\n  ".join(missing[:5]))
    if checked == 0:
        failures.append("no `python3 SCRIPT` command found in bench/results/*/README.md")
    for f in failures:
        print(f"FAIL: {f}")
    print(f"{checked} results-script commands run, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
