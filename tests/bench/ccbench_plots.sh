#!/bin/sh
# ccbench_plots.sh — the replay's per-trace files, end to end:
#
#   ccbench_plots.sh CCBENCH WORKDIR
#
# The same strategy named twice gets two timeline CSVs (the second with -2),
# not one overwritten; with an output directory whose path has spaces, the
# timeline plot is still drawn (gnuplot is given the CSVs by names relative
# to the directory it runs in: its word list splits at spaces). The plot is
# checked only where gnuplot is installed. A trace whose name has a space is
# one word in ratios.dat (every row as many fields as the header), and one
# whose name starts with '#' keeps its row (gnuplot skips a line starting
# with '#': the trace's ratios were gone from ratios.png).
#
# Long --out paths are used whole: every file lands under its own name in the
# directory (a 1013-byte --out wrote "ratios.da", a 1215-byte one made a stray
# directory named by a cut path beside it); a path past PATH_MAX is an output
# failure (exit 1, "path too long"), no file or directory made under a cut
# name. Names from trace files reach stderr, stdout and the markdown escaped
# (ESC as \x1b, a newline as \x0a): a file name, a name told apart from
# another (t-2), an op field quoted in an error. Standard output closed
# (>&-): the table is refused (exit 1, Bad file descriptor) and never lands
# in an output file that took its descriptor.
# The per-domain table sums what each strategy returned at a domain's
# releases.
# A plot gnuplot could not write whole is not kept: under a file-size limit
# (RLIMIT_FSIZE, SIGXFSZ ignored) that every CSV and markdown file fits but
# no PNG does, each plot is an output failure (exit 1, the PNG named, "cut
# short"), no PNG is left and README.md links none (gnuplot exited 0 with
# each PNG cut at the limit, and ccbench exited 0 linking both); a plot
# whose gnuplot fails (a script that writes its output, then stops with an
# error) leaves no file behind and no link either (a 0-byte ratios.png was
# linked when descriptors ran out).
set -u
ccbench=$1 work=$2
out="$work/out dir with spaces"
rm -rf "$work" && mkdir -p "$work" || exit 1
"$ccbench" gen uniform --scale 0.02 -o "$work/my trace.csv" || exit 1
cp "$work/my trace.csv" "$work/#x.csv"
"$ccbench" replay -s ccalloc-growth -s ccalloc-growth -s malloc --reps 1 --scale 0.05 --out "$out" gen:uniform \
    "$work/my trace.csv" "$work/#x.csv" >"$work/stdout" 2>"$work/stderr"
rc=$?
cat "$work/stdout" "$work/stderr"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for f in uniform__ccalloc-growth.csv uniform__ccalloc-growth-2.csv uniform__malloc.csv; do
    [ -s "$out/timeline/$f" ] || { echo "FAIL: no timeline/$f"; fail=1; }
done
if ! awk '/^#/ { next } !h { h = NF; next } NF != h { bad = 1 } END { exit bad || !h }' "$out/ratios.dat" ||
    ! grep -q '^my_trace ' "$out/ratios.dat" || ! grep -q '^_x ' "$out/ratios.dat"; then
    echo "FAIL: ratios.dat rows differ from the header in their number of words, or 'my trace' is not the word"
    echo "my_trace, or '#x' is not the word _x:"
    cat "$out/ratios.dat"
    fail=1
fi
if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$out/timeline_uniform.png" ] || { echo "FAIL: no timeline_uniform.png"; fail=1; }
    [ -s "$out/ratios.png" ] || { echo "FAIL: no ratios.png"; fail=1; }
    if grep -q "gnuplot failed\|no ratio plot" "$work/stderr"; then echo "FAIL: gnuplot failed"; fail=1; fi
else
    echo "gnuplot not installed: plots not checked"
fi
# the per-domain table: what each strategy returned at a domain's releases
# (a 2 MiB small segment for each released domain, none for m3)
printf '%s\n' '# ccalloc trace v3' 'seq,op,id,size,stream,domain,name' '0,domain,0,0,0,1,m1' '1,domain,0,0,0,2,m2' \
    '2,domain,0,0,0,3,m3' '3,alloc,1,4096,0,1' '4,alloc,2,8192,0,2' '5,alloc,3,12288,0,3' '6,free,1,4096,0,1' \
    '7,domain_release,0,0,0,1' '8,free,2,8192,0,2' '9,domain_release,0,0,0,2' '10,free,3,12288,0,3' >"$work/dom.csv"
