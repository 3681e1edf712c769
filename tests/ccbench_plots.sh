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
# one word in ratios.dat (every row as many fields as the header). The
# per-domain table sums what each strategy returned at a domain's releases.
set -u
ccbench=$1 work=$2
out="$work/out dir with spaces"
rm -rf "$work" && mkdir -p "$work" || exit 1
"$ccbench" gen uniform --scale 0.02 -o "$work/my trace.csv" || exit 1
"$ccbench" replay -s ccalloc-growth -s ccalloc-growth -s malloc --reps 1 --scale 0.05 --out "$out" gen:uniform \
    "$work/my trace.csv" >"$work/stdout" 2>"$work/stderr"
rc=$?
cat "$work/stdout" "$work/stderr"
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; fail=1; }
for f in uniform__ccalloc-growth.csv uniform__ccalloc-growth-2.csv uniform__malloc.csv; do
    [ -s "$out/timeline/$f" ] || { echo "FAIL: no timeline/$f"; fail=1; }
done
if ! awk '/^#/ { next } !h { h = NF; next } NF != h { bad = 1 } END { exit bad || !h }' "$out/ratios.dat" ||
    ! grep -q '^my_trace ' "$out/ratios.dat"; then
    echo "FAIL: ratios.dat rows differ from the header in their number of words, or 'my trace' is not the word my_trace:"
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
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
