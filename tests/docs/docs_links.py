#!/usr/bin/env python3
"""docs_links.py [ROOT] — every relative link of the project's Markdown
(README.md, docs/, allocator/, bench/results/) leads somewhere: the file
exists, and an anchor (#section) names a heading of the Markdown file it
points into, slugged as GitHub does (lower case; characters other than
letters, digits, '-', '_' and spaces dropped; spaces become '-'; a repeated
heading gets -1, -2, ...). Links inside fenced code blocks and inline code
are not links. Every run folder of bench/results is linked from the index,
bench/results/README.md, no rows-from block quotes a run the index marks
wholly superseded, and README.md's Layout block names every
top-level folder and every docs/*.md. Absolute URLs (http:, mailto:, ...) are not checked: this
machine may have no network. Prints each broken link; exit 1 if any.
Standard library only."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`+[^`\n]*`+")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def markdown_files():
    yield os.path.join(ROOT, "README.md")
    for top in ("docs", "allocator", "bench/results", "bench/traces", "runtime"):
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            for f in files:
                if f.endswith(".md"):
                    yield os.path.join(d, f)


def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, out = {}, set()
        text = FENCE.sub("", open(path, encoding="utf-8", errors="replace").read())
        for line in text.splitlines():
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(CODE.sub(lambda c: c.group(0).strip("`"), m.group(1)))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        _anchors[path] = out
    return _anchors[path]


def quotes_of_superseded_runs(index):
    """A doc's <!-- rows-from: bench/results/RUN/... --> block must not quote a
    run the index marks wholly superseded: its last cell ("superseded by")
    starts with the link to the newer run. A cell that starts with words
    ("in part, [...]", "its p99, by [...]") supersedes part of it, which docs
    may still quote. Returns the number of such quotes, each printed."""
    last_cell = {}
    for line in index.splitlines():
        m = re.match(r"\| \[([^\]]+)\]\(", line)
        if m:
            last_cell[m.group(1)] = line.strip().strip("|").split("|")[-1].strip()
    bad = 0
    for f in markdown_files():
        if not os.path.exists(f) or not f.endswith(".md"):
            continue
        for n, line in enumerate(open(f, encoding="utf-8", errors="replace"), 1):
            for run in re.findall(r"<!-- rows-from: bench/results/([^/\s]+)/", line):
                if last_cell.get(run, "").startswith("["):
                    print(f"{os.path.relpath(f, ROOT)}:{n}: quotes {run}, which the index marks superseded by "
                          f"{last_cell[run]}")
                    bad += 1
    return bad


def main():
    bad = links = 0
    for f in markdown_files():
        if not os.path.exists(f):
            continue
        text = CODE.sub("", FENCE.sub("", open(f, encoding="utf-8", errors="replace").read()))
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            rel = os.path.relpath(f, ROOT)
            if not os.path.exists(dest):
                print(f"{rel}: '{target}': no such file")
                bad += 1
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                print(f"{rel}: '{target}': no heading '{anchor}' in {os.path.relpath(dest, ROOT)}")
                bad += 1
    results = os.path.join(ROOT, "bench", "results")
    if os.path.isdir(results):
        index = open(os.path.join(results, "README.md"), encoding="utf-8").read()
        for run in sorted(os.listdir(results)):
            if os.path.isdir(os.path.join(results, run)) and f"]({run}/README.md)" not in index:
                print(f"bench/results/README.md: no row for the run {run}")
                bad += 1
        bad += quotes_of_superseded_runs(index)
    # README.md's Layout block names every top-level folder and every doc
    layout = re.search(r"^## Layout\n+```\n(.*?)^```", open(os.path.join(ROOT, "README.md"), encoding="utf-8").read(),
                       re.S | re.M)
    block = layout.group(1) if layout else ""
    tops = [d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d)) and not d.startswith((".", "build"))]
    docs = [d for d in os.listdir(os.path.join(ROOT, "docs")) if d.endswith(".md")]
    for d in sorted(tops):
        if not re.search(rf"^{re.escape(d)}/", block, re.M):
            print(f"README.md: the Layout block has no line for the folder {d}/")
            bad += 1
    for d in sorted(docs):
        if not re.search(rf"(^|[\s/]){re.escape(d)}\b", block):
            print(f"README.md: the Layout block does not name docs/{d}")
            bad += 1
    print(f"{links} relative links, {bad} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