"$ccbench" replay -s ccalloc-growth -s ccalloc-expandable --reps 1 --no-plots --out "$work/dom" "$work/dom.csv" \
    >/dev/null 2>&1 || { echo "FAIL: the domain trace did not replay"; fail=1; }
for row in '| m1 | 1 | 4.00 KiB | 1 | 2.00 MiB | 2.00 MiB |' '| m2 | 1 | 8.00 KiB | 1 | 2.00 MiB | 2.00 MiB |' \
    '| m3 | 1 | 12.00 KiB | 0 | — | — |'; do
    grep -qF -- "$row" "$work/dom/README.md" || { echo "FAIL: no row '$row' in the domain table"; fail=1; }
done

# --- long --out paths -------------------------------------------------------
trace="$work/t.csv"
printf 'seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n' >"$trace"
C=$(printf '%0200d' 0 | tr 0 c) # a 200-byte path component
# (ls in the C locale: upper case first, whatever the machine's locale)
want_files="README.md checkpoints.csv ratios.dat results.csv results.md timeline traces.md"
# long_out LENGTH PREFIX: PREFIX, then components of 200 c's, then one of d's:
# a directory path of LENGTH bytes (each component within NAME_MAX)
long_out() {
    p=$2
    while [ $(($1 - ${#p})) -gt 201 ]; do p="$p$C/"; done
    printf '%s%s' "$p" "$(printf '%0*d' $(($1 - ${#p})) 0 | tr 0 d)"
}
for len in 1013 1215 2100; do
    d=$(long_out "$len" "$work/L$len/")
    "$ccbench" replay -s device-malloc --reps 1 --no-plots --out "$d" "$trace" >/dev/null 2>"$work/e-long"
    rc=$?
    got=$(LC_ALL=C ls "$d" | tr '\n' ' ')
    stray=$(find "$work/L$len" -mindepth 1 ! -name "$C" ! -path "$d" ! -path "$d/*" | sed "s/$C/C/g")
    if [ "$rc" -ne 0 ] || [ "$got" != "$want_files " ] || [ -n "$stray" ] || ! [ -s "$d/timeline/t__device-malloc.csv" ]; then
        echo "FAIL: a $len-byte --out: exit $rc; it holds '$got' (want '$want_files'); made outside it: '$stray'"
        cat "$work/e-long"
        fail=1
    fi
done
# past PATH_MAX (4096 with its NUL): README.md and ratios.dat fit,
# checkpoints.csv and the timeline CSVs do not: exit 1, "path too long",
# nothing made under a cut name
d=$(long_out 4082 "$work/L4082/")
"$ccbench" replay -s device-malloc --reps 1 --no-plots --out "$d" "$trace" >/dev/null 2>"$work/e-long"
rc=$?
cut=$(ls "$d" | grep -vx 'README.md\|results.csv\|results.md\|timeline\|traces.md\|checkpoints.csv\|ratios.dat')
stray=$(find "$work/L4082" -mindepth 1 ! -name "$C" ! -path "$d" ! -path "$d/*" | sed "s/$C/C/g")
if [ "$rc" -ne 1 ] || ! grep -q '/checkpoints.csv: path too long' "$work/e-long" || [ -n "$cut$stray" ]; then
    echo "FAIL: a 4082-byte --out: exit $rc (want 1, 'checkpoints.csv: path too long'); cut names: '$cut' '$stray'"
    sed "s/$C/C/g" "$work/e-long"
    fail=1
fi

# --- names from trace files, escaped --------------------------------------
ESC=$(printf '\033')
NL='
'
mkdir -p "$work/n1" "$work/n2"
hostile="esc$ESC[31m${NL}FORGED"
cp "$trace" "$work/n1/$hostile.csv"
cp "$trace" "$work/n2/$hostile.csv"
"$ccbench" replay -s device-malloc --reps 1 --no-plots --out "$work/names" "$work/n1/$hostile.csv" \
    "$work/n2/$hostile.csv" >"$work/names.out" 2>"$work/names.err"
rc=$?
escaped='esc\x1b[31m\x0aFORGED'
for f in "$work/names.out" "$work/names.err" "$work/names/README.md" "$work/names/results.md" \
    "$work/names/traces.md"; do
    if [ "$rc" -ne 0 ] || grep -q "$ESC" "$f" || grep -q '^FORGED' "$f" || ! grep -qF "$escaped" "$f"; then
        echo "FAIL: a trace named with ESC and a newline: exit $rc; $f holds it raw, or not '$escaped':"
        od -c "$f" | head -12
        fail=1
    fi
done
if ! grep -qF "is called '$escaped-2'" "$work/names.err"; then
    echo "FAIL: the message naming the second trace '$escaped-2' is missing:"
    cat "$work/names.err"
    fail=1
fi
printf 'seq,op,id,size,stream\n0,\033[2J,1,4096,0\n' >"$work/bad-op.csv"
"$ccbench" info "$work/bad-op.csv" >/dev/null 2>"$work/bad-op.err"
rc=$?
if [ "$rc" -ne 2 ] || grep -q "$ESC" "$work/bad-op.err" || ! grep -qF "op '\x1b[2J' is not one of" "$work/bad-op.err"; then
    echo "FAIL: an op field with ESC: exit $rc (want 2), quoted raw or not escaped:"
    od -c "$work/bad-op.err" | head
    fail=1
fi

# --- standard output closed -------------------------------------------------
"$ccbench" replay -s device-malloc --reps 1 --no-plots --out "$work/closed" "$trace" >&- 2>"$work/closed.err"
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q 'cannot write standard output: Bad file descriptor' "$work/closed.err" ||
    ! head -1 "$work/closed/results.md" | grep -q '^| trace |' ||
    ! head -1 "$work/closed/README.md" | grep -q '^# ccbench replay$'; then
    echo "FAIL: replay with standard output closed: exit $rc (want 1 and Bad file descriptor), or the table in a file:"
    cat "$work/closed.err"
    fail=1
fi

# --- plots not written whole --------------------------------------------
if command -v gnuplot >/dev/null 2>&1; then
    # 6 KiB (POSIX sh's ulimit -f counts 512-byte blocks): the CSVs and
    # markdown of a two-event trace fit, neither PNG does (7 and 16 KB)
    (trap '' XFSZ && ulimit -f 12 && exec "$ccbench" replay -s device-malloc --reps 1 --out "$work/fsize" "$trace") \
        >/dev/null 2>"$work/fsize.err"
    rc=$?
    pngs=$(cd "$work/fsize" && ls *.png 2>/dev/null | tr '\n' ' ')
    if [ "$rc" -ne 1 ] || [ -n "$pngs" ] || grep -q '\.png' "$work/fsize/README.md" ||
        ! grep -q "cannot write $work/fsize/timeline_t.png: .*cut short" "$work/fsize.err" ||
        ! grep -q "cannot write $work/fsize/ratios.png: .*cut short" "$work/fsize.err"; then
        echo "FAIL: plots cut by a file-size limit: exit $rc (want 1, each PNG named 'cut short'); left: '$pngs'"
        cat "$work/fsize.err"
        grep -n png "$work/fsize/README.md"
        fail=1
    fi
    # gnuplot that fails once it has begun its output: nothing kept, nothing linked
    mkdir -p "$work/failing-scripts"
    for gp in timeline ratios; do
        printf '%s\n' 'set terminal pngcairo size 200, 100' 'set output (ARG0 eq "" ? "x" : \' \
            '  (strstrt(ARG0, "timeline") ? ARG1 : ARG2))' 'plot x' 'set output' 'undefined_command_stops_it' \
            >"$work/failing-scripts/$gp.gp"
    done
    "$ccbench" replay -s device-malloc --reps 1 --scripts "$work/failing-scripts" --out "$work/gpfail" "$trace" \
        >/dev/null 2>"$work/gpfail.err"
    rc=$?
    pngs=$(cd "$work/gpfail" && ls *.png 2>/dev/null | tr '\n' ' ')
    if [ -n "$pngs" ] || grep -q '\.png' "$work/gpfail/README.md" || ! grep -q 'gnuplot failed' "$work/gpfail.err" ||
        ! grep -q 'no ratio plot' "$work/gpfail.err"; then
        echo "FAIL: a failing gnuplot script: exit $rc; PNGs left '$pngs', or linked, or the failures not said:"
        cat "$work/gpfail.err"
        grep -n png "$work/gpfail/README.md"
        fail=1
    fi
fi

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
