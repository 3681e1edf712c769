#!/bin/sh
# ccbench_outputs.sh — an output that would land on a file the same process
# reads or writes otherwise is refused, and that file is left as it was:
#
#   ccbench_outputs.sh CCBENCH [CCK_BENCH]
#
#   - a file of --out that is a TRACE the command reads (replay --out D
#     D/results.csv wrote the results over the trace, exit 0);
#   - a file of --out, or gen -o FILE, that is where standard output or
#     standard error goes (`replay --out D >D/results.md`: two writers at
#     two offsets of one file, exit 0);
#   - the CCALLOC_TRACE recording: a TRACE that CCALLOC_TRACE names is
#     refused before anything runs (exit 2: the replays' allocators emptied
#     it and recorded themselves into it, exit 0), and an output that is the
#     recording is refused (exit 1); one the recorder refuses (a '%' not
#     %p or %%, a directory not there) is said, as the library logs it;
#   - two outputs of one run that are one file (a symlink in --out D):
#     the later is refused, the earlier left whole;
#   - cck_bench --csv on the file standard output goes to (the table and
#     the CSV mixed, exit 0), and a --csv that cannot be opened: named with
#     the program's prefix and the reason, exit 1 (it was "PATH: REASON"
#     without "cck_bench: ", exit 2, as if the usage were bad).
# Each refusal is "ccbench: cannot write PATH: it is ..." (exit 1, the rest
# of the outputs still written) unless said otherwise. Last, a file cut
# short by a file-size limit: left as it is, exit 1 (or SIGXFSZ's death). Needs a POSIX shell,
# grep and cmp.
set -u
ccbench=$1 cck=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 n=0
# expect DESC CODE WORDS: the last command's exit status ($rc) is CODE and
# its stderr ($tmp/err) holds WORDS (fixed string)
expect() {
    n=$((n + 1))
    if [ "$rc" -eq "$2" ] && grep -qF -- "$3" "$tmp/err"; then
        echo "ok: $1"
    else
        echo "FAIL: $1: exit $rc (want $2), stderr wants '$3':"
        cat "$tmp/err"
        fails=$((fails + 1))
    fi
}
# kept DESC FILE COPY: FILE is still the bytes of COPY
kept() {
    n=$((n + 1))
    if cmp -s "$2" "$3"; then
        echo "ok: $1"
    else
        echo "FAIL: $1: $2 changed"
        head -3 "$2"
        fails=$((fails + 1))
    fi
}
run() { # run ARGS...: ccbench, stdout to $tmp/out, stderr to $tmp/err
    "$ccbench" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
fast="-s malloc --reps 1 --no-plots"

"$ccbench" gen uniform --scale 0.05 -o "$tmp/t.csv" || exit 1
mkdir "$tmp/d"
cp "$tmp/t.csv" "$tmp/d/results.csv"
run replay $fast --out "$tmp/d" "$tmp/d/results.csv"
expect "replay --out D D/results.csv: refused" 1 \
    "ccbench: cannot write $tmp/d/results.csv: it is the trace '$tmp/d/results.csv' this command reads"
kept "replay --out D D/results.csv: the trace is left whole" "$tmp/d/results.csv" "$tmp/t.csv"
n=$((n + 1))
if [ -s "$tmp/d/results.md" ] && [ -s "$tmp/d/README.md" ]; then
    echo "ok: replay --out D D/results.csv: the other files are written"
else
    echo "FAIL: replay --out D D/results.csv: results.md or README.md missing"; ls -l "$tmp/d"; fails=$((fails + 1))
fi
# the same file by another name: a hard link in the timeline directory
rm -rf "$tmp/d" && mkdir -p "$tmp/d/timeline"
ln "$tmp/t.csv" "$tmp/d/timeline/mlp__malloc.csv"
cp "$tmp/t.csv" "$tmp/t-copy.csv"
run replay $fast --scale 0.05 --out "$tmp/d" gen:mlp "$tmp/t.csv"
expect "a timeline CSV that is a hard link to a TRACE: refused" 1 \
    "ccbench: cannot write $tmp/d/timeline/mlp__malloc.csv: it is the trace '$tmp/t.csv' this command reads"
kept "a timeline CSV that is a hard link to a TRACE: the trace is left whole" "$tmp/t.csv" "$tmp/t-copy.csv"

# standard output and standard error sent to a file of --out
rm -rf "$tmp/d" && mkdir "$tmp/d"
"$ccbench" replay $fast --scale 0.05 --out "$tmp/d" gen:uniform >"$tmp/d/results.md" 2>"$tmp/err"
rc=$?
expect "replay --out D >D/results.md: refused" 1 \
    "ccbench: cannot write $tmp/d/results.md: it is the file standard output goes to"
n=$((n + 1))
if [ "$(grep -c '^| trace | strategy |' "$tmp/d/results.md")" = 1 ] && [ -s "$tmp/d/results.csv" ]; then
    echo "ok: replay --out D >D/results.md: the table once, the other files written"
else
    echo "FAIL: replay --out D >D/results.md:"; cat "$tmp/d/results.md"; fails=$((fails + 1))
fi
rm -rf "$tmp/d" && mkdir "$tmp/d"
"$ccbench" replay $fast --scale 0.05 --out "$tmp/d" gen:uniform >"$tmp/out" 2>"$tmp/d/README.md"
rc=$?
cp "$tmp/d/README.md" "$tmp/err"
expect "replay --out D 2>D/README.md: refused, said in the file stderr goes to" 1 \
    "ccbench: cannot write $tmp/d/README.md: it is the file standard error goes to"
"$ccbench" gen uniform --scale 0.05 -o "$tmp/g.csv" >"$tmp/g.csv" 2>"$tmp/err"
rc=$?
expect "gen -o FILE >FILE: refused" 1 "ccbench: cannot write $tmp/g.csv: it is the file standard output goes to"

# CCALLOC_TRACE: a TRACE read, refused before anything runs; an output
"$ccbench" gen uniform --scale 0.05 -o "$tmp/t2.csv" || exit 1
cp "$tmp/t2.csv" "$tmp/rec.csv"
CCALLOC_TRACE="$tmp/rec.csv" "$ccbench" replay -s ccalloc --reps 1 "$tmp/rec.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "CCALLOC_TRACE on the TRACE replayed: refused, exit 2" 2 \
    "ccbench: CCALLOC_TRACE '$tmp/rec.csv' is the trace '$tmp/rec.csv': recording the replays would write over it"
kept "CCALLOC_TRACE on the TRACE replayed: the trace is left whole" "$tmp/rec.csv" "$tmp/t2.csv"
n=$((n + 1))
if grep -q '^  replay\|FAILED' "$tmp/err" || [ -s "$tmp/out" ]; then
    echo "FAIL: CCALLOC_TRACE on the TRACE replayed: something ran"; cat "$tmp/out" "$tmp/err"; fails=$((fails + 1))
else
    echo "ok: CCALLOC_TRACE on the TRACE replayed: nothing ran"
fi
ln -s rec.csv "$tmp/rec-link.csv"
CCALLOC_TRACE="$tmp/rec-link.csv" "$ccbench" --all --quick --no-plots -s ccalloc --live 10 --pairs 10 \
    --out "$tmp/all" "$tmp/rec.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "--all: CCALLOC_TRACE on a TRACE by a symlink: refused, exit 2" 2 \
    "ccbench: CCALLOC_TRACE '$tmp/rec-link.csv' is the trace '$tmp/rec.csv'"
kept "--all: CCALLOC_TRACE on a TRACE by a symlink: the trace is left whole" "$tmp/rec.csv" "$tmp/t2.csv"
rm -rf "$tmp/d" && mkdir "$tmp/d"
CCALLOC_TRACE="$tmp/d/micro.csv" "$ccbench" micro -s ccalloc --live 10 --pairs 10 --out "$tmp/d" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "micro --out D with CCALLOC_TRACE=D/micro.csv: refused" 1 \
    "ccbench: cannot write $tmp/d/micro.csv: it is the CCALLOC_TRACE recording"
n=$((n + 1))
if head -1 "$tmp/d/micro.csv" | grep -q '^# ccalloc trace' && ! grep -q '^live' "$tmp/d/micro.csv"; then
    echo "ok: micro --out D with CCALLOC_TRACE=D/micro.csv: the recording is left whole"
else
    echo "FAIL: micro --out D with CCALLOC_TRACE=D/micro.csv: the recording was written over"
    head -3 "$tmp/d/micro.csv"; fails=$((fails + 1))
fi

# a file cut short by a file-size limit (SIGXFSZ ignored; sh's ulimit -f
# counts 512-byte blocks) is left as it is, and the exit status says so;
# at SIGXFSZ's default the kernel kills ccbench (docs/benchmarks.md)
(trap '' XFSZ && ulimit -f 2 && exec "$ccbench" gen uniform --scale 0.05 -o "$tmp/cut.csv") 2>"$tmp/err"
rc=$?
expect "gen -o FILE past the file-size limit: exit 1, File too large" 1 "ccbench: cannot write $tmp/cut.csv: File too large"
n=$((n + 1))
if [ "$(wc -c <"$tmp/cut.csv")" -eq 1024 ] && head -c 1024 "$tmp/t.csv" | cmp -s - "$tmp/cut.csv"; then
    echo "ok: gen -o FILE past the file-size limit: the prefix that fits is left"
else
    echo "FAIL: gen -o FILE past the file-size limit: $(wc -c <"$tmp/cut.csv") bytes, want the first 1024"
    fails=$((fails + 1))
fi
(ulimit -f 2 && exec "$ccbench" gen uniform --scale 0.05 -o "$tmp/cut.csv") 2>/dev/null
rc=$?
n=$((n + 1))
if [ "$rc" -eq 153 ]; then
    echo "ok: gen -o FILE past the file-size limit, SIGXFSZ at its default: killed (153)"
else
    echo "FAIL: gen -o FILE past the file-size limit, SIGXFSZ at its default: exit $rc, want 153"
    fails=$((fails + 1))
fi

# two outputs of one run on one file (a symlink left in --out D): the later
# one is refused and the earlier left whole (micro.csv was written, then
# micro.md emptied it and wrote the table there, exit 0)
mkdir "$tmp/two"
ln -s micro.csv "$tmp/two/micro.md"
run micro -s malloc --live 10 --pairs 10 --out "$tmp/two"
expect "two outputs on one file: the later refused, exit 1" 1 \
    "ccbench: cannot write $tmp/two/micro.md: it is '$tmp/two/micro.csv', which this command wrote (refused: one would overwrite the other)"
n=$((n + 1))
if head -1 "$tmp/two/micro.csv" | grep -q '^strategy,live,'; then
    echo "ok: two outputs on one file: the earlier left whole"
else
    echo "FAIL: two outputs on one file: micro.csv is not the CSV"; head -2 "$tmp/two/micro.csv"; fails=$((fails + 1))
fi

# a CCALLOC_TRACE the recorder refuses (a '%' at the end, a directory not
# there): nothing is recorded, and the library's line says why (ccbench
# silences the library's other lines: it ran, exit 0, and said nothing)
CCALLOC_TRACE="$tmp/rec%" "$ccbench" replay -s ccalloc --reps 1 --no-plots "$tmp/t.csv" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "CCALLOC_TRACE ending in '%': the refusal said, the run goes on" 0 \
    "ccalloc: CCALLOC_TRACE: not tracing: a '%' other than %p (the process id) or %% (one '%') in the path: '$tmp/rec%'"
CCALLOC_TRACE="$tmp/no/rec.csv" "$ccbench" micro -s ccalloc --live 10 --pairs 10 >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "CCALLOC_TRACE in a directory not there: the refusal said, the run goes on" 0 \
    "ccalloc: CCALLOC_TRACE: not tracing: cannot open for writing (No such file or directory): '$tmp/no/rec.csv'"

if [ -n "$cck" ]; then
    "$cck" --no-cpu --reps 1 --csv "$tmp/k.csv" >"$tmp/k.csv" 2>"$tmp/err"
    rc=$?
    expect "cck_bench --csv FILE >FILE: refused, exit 1" 1 \
        "cck_bench: cannot write $tmp/k.csv: it is the file standard output goes to"
    n=$((n + 1))
    if grep -q '^device,' "$tmp/k.csv"; then
        echo "FAIL: cck_bench --csv FILE >FILE: the CSV was written there"; fails=$((fails + 1))
    else
        echo "ok: cck_bench --csv FILE >FILE: nothing timed, no CSV in the table's file"
    fi
    "$cck" --no-cpu --reps 1 --csv "$tmp" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    expect "cck_bench --csv DIRECTORY: named with the reason, exit 1" 1 "cck_bench: cannot write $tmp: Is a directory"
    "$cck" --no-cpu --reps 1 --csv "$tmp/no/k.csv" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    expect "cck_bench --csv in a missing directory: named with the reason, exit 1" 1 \
        "cck_bench: cannot write $tmp/no/k.csv: No such file or directory"
fi
echo "$((n - fails)) of $n output checks passed"
[ "$fails" -eq 0 ]
