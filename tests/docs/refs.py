#!/usr/bin/env python3
"""tests/docs/refs.py — every file and every project name the text names exists.

- What is read: the Markdown (README.md, docs/, allocator/, runtime/,
  bench/ but not bench/results/, whose runs name the files of their day),
  the comments of C, CUDA and Python sources (Python: its docstrings too),
  and the whole of shell scripts and CMake files.
- A file: a word ending in .c .h .cu .cuh .py .sh or .cmake. With a
  folder part it must resolve from the naming file's folder, from the root,
  or as the tail of a path in the tree (core/stream.c); without one, some
  file of the tree must have that name. Not checked: headers the tree
  includes with <...> (the system's and its libraries'), names that follow
  a shell or CMake variable ($W/use.c, ${D}/x.c) or an upper-case
  placeholder folder (D/NAME.c), a member access (a->root.c), a key
  (wheel.py-api), a file named on a line that names the commit holding it
  (commit 715593e, git show 715593e:path), this file's own planted tree,
  and the names in OTHERS below, each with its reason.
- A project name: a word with a project prefix (cca_, ccai_, ccr_, cck_,
  ccb_, upper case too) in a comment or in Markdown must occur in some
  source's code or strings. A name ending in _ or followed by * is a family
  (cca_upstream_*), not checked.
- The tree: git's files where it is a checkout (tracked, and new ones not
  ignored), else every file outside build and hidden folders.
- Cost: one read of the tree, under a second.
Usage: refs.py ROOT (exit 1 with a line per name that leads nowhere);
refs.py --catches (the checker against a small tree of its own: exit 1 if
it misses a planted stale name or flags a good one).
"""
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize

