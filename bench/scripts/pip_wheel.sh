#!/usr/bin/env bash
# pip_wheel.sh OUT — how big the Python wheel is and how long building and
# installing it take (docs/python.md, "Install, and where the library comes
# from"; bench/results/2026-11-29-pip-wheel). Writes OUT/results.md.
#
# From a clean copy of this checkout (the files git tracks and the untracked
# ones it does not ignore, as tests/python/test_install.py copies them):
#   1. pip wheel --no-build-isolation (scikit-build-core installed, as
#      scripts/deps.sh does): RUNS runs, each in a fresh copy;
#   2. the one command, pip install ./allocator/python, in a fresh venv with
#      pip's build isolation (scikit-build-core fetched from PyPI, from pip's
#      cache after the warm-up): RUNS_ISOLATED runs;
#   3. pip install --no-index of the wheel into a fresh venv: RUNS runs;
#   4. the quick start of docs/python.md, run in that venv from /tmp: RUNS runs.
# Each step has one warm-up run first, not counted. Medians, min and max of
# wall-clock seconds (date +%s.%N around the command alone).
set -euo pipefail
out=${1:?usage: pip_wheel.sh OUT}
RUNS=${RUNS:-5}
RUNS_ISOLATED=${RUNS_ISOLATED:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1 CMAKE_BUILD_PARALLEL_LEVEL=2
unset CCALLOC_LIBRARY CCALLOC_CUDART PYTHONPATH

copy() { # copy DEST: the checkout as a clone has it
  mkdir -p "$1"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
     while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | xargs -0 cp --parents -t "$1")
}
now() { date +%s.%N; }
# stats NAME T1 T2 ...: "runs | median | min | max" of the counted times
stats() {
  python3 -c 'import statistics, sys; t = sorted(float(x) for x in sys.argv[1:]);
print(f"{len(t)} | {statistics.median(t):.2f} | {t[0]:.2f} | {t[-1]:.2f}")' "$@"
}
quick_start() { # the first python block under "## Quick start"
  python3 - "$root/docs/python.md" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
section = text[text.index("\n## Quick start"):]
section = section[:section.index("\n## ", 1)]
sys.stdout.write(re.search(r"```python\n(.*?)```", section, re.S).group(1))
EOF
}

echo "pip_wheel: 1/4 pip wheel --no-build-isolation" >&2
build=()
for i in $(seq 0 "$RUNS"); do
  d=$work/build$i; copy "$d/src"
  t0=$(now)
  python3 -m pip wheel -q --no-build-isolation --no-deps --no-index -w "$d/dist" "$d/src/allocator/python" >"$d/log" 2>&1
  t1=$(now)
  ((i == 0)) || build+=("$(echo "$t1 - $t0" | bc)")
done
wheel=$(ls "$work"/build0/dist/ccalloc-*.whl)
cp "$wheel" "$work/"
wheel=$work/$(basename "$wheel")
lib_bytes=$(unzip -p "$wheel" ccalloc/lib/libccalloc.so | wc -c)

echo "pip_wheel: 2/4 pip install ./allocator/python (build isolation)" >&2
isolated=()
for i in $(seq 0 "$RUNS_ISOLATED"); do
  d=$work/iso$i; copy "$d/src"; python3 -m venv "$d/venv"
  t0=$(now)
  "$d/venv/bin/pip" install -q "$d/src/allocator/python" >"$d/log" 2>&1
  t1=$(now)
  ((i == 0)) || isolated+=("$(echo "$t1 - $t0" | bc)")
done

echo "pip_wheel: 3/4 pip install of the wheel" >&2
install=()
for i in $(seq 0 "$RUNS"); do
  d=$work/inst$i; python3 -m venv "$d/venv"
  t0=$(now)
  "$d/venv/bin/pip" install -q --no-index --no-deps "$wheel" >"$d/log" 2>&1
  t1=$(now)
  ((i == 0)) || install+=("$(echo "$t1 - $t0" | bc)")
done

echo "pip_wheel: 4/4 the quick start" >&2
quick_start >"$work/quick_start.py"
run=()
for i in $(seq 0 "$RUNS"); do
  t0=$(now)
  (cd /tmp && "$work/inst0/venv/bin/python" "$work/quick_start.py" >"$work/quick_start.out")
  t1=$(now)
  ((i == 0)) || run+=("$(echo "$t1 - $t0" | bc)")
done

{
  echo "# The Python wheel: size and times"
  echo
  echo "Machine: $(nproc) cores, $(python3 --version), pip $(python3 -m pip --version | cut -d' ' -f2), cmake $(cmake --version | sed -n '1s/.* //p'), $(cc --version | head -1). Source: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ' with uncommitted changes'). Made by bench/scripts/pip_wheel.sh."
  echo
  echo "| file | bytes |"
  echo "|---|--:|"
  echo "| $(basename "$wheel") | $(stat -c %s "$wheel") |"
  echo "| ccalloc/lib/libccalloc.so, unpacked | $lib_bytes |"
  echo
  echo "| step | command | runs | median s | min s | max s |"
  echo "|---|---|--:|--:|--:|--:|"
  echo "| build the wheel (build tools installed) | \`pip wheel --no-build-isolation --no-deps --no-index ./allocator/python\` | $(stats "${build[@]}") |"
  echo "| the one command, in a fresh venv | \`pip install ./allocator/python\` | $(stats "${isolated[@]}") |"
  echo "| install the wheel into a fresh venv | \`pip install --no-index --no-deps ccalloc-*.whl\` | $(stats "${install[@]}") |"
  echo "| the quick start, from /tmp | \`python quick_start.py\` | $(stats "${run[@]}") |"
  echo
  echo "The quick start printed:"
  echo
  echo '```'
  cat "$work/quick_start.out"
  echo '```'
} >"$out/results.md"
cat "$out/results.md"