# Names that are not the tree's files, and why.
OTHERS = {
    "numba/cuda/cudadrv/driver.py": "Numba's own source",
    "driver.py": "Numba's own source",
    "torch/cuda/_memory_viz.py": "PyTorch's own source",
    "torch/__init__.py": "a stand-in package a test writes",
    "splitmix64.c": "the generator's reference code at prng.di.unimi.it",
    "xoshiro256starstar.c": "the generator's reference code at prng.di.unimi.it",
    "quick_start.py": "written by the wheel check from docs/python.md's quick start",
    "env.sh": "written by scripts/gpu_carry.sh",
    ".gpudeps/env.sh": "written by scripts/gpu_carry.sh",
    "ccallocConfig.cmake": "written by the install",
    "ccallocConfigVersion.cmake": "written by the install",
    "extra.c": "a file layout_catches.py plants",
    "t.c": "a file a test writes",
    "s.c": "a file a test writes",
}
SOURCES = (".c", ".h", ".cu", ".cuh")
FILE = re.compile(r"(?<![\w/.$}{>-])((?:\.\.?/)*(?:[\w.-]+/)*[\w-]+\.(?:c|h|cu|cuh|py|sh|cmake))(?![\w(-])")
COMMIT = re.compile(r"\b(?:commit|git show) [0-9a-f]{7,40}\b")
NAME = re.compile(r"(?<![/.-])\b(?:cca|ccai|ccr|cck|ccb|CCA|CCAI|CCR|CCK|CCB)_\w+\b(?!\.[a-z])")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def tree(root):
    """Every file of the tree, relative to root: git's list (tracked and not
    ignored) in a checkout, else a walk without build folders and hidden ones."""
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, check=True).stdout.decode("utf-8", "replace")
        if listed:
            return sorted(f for f in set(listed.split("\0")) if f and os.path.isfile(os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")) and x != "__pycache__")
        rel = os.path.relpath(d, root)
        out += [os.path.normpath(os.path.join(rel, f)) for f in sorted(files)]
    return out


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def python_text(text):
    """A Python file's comments and strings (docstrings among them), each line kept in place."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING):
                out.append((tok.start[0], tok.string))
    except (tokenize.TokenError, SyntaxError):
        return [(1, text)]
    return out


def prose(path, text):
    """(line, text) pieces of a file that are prose: what names must lead somewhere."""
    if path.endswith(".md") or path.endswith((".sh", ".cmake")) or os.path.basename(path) == "CMakeLists.txt":
        return [(1, text)]
    if path.endswith(".py"):
        return python_text(text)
    return [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in COMMENT.finditer(text)]


def code(path, text):
    """A source's code and strings, comments out: where a name is defined or used."""
    if path.endswith(SOURCES):
        return COMMENT.sub(" ", text)
    if path.endswith(".md"):
        return ""
    return text


def read_files(root, files):
    checked = [f for f in files if not f.startswith(("bench/results/", "bench/traces/")) and f != "tests/docs/refs.py"
               and (f.endswith(SOURCES + (".py", ".sh", ".md", ".cmake")) or os.path.basename(f) == "CMakeLists.txt")
               and (not f.endswith(".md") or f == "README.md" or f.startswith(("docs/", "allocator/", "runtime/", "bench/")))]
    texts = {f: read(root, f) for f in checked}
    return texts


def check(root):
    files = tree(root)
    paths, names = set(files), {os.path.basename(f) for f in files}
    texts = read_files(root, files)
    system = set()
    for f, t in texts.items():
        if f.endswith(SOURCES):
            for inc in re.findall(r"#\s*include\s*<([^>]+)>", t):
                system |= {inc, os.path.basename(inc)}
    known = set()
    for f, t in texts.items():
        known |= set(NAME.findall(code(f, t)))

    def exists(ref, src):
        if ref in system or ref in OTHERS:
            return True
        if "/" not in ref:
            return ref in names
        for cand in (os.path.normpath(os.path.join(os.path.dirname(src), ref)), os.path.normpath(ref)):
            if cand in paths or os.path.isdir(os.path.join(root, cand)):
                return True
        tail = re.sub(r"^(\.\.?/)+", "", ref)
        return any(p == tail or p.endswith("/" + tail) for p in paths)

    broken = []
    for f in sorted(texts):
        for start, piece in prose(f, texts[f]):
            for n, line in enumerate(piece.split("\n"), start):
                for m in FILE.finditer("" if COMMIT.search(line) else line):
                    ref = m.group(1)
                    if re.match(r"^[A-Z]+/", ref) or exists(ref, f):
                        continue
                    broken.append("%s:%d: file %s: no such file in the tree" % (f, n, ref))
                for m in NAME.finditer(line):
                    word = m.group(0)
                    if word.endswith("_") or line[m.end():m.end() + 1] == "*" or word in known:
                        continue
                    broken.append("%s:%d: name %s: not in any source's code" % (f, n, word))
    return broken


def catches():
    """The checker on a tree of its own: each planted stale name is found, nothing good is flagged."""
    good = {
        "lib/core/stream.c": "/* ccai_stream_poll: see core/stream.c, ../lib/core/stream.c and <errno.h> */\n"
                             "#include <errno.h>\nint ccai_stream_poll(void) { return EINVAL; }\n",
        "docs/a.md": "`ccai_stream_poll` in stream.c; cca_upstream_* and ccai_ are families; a->root.c; $W/use.c\n"
                     "old.py, in commit b6e453a; `wheel.py-api = 3`; results/ccai_gone.csv; ccai_stream_polls.md\n",
        "s.sh": "cc D/NAME.c ${D}/x.c lib/core/stream.c\n",
        "t.py": '"""ccai_stream_poll in lib/core/stream.c"""\nx = 1  # driver.py is Numba\'s\n',
    }
    bad = {
        "docs/b.md": "the retry in pool.c\n",
        "lib/x.c": "/* see allocator/src/stream.c */\nint x;\n",
        "lib/y.c": "/* ccai_pool_take does it */\nint y;\n",
        "u.py": "# ../lib/gone.h\n",
        "v.cmake": "add(lib/core/gone.c)\n",
    }
    with tempfile.TemporaryDirectory() as d:
        for name, text in {**good, **bad}.items():
            os.makedirs(os.path.join(d, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        found = check(d)
    flagged = {line.split(":")[0] for line in found}
    missed, wrong = set(bad) - flagged, flagged - set(bad)
    for m in sorted(missed):
        print("refs.py missed the stale name planted in %s" % m)
    for w in sorted(wrong):
        print("refs.py flagged a good name: %s" % [x for x in found if x.startswith(w)])
    return 1 if missed or wrong or len(found) != len(bad) else 0


def main():
    if sys.argv[1:] == ["--catches"]:
        return catches()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    broken = check(os.path.abspath(root))
    for b in broken:
        print(b)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
