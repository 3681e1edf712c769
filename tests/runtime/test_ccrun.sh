#!/bin/sh
# test_ccrun.sh CCRUN — ccrun end to end on the simulated device: every bad
# input exits non-zero with a message naming the problem and reports zero
# live bytes; --help, --json, --keep-cache, --timeline, --save, --resident
# (each unload returns exactly the model's reservation while the resident
# model's outputs stay the same bytes), --sleep (two models that do not fit
# side by side alternate, each sleep back at the baseline, woken outputs the
# same bytes), --no-domains, footprint sidecars and a
# small --demo (acts 4 and 5 included) work; long --conf values and paths are used
# whole; a batch that can
# never fit is refused up front; NaN/Inf weights warn and exit 4; every
# output that cannot be written whole (/dev/full) exits 1 naming it and the
# reason; hostile text (tensor names, dtypes, metadata keys, sidecar lines,
# paths) reaches the terminal escaped; two outputs on one file (standard
# output or error sent to a footprint sidecar, a hard link to one included),
# or an output on a MODEL, are refused before the run (exit 2); an output on a
# FIFO nobody reads is refused at once, never waited for; the ends of option
# ranges, the banner's allocator config and the table's columns are exact;
# a failed model outranks NaN weights (exit 1) and a resident run's success
# (exit 1); one model file twice, with sidecars, runs; --device cuda is a
# GPU or exit 1, never simulated; CCALLOC_CONF is not read; --help's
# defaults and its ulimit -v figures hold; an option given twice takes its
# last value, each value checked as it comes. Needs only a
# POSIX shell and grep; CCA_SOURCE_DIR is set by CTest (tests/runtime/runtime.cmake).
set -u
CCRUN=${1:?usage: test_ccrun.sh path/to/ccrun}
SRC=${CCA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BAD=$SRC/tests/fixtures/malformed
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
n=0

# expect CODE WORDS -- ARGS...: exit status CODE, WORDS in stderr
expect() {
    code=$1 words=$2
    shift 3
    n=$((n + 1))
    "$CCRUN" --device host --capacity 64M "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -ne "$code" ]; then
        echo "FAIL: ccrun $*: exit $rc, want $code"; cat "$TMP/err"; fails=$((fails + 1)); return
    fi
    if ! grep -qF -- "$words" "$TMP/err"; then
        echo "FAIL: ccrun $*: stderr lacks '$words':"; cat "$TMP/err"; fails=$((fails + 1)); return
    fi
    if [ "$code" -eq 1 ] && ! grep -qF "allocator holds 0 live bytes" "$TMP/err"; then
        echo "FAIL: ccrun $*: no 'allocator holds 0 live bytes' after the error"; cat "$TMP/err"
        fails=$((fails + 1)); return
    fi
    echo "ok: ccrun $* -> $rc: $(grep -m1 'ccrun' "$TMP/err")"
}

# bad model files (same table as test_runtime_loader.c)
expect 1 "cannot open" -- "$TMP/missing.safetensors"
expect 1 "empty model path" -- ""
expect 1 "truncated: 0 bytes" -- "$BAD/empty.safetensors"
expect 1 "truncated: header length" -- "$BAD/truncated_header.safetensors"
expect 1 "out of range" -- "$BAD/truncated_data.safetensors"
expect 1 "exceeds the cap" -- "$BAD/huge_header_len.safetensors"
expect 1 "not valid JSON" -- "$BAD/not_json.safetensors"
expect 1 "out of range" -- "$BAD/offsets_out_of_range.safetensors"
expect 1 "overlaps tensor" -- "$BAD/offsets_overlap.safetensors"
expect 1 "are not covered" -- "$BAD/offsets_gap.safetensors"
expect 1 "at the end are not covered" -- "$BAD/trailing_bytes.safetensors"
expect 1 "unsupported dtype 'I64'" -- "$BAD/dtype_i64.safetensors"
expect 1 "has shape [4, 3] but layer 0" -- "$BAD/shape_mismatch.safetensors"
expect 1 "no __metadata__ key 'ccr.mlp'" -- "$BAD/missing_metadata.safetensors"
expect 1 "lists 3" -- "$BAD/layer_count_mismatch.safetensors"
# a good model first, then a bad one: the first is released, the error still clean
expect 1 "not valid JSON" -- "$SRC/tests/fixtures/digits_mlp.safetensors" "$BAD/not_json.safetensors"
# too large for the device, malformed spec strings
expect 1 "does not fit" -- "mlp:4096x4096x4096:relu"
# docs/engine.md, "Loading": the error line as the doc quotes it
expect 1 "ccrun: error: model 'mlp:4096x4096x4096:relu' (128.03 MiB of weights) does not fit on host (64.00 MiB): layer 0 bias: out of device memory: 16.00 KiB for bias of mlp:4096x4096x4096:relu; device host has 0 B free of 64.00 MiB, allocator holds 64.00 MiB reserved (64.00 MiB of it in this model's domain), 64.00 MiB allocated, largest free block 0 B (CCA_ERR_OUT_OF_MEMORY: out of device memory)" -- "mlp:4096x4096x4096:relu"
# ... and the line before it, the allocator's own one-line OOM report, as the doc quotes it
expect 1 "ccalloc: out of memory: requested 16.00 KiB (16384 B rounded to 16384) on stream (nil); reserved 64.00 MiB, allocated 64.00 MiB, largest free block 0 B, device free 0 B of 64.00 MiB (policy growth)" -- "mlp:4096x4096x4096:relu"
# a batch that cannot fit is refused before ccrun allocates (4 GiB of) host input
expect 1 "batch 16777216 of model 'mlp:64x1' needs at least 4.06 GiB (4362077184 bytes) on the device" -- --batch 16777216 "mlp:64x1"
# under greedy the arena is the limit: 100000 rows (24.8 MiB) fit the device, not a 4 MiB arena
expect 1 "needs at least 24.80 MiB (26001024 bytes) on the device: weights 1.00 KiB + activations live at once 24.80 MiB; at most 4.00 MiB (4194304 bytes) is available (the greedy arena)" -- --policy greedy --conf greedy_bytes:4M --batch 100000 "mlp:64x1"
# failures before any model: the allocator cannot be created (a greedy arena
# larger than the device), an output cannot be made; still said, 0 live bytes
expect 1 "reserving the 1073741824-byte arena failed" -- --policy greedy --conf greedy_bytes:1G "mlp:4x4"
expect 1 "reserving the 1073741824-byte arena failed" -- --policy greedy --conf greedy_bytes:1G --resident "mlp:4x4"
expect 1 "$TMP/no-such-dir/t.csv" -- --timeline "$TMP/no-such-dir/t.csv" "mlp:4x4"
expect 1 "spec 'mlp:64xx10'" -- "mlp:64xx10"
expect 1 "unknown field 'swish'" -- "mlp:64x10:swish"
# usage errors: exit 2
expect 2 "unknown option '--frobnicate'" -- --frobnicate "mlp:4x4"
expect 2 "--batch 'zero' is not a count" -- --batch zero "mlp:4x4"
# counts are plain decimal, as --seed: strtoull alone takes a sign and leading blanks
for v in "+5" " 5" "5 " "0x10" "-0" "0" "16777217" "1e3" "5." "99999999999999999999999"; do
    expect 2 "--batch '$v' is not a count in 1..2^24" -- --batch "$v" "mlp:4x4"
    expect 2 "--iters '$v' is not a count in 1..2^24" -- --iters "$v" "mlp:4x4"
done
expect 2 "--batch '\x095' is not a count" -- --batch "	5" "mlp:4x4" # the tab shown escaped
expect 2 "--policy must be greedy or growth" -- --policy best "mlp:4x4"
expect 2 "no MODEL given" --
expect 2 "no_such_key" -- --conf "no_such_key:1" "mlp:4x4"
expect 2 "needs a value" -- "mlp:4x4" --iters
expect 2 "--capacity 'lots' is not a size" -- --capacity lots "mlp:4x4"
for bad in 3M 2K 2G lots 0 -8M 4096.5 2.0000001M; do
    expect 2 "--vm-granularity '$bad' is not a power of two from 4K to 1G" -- --vm-granularity "$bad" "mlp:4x4"
done
# a good page reaches the device: a 16 KiB model in expandable segments
# maps one whole page, 8 MiB (2 MiB with the device's own page)
for page in 8M:8388608 "":2097152; do
    n=$((n + 1))
    flag=${page%%:*} want=${page#*:}
    if "$CCRUN" --device host --capacity 64M --conf expandable:1 ${flag:+--vm-granularity "$flag"} --json "mlp:64x64" \
        >"$TMP/out" 2>"$TMP/err" && grep -q "\"phase\": \"load\"[^}]*\"reserved_bytes\": $want," "$TMP/out"; then
        echo "ok: ccrun --vm-granularity '$flag': the load reserves one page, $want bytes"
    else
        echo "FAIL: ccrun --vm-granularity '$flag': the load does not reserve $want bytes"; cat "$TMP/out" "$TMP/err"
        fails=$((fails + 1))
    fi
done
for bad in whole_maps WHOLE-MAPS page 1 "" "pages,whole-maps"; do
    expect 2 "--vm-backing '$bad' is neither pages nor whole-maps" -- --vm-backing "$bad" "mlp:4x4"
done
# a good backing runs (whether it reaches the device: test_runtime_engine's
# the_backing_of_virtual_memory_maps, through the same ccr_engine_options)
for backing in pages whole-maps; do
    n=$((n + 1))
    if "$CCRUN" --device host --capacity 64M --conf expandable:1 --vm-backing "$backing" --json "mlp:64x64" \
        >"$TMP/out" 2>"$TMP/err" && grep -q '"phase": "load"' "$TMP/out"; then
        echo "ok: ccrun --vm-backing $backing: the model loads"
    else
        echo "FAIL: ccrun --vm-backing $backing"; cat "$TMP/out" "$TMP/err"
        fails=$((fails + 1))
    fi
done
expect 2 "--seed '-1' is not a number" -- --seed -1 "mlp:4x4"
# the ends of --vm-granularity's range are taken (4K and 1G: exit 0, the
# page unused with classic segments, on a device one page fits); a page
# larger than the device is refused (it was taken, every allocation then an
# OOM that never named the page); a value given to an option without one
# is refused naming it
for page in 4K 1G; do
    n=$((n + 1))
    if "$CCRUN" --device host --capacity 1G --conf expandable:0 --vm-granularity "$page" "mlp:4x4" >"$TMP/out" 2>"$TMP/err"; then
        echo "ok: ccrun --vm-granularity $page is taken"
    else
        echo "FAIL: ccrun --vm-granularity $page: exit $?, want 0"; cat "$TMP/err"; fails=$((fails + 1))
    fi
done
expect 2 "vm_granularity 134217728 is larger than the capacity 67108864: not one page fits" -- --vm-granularity 128M "mlp:4x4"
expect 2 "option '--keep-cache=1' takes no value" -- --keep-cache=1 "mlp:4x4"
expect 2 "--seed '99999999999999999999' is not a number" -- --seed 99999999999999999999 "mlp:4x4"
# the demo: a rejected --conf is a usage error as for MODEL runs; it has no JSON form
expect 2 "no_such_key" -- --demo --conf "no_such_key:1"
expect 2 "--json is for MODEL runs" -- --demo --json
# the acts choose policy and segments: a --conf key would win over them
# (act 2 titled "classic" ran greedy, act 5 failed)
# a footprint is a domain's peak: without domains the sidecar was never
# written, and the run said nothing (exit 0)
expect 2 "--footprint-sidecar needs memory domains: not with --no-domains" -- --no-domains --footprint-sidecar "mlp:4x4"
expect 2 "--footprint-sidecar needs memory domains: not with --keep-cache" -- --keep-cache --footprint-sidecar "mlp:4x4"
expect 2 "--footprint-sidecar needs memory domains, which policy greedy cannot have" -- --policy greedy --footprint-sidecar "mlp:4x4"
expect 2 "which policy greedy cannot have (allocator config 'policy:greedy')" -- --conf policy:greedy --footprint-sidecar "mlp:4x4"
expect 2 "which policy greedy cannot have (allocator config 'policy:greedy')" -- --conf policy:greedy --footprint-sidecar --resident "mlp:4x4" "mlp:4x8"
expect 2 "--demo takes no policy in --conf" -- --demo --conf "max_reserved:512M,policy:greedy"
expect 2 "--demo takes no expandable in --conf" -- --demo --conf " expandable : 0 "
# found by name, whatever the rules across keys (hold_peak and max_split are
# refused under greedy: such a --conf slipped past a check by parsing)
expect 2 "--demo takes no expandable in --conf" -- --demo --conf "hold_peak:1,expandable:1"
expect 2 "--demo takes no expandable in --conf" -- --demo --conf "max_split:64M,expandable:0"
expect 2 "--demo takes no policy in --conf" -- --demo --conf "max_split:64M
policy:growth"
# a --conf one act's choice refuses is refused before any act (exit 1 before)
expect 2 "hold_peak cannot be used with policy:greedy" -- --demo --conf "hold_peak:1"

check() { # check DESCRIPTION COMMAND...: the command must succeed
    desc=$1; shift
    n=$((n + 1))
    if "$@" >"$TMP/out" 2>"$TMP/err"; then echo "ok: $desc"; else
        echo "FAIL: $desc"; cat "$TMP/out" "$TMP/err"; fails=$((fails + 1)); fi
}
# --conf comes after --policy: a growth there undoes --policy greedy (it was
# refused with the options, from --policy alone)
check "--policy greedy --conf policy:growth: the sidecar is written" sh -c \
    "cd '$TMP' && '$CCRUN' --device host --policy greedy --conf policy:growth --footprint-sidecar --save '$TMP/sc.st' 'mlp:4x4' >/dev/null && '$CCRUN' --device host --policy greedy --conf policy:growth --footprint-sidecar '$TMP/sc.st' >/dev/null && test -s '$TMP/sc.st.ccfoot'"
# an option given twice takes its last value, each value checked as it comes
# (--help and docs/engine.md, "Bad input")
for opt in batch iters; do
    expect 2 "--$opt '0' is not a count in 1..2^24" -- --$opt 0 --$opt 8 "mlp:4x4"
    expect 2 "--$opt 'x' is not a count in 1..2^24" -- --$opt 8 --$opt x "mlp:4x4"
done
expect 2 "--capacity '' is not a size" -- --capacity 64M --capacity "" "mlp:4x4"
expect 2 "--policy must be greedy or growth, not ''" -- --policy growth --policy "" "mlp:4x4"
expect 2 "--sleep needs memory domains, which policy greedy cannot have" -- --policy growth --policy greedy \
    --sleep "mlp:4x4" "mlp:4x8"
check "--policy greedy --policy growth: the last, growth, lets --sleep run" \
    "$CCRUN" --device host --capacity 64M --policy greedy --policy growth --sleep "mlp:4x4" "mlp:4x8"
check "--batch 2 --batch 3: batches of 3" sh -c "'$CCRUN' --device host --capacity 64M --batch 2 --batch 3 --json \
    mlp:4x4 | grep -q '3 x batch 3,'"
check "--device cuda --device host: the simulated device" sh -c "'$CCRUN' --device cuda --device host \
    --capacity 64M mlp:4x4 | grep -q '^device host (SIMULATED'"
check "--timeline A --timeline B: B written, A never made" sh -c "rm -f '$TMP/t1.csv' '$TMP/t2.csv' &&
    '$CCRUN' --device host --capacity 64M --timeline '$TMP/t1.csv' --timeline '$TMP/t2.csv' mlp:4x4 &&
    test -s '$TMP/t2.csv' && ! test -e '$TMP/t1.csv'"
check "--conf twice: the last only (expandable:0 drops max_reserved:1M, which would refuse the load)" \
    "$CCRUN" --device host --capacity 64M --conf max_reserved:1M --conf expandable:0 --batch 1 "mlp:1024x1024"
check "--help: an option given twice takes its last value" sh -c "'$CCRUN' --help | grep -q 'An option given twice takes its last value'"
# a --timeline the demo cannot make is an output that could not be made, as
# for MODEL runs (exit 1, naming the file), not a usage error (exit 2); said
# as the other output failures are, "ccrun: error: --timeline PATH: ..."
# (it lacked "error: --timeline")
for tl in "$TMP/no-such-dir/d.csv" "$TMP"; do
    check "--demo --timeline '$tl' (cannot be made): exit 1 naming it" sh -c \
        "'$CCRUN' --demo --device host --capacity 192M --timeline '$tl' >/dev/null 2>'$TMP/dte'; test \$? -eq 1 && grep -qF 'ccrun: error: --timeline $tl: cannot create timeline' '$TMP/dte'"
    check "--timeline '$tl' (cannot be made): exit 1 naming it" sh -c \
        "'$CCRUN' --device host 'mlp:8x8' --timeline '$tl' >/dev/null 2>'$TMP/dte'; test \$? -eq 1 && grep -qF 'ccrun: error: --timeline $tl: cannot create timeline' '$TMP/dte'"
done
check "--help lists every option" sh -c "'$CCRUN' --help | grep -q -- --timeline && '$CCRUN' --help | grep -q -- --keep-cache && '$CCRUN' --help | grep -q -- --demo"
# every long option of the parser's table is in --help, and each range the
# parser enforces is stated there (the values just outside are usage errors)
for opt in $(grep -o '{"[a-z-]*", [a-z]*_argument' "$SRC/runtime/ccrun/options.c" | sed 's/{"\([a-z-]*\)".*/\1/'); do
    check "--help lists --$opt" sh -c "'$CCRUN' --help | grep -q -- '--$opt'"
done
# the spec grammar in --help names every field the parser takes (arch.c): nosoftmax was left out
for field in relu gelu none softmax nosoftmax seed= nobias acts=; do
    check "--help's spec grammar names :$field" sh -c "'$CCRUN' --help | grep '^string: \|^        *\[' | grep -q -- '[:|]$field'"
done
check "--help states the parser's ranges" sh -c "'$CCRUN' --help >'$TMP/help' &&
    grep -q -- '--capacity SIZE .*at least 1M' '$TMP/help' && grep -q -- '--batch N .*1\.\.2^24' '$TMP/help' &&
    grep -q -- '--iters N .*1\.\.2^24' '$TMP/help' && grep -q -- '--seed N .*0\.\.2^64-1' '$TMP/help' &&
    grep -q -- '-h, --help' '$TMP/help'"
expect 2 "at least 1M" -- --capacity 1048575 mlp:4x4
# ... and the least it takes runs a model: small requests fit a segment of the device's size
check "--capacity 1M runs a small model" sh -c "'$CCRUN' --device host --capacity 1M mlp:4x4"
expect 2 "1..2^24" -- --batch 16777217 mlp:4x4
expect 2 "1..2^24" -- --iters 0 mlp:4x4
expect 2 "0..2^64-1" -- --seed 18446744073709551616 mlp:4x4
check "--json on a failure still reports zero live bytes" sh -c \
    "'$CCRUN' --device host --json '$BAD/not_json.safetensors' 2>/dev/null | grep -q '\"live_bytes_at_exit\": 0'; test \$? -eq 0"
check "--json with a config the allocator rejects is still one document naming the key" sh -c \
    "'$CCRUN' --device host --json --conf bogus:1 'mlp:4x4' >'$TMP/je' 2>/dev/null; test \$? -eq 2 && grep -q '\"error\": \"allocator config' '$TMP/je' && grep -q \"unknown key 'bogus'\" '$TMP/je' && grep -q '\"device\": null' '$TMP/je'"
check "two models with release, device free back to baseline each time" sh -c \
    "'$CCRUN' --device host --capacity 256M --iters 2 '$SRC/tests/fixtures/digits_mlp.safetensors' 'mlp:256x2048x2048x10:relu:softmax' | grep -c 'device free == baseline' | grep -qx 2"
check "--keep-cache keeps memory with the process" sh -c \
    "'$CCRUN' --device host --keep-cache 'mlp:256x2048x2048x10' | grep -q 'the process still holds [1-9]'"
check "--json is one document with phases" sh -c \
    "'$CCRUN' --device host --json --policy greedy 'mlp:64x64x10:relu:softmax' > '$TMP/j' && grep -q '\"phase\": \"release\"' '$TMP/j' && grep -q '\"simulated\": true' '$TMP/j' && grep -q '\"error\": null' '$TMP/j'"
check "--timeline writes one row per event" sh -c \
    "'$CCRUN' --device host --timeline '$TMP/t.csv' --iters 2 'mlp:64x64x10:relu:softmax' >/dev/null && head -1 '$TMP/t.csv' | grep -q '^t_ms,event' && test \$(grep -c ',alloc,' '$TMP/t.csv') -eq \$(grep -c ',free,' '$TMP/t.csv')"
check "--save writes a loadable safetensors file" sh -c \
    "'$CCRUN' --device host --save '$TMP/m.safetensors' 'mlp:16x32x4:gelu:softmax:seed=3' >/dev/null && '$CCRUN' --device host '$TMP/m.safetensors' | grep -q 'device free == baseline'"
FF=$(printf '\377')
check "--json stays valid UTF-8 when a model name is not (bytes become \\ufffd)" sh -c \
    "'$CCRUN' --device host --json 'mlp:${FF}x4' >'$TMP/ju' 2>/dev/null; test \$? -eq 1 && grep -q 'ufffd' '$TMP/ju' && iconv -f UTF-8 -t UTF-8 '$TMP/ju' >/dev/null"
LONG=$(printf 'é%.0s' 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32).safetensors
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/$LONG"
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/x$LONG"
check "--json stays valid UTF-8 when a long name is cut inside a character" sh -c \
    "'$CCRUN' --device host --json '$TMP/$LONG' '$TMP/x$LONG' >'$TMP/jl' && iconv -f UTF-8 -t UTF-8 '$TMP/jl' >/dev/null"
CR=$TMP/$(printf 'a\rb').safetensors
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$CR"
check "--timeline rows stay one line each when a file name holds a carriage return" sh -c \
    "'$CCRUN' --device host --timeline '$TMP/tcr.csv' '$CR' >/dev/null && test \$(LC_ALL=C tr -cd '\\r' <'$TMP/tcr.csv' | wc -c) -eq 0"
check "--demo on a huge simulated device builds specs within the grammar (no overflow)" sh -c \
    "'$CCRUN' --demo --device host --capacity 256G --conf max_reserved:64M >'$TMP/dh' 2>&1; test \$? -le 1 && grep -q '  A = mlp:[0-9x]*:relu:softmax:seed=1\$' '$TMP/dh' && ! grep -q 'dimension\\|more than 64' '$TMP/dh'"
check "CCALLOC_TRACE: the engine's phases are marks, each model a domain released at unload, its release an empty_cache event, in order" sh -c \
    "CCALLOC_TRACE='$TMP/tr.csv' '$CCRUN' --device host --iters 2 'mlp:16x32x4:relu:softmax' 'mlp:8x8:gelu' >/dev/null && grep -q '^# ccalloc trace v3\$' '$TMP/tr.csv' && grep ',mark,\\|,empty_cache,\\|,domain' '$TMP/tr.csv' | cut -d, -f2,6,7 | tr '\n' ' ' | grep -q 'mark,0,load:mlp:16x32x4:relu:softmax domain,1,mlp:16x32x4:relu:softmax mark,0,loaded:mlp:16x32x4:relu:softmax mark,0,run:mlp:16x32x4:relu:softmax .*mark,0,unload:mlp:16x32x4:relu:softmax domain_release,1 .*empty_cache,0 .*mark,0,load:mlp:8x8:gelu domain,2,mlp:8x8:gelu .*mark,0,unload:mlp:8x8:gelu domain_release,2 .*empty_cache,0 ' && test \$(grep -c ',alloc,[0-9]*,[0-9]*,0,1\$' '$TMP/tr.csv') -gt 0 && test \$(grep -c ',alloc,[0-9]*,[0-9]*,0,1\$' '$TMP/tr.csv') -eq \$(grep -c ',free,[0-9]*,[0-9]*,0,1\$' '$TMP/tr.csv')"
# a mark holds no ',' or '"' (the trace is CSV; cca_trace_mark refuses them):
# the engine writes '_' for each, so a model path with a comma still marks
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/a,b.safetensors"
check "CCALLOC_TRACE: a model path with ',' is marked with '_' in its place" sh -c \
    "cd '$TMP' && CCALLOC_TRACE='$TMP/trc.csv' '$CCRUN' --device host 'a,b.safetensors' >/dev/null && grep -q ',load:a_b.safetensors\$' '$TMP/trc.csv'"
# long user strings are used whole, never cut to a buffer's size: a --conf of
# 513 bytes ending in max_reserved:512M once became max_reserved:51 (no fit)
PAD=$(i=0; while [ $i -lt 31 ]; do printf 'max_reserved:1G,'; i=$((i + 1)); done)
check "--conf longer than 512 bytes is used whole (max_reserved:512M at its end)" sh -c \
    "'$CCRUN' --device host --conf '${PAD}max_reserved:512M' 'mlp:64x64x10:relu:softmax' >'$TMP/lc' && grep -q 'allocator max_reserved:1G,.*,max_reserved:512M\$' '$TMP/lc'"
# act 4 without domains: the free bytes trapped by R are what the allocator
# still holds less what is allocated, each figure rounded to 0.01 of its
# unit (it printed free_bytes_pinned + free_bytes_trapped, which is part of
# it: more free than held)
TRAPPED_AWK='function b(v, u) { return v * (u == "B" ? 1 : u == "KiB" ? 1024 : u == "MiB" ? 1048576 : u == "GiB" ? 1073741824 : -1e30) }
/^trim .*free but trapped/ { for (i = 3; i <= NF; i++) if ($i == "free" && $(i + 1) == "but") z = b($(i - 2), $(i - 1));
  d = z - (b($5, $6) - b($3, $4)); seen++; if (d > 16000 || d < -16000) bad++ }
END { exit !(seen == 1 && !bad) }'
check "--demo act 4: the bytes trapped by R are the bytes held less the bytes allocated" sh -c \
    "'$CCRUN' --demo --device host --capacity 192M >'$TMP/d4' 2>&1 && awk '$TRAPPED_AWK' '$TMP/d4'"
check "--demo takes a --conf longer than 512 bytes whole" sh -c \
    "'$CCRUN' --demo --device host --capacity 192M --conf '${PAD}max_reserved:512M,greedy_fraction:0.75' >'$TMP/ld' 2>&1 && grep -q '== baseline 192.00 MiB every time' '$TMP/ld'"
LD=$TMP/$(printf 'd%.0s' $(seq 1 150))
mkdir -p "$LD"
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$LD/digits.safetensors"
check "--json names a long model path whole" sh -c \
    "'$CCRUN' --device host --json '$LD/digits.safetensors' >'$TMP/jp' && grep -qF '\"$LD/digits.safetensors\"' '$TMP/jp'"
# docs/engine.md: the metadata written is the architecture alone (the
# fixture's "source" is not kept)
check "--save writes ccr.mlp and no other metadata key" sh -c \
    "'$CCRUN' --device host --save '$TMP/f16.safetensors' '$SRC/tests/fixtures/digits_mlp_f16.safetensors' >/dev/null && grep -q '\"ccr.mlp\"' '$TMP/f16.safetensors' && ! grep -q '\"source\"' '$TMP/f16.safetensors' && grep -q '\"source\"' '$SRC/tests/fixtures/digits_mlp_f16.safetensors'"
check "--save reports a long path whole" sh -c \
    "'$CCRUN' --device host --save '$LD/saved.safetensors' 'mlp:4x4' >'$TMP/sp' && grep -qF 'wrote $LD/saved.safetensors' '$TMP/sp'"
check "an error about a long path names it whole" sh -c \
    "'$CCRUN' --device host '$LD/missing.safetensors' 2>'$TMP/ep'; test \$? -eq 1 && grep -qF '$LD/missing.safetensors: cannot open' '$TMP/ep'"
# ... but a message keeps 1023 bytes (docs/engine.md, "Long strings are never
# cut"): a path of 1400 characters fills it and the reason is cut off
LP=$TMP$(i=0; while [ $i -lt 7 ]; do printf '/%s' "$(printf 'p%.0s' $(seq 1 200))"; i=$((i + 1)); done)/m.safetensors
check "an error about a path of 1400 characters is cut at 1023 bytes, ending in ..." sh -c \
    "'$CCRUN' --device host '$LP' 2>'$TMP/lp'; test \$? -eq 1 && test \$(head -1 '$TMP/lp' | wc -c) -eq \$((14 + 1023 + 1)) && head -1 '$TMP/lp' | grep -q '\\.\\.\\.\$'"
# st_file FILE HEADER DATA: a safetensors file: the header's length (8 bytes,
# little-endian, < 64 KiB), HEADER as it is, then DATA (printf escapes).
st_file() {
    len=$(printf '%s' "$2" | wc -c)
    { printf "\\$(printf %03o $((len % 256)))\\$(printf %03o $((len / 256)))\\000\\000\\000\\000\\000\\000"
      printf '%s' "$2"; printf "$3"; } >"$1"
}
# NaN/Inf weights load with a warning naming the tensor, and exit 4 (not 0)
# even though the run completes. mlp:2x1: 0.weight [1, 2] = {NaN, 1}, 0.bias = {+Inf}
NANW='\000\000\300\177\000\000\200\077\000\000\200\177'
st_file "$TMP/nan.safetensors" '{"__metadata__":{"ccr.mlp":"mlp:2x1"},"0.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"0.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}' "$NANW"
check "non-finite weights: a warning naming the tensors, exit 4" sh -c \
    "'$CCRUN' --device host '$TMP/nan.safetensors' >'$TMP/no' 2>'$TMP/ne'; test \$? -eq 4 && grep -qF \"warning: model '$TMP/nan.safetensors' has 2 non-finite weights (NaN/Inf): tensor '0.weight': 1, tensor '0.bias': 1\" '$TMP/ne'"
# A -inf weight need not reach the outputs: the kernels map it to 0 (ReLU
# of -inf, softmax of a -inf logit next to finite ones), so the warning says
# the outputs may not be numbers, not that they are NaN. mlp:2x2:softmax,
# W = 0, b = {-Inf, 0}: logits {-Inf, 0}, probabilities {0, 1} for every input.
NINFW='\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\200\377\000\000\000\000'
st_file "$TMP/ninf.safetensors" '{"__metadata__":{"ccr.mlp":"mlp:2x2:softmax"},"0.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"0.bias":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}' "$NINFW"
check "a -inf bias before softmax: exit 4, a warning that does not promise NaN outputs" sh -c \
    "'$CCRUN' --device host '$TMP/ninf.safetensors' >'$TMP/nio' 2>'$TMP/nie'; test \$? -eq 4 && grep -qF \"has 1 non-finite weights (NaN/Inf): tensor '0.bias': 1; its outputs may not be numbers (exit status 4)\" '$TMP/nie' && ! grep -q 'will be NaN' '$TMP/nie' && grep -qF 'y[0][0]=0,' '$TMP/nio'"
# a model that failed outranks non-finite weights seen before it: exit 1, not 4
expect 1 "cannot open" -- "$TMP/nan.safetensors" "$TMP/missing.safetensors"
check "--help: non-finite weights may give outputs that are not numbers" sh -c "'$CCRUN' --help | grep -q 'it ran, but its outputs may not be numbers'"
# Text from a model file (tensor names, dtypes, metadata keys, a sidecar's
# lines) and from the command line reaches the terminal escaped: control
# bytes, DEL, C1 controls, bidi controls and bytes that are not UTF-8 as
# \xNN, so a hostile name can neither drive the terminal (ESC sequences) nor
# forge a line of its own (a newline). Well-formed printable UTF-8 is kept.
ESC=$(printf '\033')
NL='
'
RAW=$(printf '\033\r\377\302') # bytes no escaped output holds
# hostile DESCRIPTION WANT ARGS...: stderr and stdout hold no raw ESC, CR,
# 0xff or 0xc2 (of a C1) and no forged line; one of them has WANT (escaped)
hostile() {
    desc=$1 want=$2; shift 2
    n=$((n + 1))
    "$CCRUN" --device host "$@" >"$TMP/ho" 2>"$TMP/he"
    if LC_ALL=C grep -q "[$RAW]" "$TMP/he" "$TMP/ho" || grep -q '^FORGED' "$TMP/he" "$TMP/ho" ||
        ! cat "$TMP/he" "$TMP/ho" | grep -qF -- "$want"; then
        echo "FAIL: $desc: raw control bytes, or no '$want':"; od -c "$TMP/he" | head -20
        fails=$((fails + 1))
    else
        echo "ok: $desc"
    fi
}
Z16='\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'
H0='{"__metadata__":{"ccr.mlp":"mlp:2x1"},"0.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"0.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}'
st_file "$TMP/esc_name.safetensors" "$H0"',"\u001b[31mEVIL\nFORGED line":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}' "$Z16"
hostile "a tensor name with ESC and a newline (an error) is escaped" \
    "unexpected tensor '\x1b[31mEVIL\x0aFORGED line'" "$TMP/esc_name.safetensors"
st_file "$TMP/esc_nan.safetensors" '{"__metadata__":{"ccr.mlp":"mlp:2x1"},"\u001b[2J\nFORGED.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"\u001b[2J\nFORGED.bias":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}' "$NANW"
hostile "a tensor name with ESC and a newline (the NaN warning) is escaped" \
    "tensor '\x1b[2J\x0aFORGED.weight': 1, tensor '\x1b[2J\x0aFORGED.bias': 1" "$TMP/esc_nan.safetensors"
st_file "$TMP/esc_dtype.safetensors" '{"__metadata__":{"ccr.mlp":"mlp:2x1"},"0.weight":{"dtype":"\u001b]0;pwned\u0007","shape":[1,2],"data_offsets":[0,8]}}' '\0\0\0\0\0\0\0\0'
hostile "a dtype with an OSC sequence is escaped" "unsupported dtype '\x1b]0;pwned\x07'" "$TMP/esc_dtype.safetensors"
st_file "$TMP/esc_meta.safetensors" '{"__metadata__":{"\u001b[1mk\r\u009b\u007f":1}}' ''
hostile "a metadata key with ESC, CR, a C1 CSI and DEL is escaped" \
    "__metadata__ value '\x1b[1mk\x0d\xc2\x9b\x7f' is not a string" "$TMP/esc_meta.safetensors"
st_file "$TMP/esc_utf8.safetensors" "$H0"',"caf\u00e9 \u202e":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}' "$Z16"
hostile "a bidi override in a tensor name is escaped, UTF-8 kept" \
    "unexpected tensor 'café \xe2\x80\xae'" "$TMP/esc_utf8.safetensors"
st_file "$TMP/esc_notutf8.safetensors" "$H0"',"caf'"$(printf '\377\303')"'":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}' "$Z16"
hostile "a header string that is not UTF-8 is refused, naming the byte" \
    "esc_notutf8.safetensors: header string at byte 159 is not UTF-8 (byte 0xff at byte 163)" "$TMP/esc_notutf8.safetensors"
hostile "bytes of a path that are not UTF-8 are escaped" "missing\xff\xc3: cannot open" "$TMP/missing$(printf '\377\303')"
hostile "a path with ESC and a newline (cannot open) is escaped" "missing\x1b[31m\x0aFORGED: cannot open" \
    "$TMP/missing$ESC[31m${NL}FORGED"
hostile "a usage error quoting an argument with ESC is escaped" "--policy must be greedy or growth, not '\x1b[31m'" \
    --policy "$ESC[31m" 'mlp:4x4'
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/esc$ESC[31m.safetensors"
hostile "a model path with ESC in the table (stdout) is escaped" 'esc\x1b[31m.safetensors    ' \
    "$TMP/esc$ESC[31m.safetensors"
printf 'ccfoot 1\narch mlp:\033[31m\033]0;x\007\nbatch 8\nreserved_peak 2097152\n' >"$TMP/esc$ESC[31m.safetensors.ccfoot"
hostile "a sidecar line with ESC (the library's warning) is escaped" \
    "written for other layers ('mlp:\x1b[31m\x1b]0;x\x07'" --footprint-sidecar "$TMP/esc$ESC[31m.safetensors"
check "--json keeps a hostile tensor name whole, JSON-escaped" sh -c \
    "'$CCRUN' --device host --json '$TMP/esc_name.safetensors' >'$TMP/hj' 2>/dev/null; test \$? -eq 1 && grep -qF '\\u001b[31mEVIL\\u000aFORGED line' '$TMP/hj'"
# --json writes every character the terminal escaper refuses as \uXXXX (C1
# controls, DEL, bidi and line separators, invisible ones, a tag as a
# surrogate pair): the document stays valid and lossless and reaches a
# terminal inert (only bytes < 0x20 were escaped; the rest came out raw).
# The tensor name: U+009B U+007F U+202E U+2028 U+200B U+FEFF U+E0041 "x".
st_file "$TMP/esc_json.safetensors" "$H0"',"\u009b\u007f\u202e\u2028\u200b\ufeff'"$(printf '\363\240\201\201')"'x":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}' "$Z16"
n=$((n + 1))
"$CCRUN" --device host --json "$TMP/esc_json.safetensors" >"$TMP/hj2" 2>/dev/null
rc=$?
if [ "$rc" -eq 1 ] && grep -qF '\u009b\u007f\u202e\u2028\u200b\ufeff\udb40\udc41x' "$TMP/hj2" &&
    ! LC_ALL=C grep -q "$(printf '[\177\302\342\357\363]')" "$TMP/hj2" &&
    python3 -c 'import json, sys; assert "\u009b\x7f\u202e\u2028\u200b\ufeff\U000e0041x" in json.load(open(sys.argv[1]))["error"]' "$TMP/hj2"; then
    echo "ok: --json escapes C1, DEL, bidi, line and invisible characters as \\uXXXX, valid and lossless"
else
    echo "FAIL: --json with C1, DEL, bidi, line and invisible characters in a name: exit $rc, raw or lost:"
    od -c "$TMP/hj2" | grep -n '302\|342\|357\|363\|177' | head -5
    fails=$((fails + 1))
fi
check "--help documents exit status 4" sh -c "'$CCRUN' --help | grep -q '4 a model has non-finite (NaN/Inf) weights'"
# --help's measured range of the start-up hang under ulimit -v is the one
# docs/engine.md's "Address-space limits" table gives (the table was
# measured again when cuBLAS stopped being linked; --help kept the old one)
n=$((n + 1))
help_range=$("$CCRUN" --help | tr '\n' ' ' | sed -n 's/.*measured: ulimit -v \([0-9]*\) to *\([0-9]*\) on .*/\1 \2/p')
doc_range=$(sed -n 's/^| about \([0-9,]*\) to \([0-9,]*\) | the hang in OpenBLAS.*/\1 \2/p' "$SRC/docs/engine.md" | tr -d ,)
if [ -n "$help_range" ] && [ "$help_range" = "$doc_range" ]; then
    echo "ok: --help's ulimit -v hang range ($help_range) is docs/engine.md's"
else
    echo "FAIL: --help's ulimit -v hang range '$help_range' is not docs/engine.md's '$doc_range'"
    fails=$((fails + 1))
fi
# docs/engine.md, "Devices": --device cuda is a GPU or an error (exit 1),
# never the simulated device; without a GPU it names the device and the count
n=$((n + 1))
"$CCRUN" --device cuda --iters 1 'mlp:8x8' >"$TMP/cu" 2>"$TMP/ce"
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q SIMULATED "$TMP/cu"; then
    echo "ok: --device cuda ran on the GPU"
elif [ "$rc" -eq 1 ] && grep -q '^ccrun: device cuda:0 not available ([0-9]* GPU(s) found' "$TMP/ce" && ! grep -q SIMULATED "$TMP/cu"; then
    echo "ok: --device cuda without a usable GPU: exit 1, $(head -1 "$TMP/ce")"
else
    echo "FAIL: --device cuda: exit $rc, want 0 on a GPU or 1 naming the device, never simulated:"
    cat "$TMP/cu" "$TMP/ce"; fails=$((fails + 1))
fi
# --help: "CCALLOC_CONF is not read by ccrun; use --conf" (a key the allocator
# would refuse changes nothing) and the defaults it states: --capacity 1G,
# --batch 8, --iters 3, --seed 1
check "CCALLOC_CONF is not read by ccrun" sh -c \
    "CCALLOC_CONF=no_such_key:1,policy:greedy '$CCRUN' --device host --iters 1 'mlp:8x8' | head -1 | grep -q '; allocator defaults (growth)\$'"
check "--help's defaults: a 1 GiB device, 3 batches of 8 rows, seed 1" sh -c \
    "'$CCRUN' --device host 'mlp:8x8' >'$TMP/d0' && head -1 '$TMP/d0' | grep -q ' 1.00 GiB total, ' && grep -q '^run .* 3 x batch 8, ' '$TMP/d0' && '$CCRUN' --device host --seed 1 'mlp:8x8' >'$TMP/d1' && '$CCRUN' --device host --seed 2 'mlp:8x8' >'$TMP/d2' && y0=\$(grep -o 'y\[0\]\[0\]=[^,]*' '$TMP/d0') && test \"\$y0\" = \"\$(grep -o 'y\[0\]\[0\]=[^,]*' '$TMP/d1')\" && test \"\$y0\" != \"\$(grep -o 'y\[0\]\[0\]=[^,]*' '$TMP/d2')\""
check "finite weights still exit 0" sh -c "'$CCRUN' --device host '$SRC/tests/fixtures/digits_mlp.safetensors' >/dev/null 2>'$TMP/fe' && ! grep -q 'non-finite' '$TMP/fe'"
# (act 5's temporary file in a relative $TMPDIR that reads as an option,
# "-tmp": the child ccrun must get it as a MODEL file, "./-tmp/..."; and
# CCALLOC_TRACE a regular file, which the demo records while act 5's child
# ccrun runs: the child must not be refused the file the demo holds, which
# exited it 1 and failed the demo's "process per model" step)
mkdir -p "$TMP/-tmp"
check "--demo on a small simulated device, recording CCALLOC_TRACE" sh -c \
    "cd '$TMP' && TMPDIR=-tmp CCALLOC_TRACE='$TMP/demo-trace.csv' '$CCRUN' --demo --device host --capacity 192M > '$TMP/demo' && grep -q 'REFUSED' '$TMP/demo' && grep -q '== baseline 192.00 MiB every time' '$TMP/demo' && grep -q ',mark,0,0,0,0,sleep:mlp:' '$TMP/demo-trace.csv'"
# a device too small for the demo's models: every step that could not run is
# said under its row, nothing is shown as if it had run, and the demo exits 1
# with the allocators at 0 live bytes (it exited 0, its act-2 row listing
# nine batches of which five had failed)
expect 1 "the demo did not run whole: 11 step(s) failed" -- --demo --capacity 16M --iters 1
check "--demo on a 16M device (TMPDIR empty: act 5 saves in /tmp): the act-2 rows name the batches that ran and those that failed" sh -c \
    "TMPDIR= '$CCRUN' --demo --device host --capacity 16M --iters 1 >'$TMP/d16' 2>/dev/null; test \$? -eq 1 && grep -q 'A written to /tmp/ccrun-demo-' '$TMP/d16' && grep -q '^run  *D .*batches 96,40,8,24 ran, 512,1024,700,300,1000 FAILED (5 of 9): [0-9]* splits' '$TMP/d16' && grep -q '^run  *D .*batches 96,40,8,300,24 ran, 512,1024,700,1000 FAILED (4 of 9): [0-9]* splits' '$TMP/d16' && ! grep -q 'batches 512,96,1024' '$TMP/d16' && test \$(grep -c '^2x\\? *fragmentation after changing batches *[0-9.]* (batches failed)' '$TMP/d16') -eq 2 && grep -q '^4 *domains: A unloaded while R runs *did not run: model' '$TMP/d16'"
# act 2's comparison quotes what greedy held in act 1, measured there (it
# was the device's free memory times the default greedy_fraction: 14.40 MiB
# where act 1 held 16.00, and blind to a --conf greedy_fraction)
HELD_AWK='/^1 *idle greedy process \(no model\) holds/ { held = $8 " " $9 }
/greedy held/ { n++; if (substr($0, index($0, "greedy held ") + 12) != held ")") bad++ }
END { exit !(held != "" && n == 2 && !bad) }'
check "--demo: act 2 compares with the arena act 1 held (192M, 16M, and the long --conf's greedy_fraction 0.75)" sh -c \
    "awk '$HELD_AWK' '$TMP/demo' && awk '$HELD_AWK' '$TMP/d16' && awk '$HELD_AWK' '$TMP/ld' && grep -q '^1 *idle greedy process (no model) holds *144.00 MiB = 75% of the device' '$TMP/ld'"
check "--demo act 4: memory trapped without domains, all of A returned with them, R unchanged, footprint without upstream calls" sh -c \
    "grep -q '^4 *no domains: A unloaded + empty-cache *device free +40.00 MiB of A.s 62.00 MiB; [1-9][0-9.]* MiB trapped' '$TMP/demo' && grep -q '^4 *domains: A unloaded while R runs *device free +62.00 MiB = exactly A.s whole reservation' '$TMP/demo' && grep -q '^4 *R.s outputs as A came and went *bit-identical in both sequences' '$TMP/demo' && grep -q '^4 *A loaded again: remembered footprint *62.00 MiB reserved in 1 upstream call, then 0 in load + 2 runs; peak 62.00 MiB <= first 62.00 MiB' '$TMP/demo'"

check "--demo act 5: A asleep at the baseline exactly, B ran, A's outputs bit-identical, three measured switch costs, the temporary file gone" sh -c \
    "grep -q '^5 *A asleep (loaded, weights on the host) *device free == baseline 192.00 MiB exactly' '$TMP/demo' && grep -q '^5 *B, too large beside A awake, ran *A.s [0-9.]* MiB + B.s [0-9.]* MiB > device 192.00 MiB' '$TMP/demo' && grep -q '^5 *A woken: its outputs *bit-identical to before its sleep' '$TMP/demo' && grep -q '^5 *A out and back: sleep + wake *[0-9.]* ms (sleep [0-9.]* + wake [0-9.]*)' '$TMP/demo' && grep -q '^5 *A out and back: unload + reload (file) *[0-9.]* ms (unload [0-9.]* + load [0-9.]*)' '$TMP/demo' && grep -q '^5 *A out and back: a process per model *[0-9.]* ms' '$TMP/demo' && grep -q '^process  *A .*a child ccrun loaded A from the file' '$TMP/demo' && grep -q '^run  *A .*(reloaded)' '$TMP/demo' && f=\$(grep -o 'A written to [^ ]*' '$TMP/demo' | cut -d' ' -f4) && case \$f in ./-tmp/ccrun-demo-*) ;; *) false;; esac && test ! -e \"$TMP/\$f\""

# --resident B A C: B stays loaded while A then C are loaded, run and
# unloaded. From the JSON rows: at each unload the device's free memory rises
# by exactly the model's whole reservation (the figure in the note, taken
# from its domain before the release); B's outputs are the same bytes at
# every step (the same hash in every one of its run rows).
RB='mlp:256x2048x2048x10:relu:softmax:seed=2'
RA='mlp:512x1024x1024x10:relu:softmax:seed=1'
RC='mlp:128x3000x3000x10:gelu:softmax:seed=3'
UNLOAD_RISE='
/"phase": / {
    match($0, /"device_free_bytes": [0-9]+/); f = substr($0, RSTART + 21, RLENGTH - 21) + 0
    if ($0 ~ /"phase": "unload"/) {
        n++
        if (match($0, /whole reservation \([0-9]+ B\)/)) { r = substr($0, RSTART + 19, RLENGTH - 22) + 0 } else { r = -1 }
        if (r <= 0 || f - prev != r) { bad++; print "unload row " n ": device free rose by " f - prev ", reservation " r }
    }
    prev = f
}
END { if (bad || n != want) { print n " unload rows, want " want; exit 1 } }'
check "--resident B A C: each unload raises device free by exactly the model's whole reservation" sh -c \
    "'$CCRUN' --device host --capacity 256M --json --resident '$RB' '$RA' '$RC' >'$TMP/res.json' && awk -v want=3 '$UNLOAD_RISE' '$TMP/res.json'"
check "--resident B A C: B's outputs are bit-identical at every step, B runs after each unload" sh -c \
    "test \$(grep '\"model\": \"$RB\"' '$TMP/res.json' | grep -o 'outputs [0-9a-f]*' | sort -u | wc -l) -eq 1 && test \$(grep -c '= its first run' '$TMP/res.json') -eq 2 && grep -q '\"error\": null' '$TMP/res.json' && grep -q '\"live_bytes_at_exit\": 0' '$TMP/res.json'"
check "--resident B A C (text): the table says it, and the end is back at the baseline" sh -c \
    "'$CCRUN' --device host --capacity 256M --resident '$RB' '$RA' '$RC' >'$TMP/res.txt' && test \$(grep -c '^unload .*domain released: device free +[0-9.]* MiB, exactly its whole reservation' '$TMP/res.txt') -eq 3 && grep -q '^load .*resident: 3 layers' '$TMP/res.txt' && grep -q 'released 0 B; device free == baseline' '$TMP/res.txt'"
check "--resident B A C A: the second load of A reserves its footprint and makes no other upstream call" sh -c \
    "'$CCRUN' --device host --capacity 256M --resident '$RB' '$RA' '$RC' '$RA' >'$TMP/rf.txt' && grep -q '^load .*footprint 22.00 MiB reserved up front (1 upstream call), then 0 upstream calls' '$TMP/rf.txt' && test \$(grep -c '^run .*, 0 upstream calls' '$TMP/rf.txt') -ge 5"
check "--resident --no-domains: the unload returns nothing, a trim what the resident does not pin; B unchanged" sh -c \
    "'$CCRUN' --device host --capacity 256M --no-domains --resident '$RB' '$RA' '$RC' >'$TMP/rn.txt' && test \$(grep -c '^unload .*no domain: device free +0 B, its memory stays cached' '$TMP/rn.txt') -eq 3 && test \$(grep -c '^trim .*released [1-9]' '$TMP/rn.txt') -eq 2 && test \$(grep -c '= its first run' '$TMP/rn.txt') -eq 2 && grep -q 'no memory domains' '$TMP/rn.txt'"
# the trim's free figure is free_bytes_pinned alone (free_bytes_trapped is
# part of it: ccalloc.h): 2.00 MiB held less the resident's 300.50 KiB live
# (it said 3.41 MiB free of 2.00 MiB held); a trim that leaves less than
# before the model came does not say "as before" (greedy: 232 MiB, then 128)
check "--resident --no-domains: the trim's free figure is what the held bytes less the live ones are" sh -c \
    "'$CCRUN' --device host --no-domains --resident 'mlp:64x1024x10' 'mlp:64x2048x2048x10' >'$TMP/rt.txt' && grep -q '^trim .* 300.50 KiB  *2.00 MiB .*the process holds 2.00 MiB, as before the model came (1.71 MiB of it free in 1 segments' '$TMP/rt.txt'"
check "--resident, greedy: a trim below the holding before the model came says less, not as before" sh -c \
    "'$CCRUN' --device host --capacity 256M --policy greedy --resident 'mlp:64x64' 'mlp:32x32' >'$TMP/rg.txt' && grep -q '^trim .*the process holds 128.00 MiB, less than before the model came (127.98 MiB of it free' '$TMP/rg.txt'"
check "--resident alone (no swapped MODEL) loads, runs and releases it" sh -c \
    "'$CCRUN' --device host --resident 'mlp:16x16' | grep -q 'device free == baseline'"
# --sleep A B A B on a device too small for A and B side by side (each
# reserves 42 MiB of 64 MiB; --resident A B fails): each turn ends with a
# sleep that brings the device's free memory back to its baseline (the
# sleeping models hold no device memory), A and B come back by a wake, and
# their outputs are the same bytes as at their first run.
SA='mlp:256x2048x2048x2048x10:relu:softmax:seed=1'
SB='mlp:256x2048x2048x2048x10:relu:softmax:seed=2'
SLEEP_ROWS='
/"phase": "(sleep|wake)"/ {
    match($0, /"device_free_bytes": [0-9]+/); f = substr($0, RSTART + 21, RLENGTH - 21) + 0
    if ($0 ~ /"phase": "sleep"/) { sleeps++; if (f != 67108864) { bad++; print "sleep row " sleeps ": device free " f } }
    else wakes++
}
END { if (bad || sleeps != 3 || wakes != 2) { print sleeps " sleep rows, " wakes " wake rows"; exit 1 } }'
expect 1 "does not fit" -- --resident "$SA" "$SB"
check "--sleep A B A B on 64M: every sleep brings device free back to the baseline; two wakes" sh -c \
    "'$CCRUN' --device host --capacity 64M --json --sleep '$SA' '$SB' '$SA' '$SB' >'$TMP/sl.json' && awk '$SLEEP_ROWS' '$TMP/sl.json'"
check "--sleep A B A B: woken outputs bit-identical to the first run, no error, 0 live bytes" sh -c \
    "test \$(grep -c '= its first run' '$TMP/sl.json') -eq 2 && test \$(grep '\"model\": \"$SA\"' '$TMP/sl.json' | grep -o 'outputs [0-9a-f]*' | sort -u | wc -l) -eq 1 && grep -q '\"error\": null' '$TMP/sl.json' && grep -q '\"live_bytes_at_exit\": 0' '$TMP/sl.json'"
check "--sleep A B A B (text): sleep rows exact, wake rows, sleeping model unloaded, baseline at the end" sh -c \
    "'$CCRUN' --device host --capacity 64M --sleep '$SA' '$SB' '$SA' '$SB' >'$TMP/sl.txt' && test \$(grep -c '^sleep .*asleep: device free +[0-9.]* MiB, exactly its whole reservation' '$TMP/sl.txt') -eq 3 && test \$(grep -c '^wake .*woken: [0-9.]* MiB mapped again' '$TMP/sl.txt') -eq 2 && grep -q '^unload .*asleep: domain released with its host copy' '$TMP/sl.txt' && grep -q 'released 0 B; device free == baseline' '$TMP/sl.txt'"
# docs/engine.md's --sleep table: each wake maps only the pages under the
# weights, 36 MiB of the 42 MiB the domain held before its first sleep
check "--sleep A B A B (text): each wake maps 36.00 MiB, not the 42.00 MiB slept" sh -c \
    "test \$(grep -c '^wake .*woken: 36.00 MiB mapped again, 34.10 MiB copied back, same addresses' '$TMP/sl.txt') -eq 2 && test \$(grep -c '^sleep .*asleep: device free +42.00 MiB, exactly its whole reservation (44040192 B)' '$TMP/sl.txt') -eq 2"
check "--sleep A A: the same model sleeps and wakes in place of a reload; one model: no sleep" sh -c \
    "'$CCRUN' --device host --sleep 'mlp:64x64x10' 'mlp:64x64x10' >'$TMP/sa.txt' && test \$(grep -c '^sleep ' '$TMP/sa.txt') -eq 1 && test \$(grep -c '^load ' '$TMP/sa.txt') -eq 1 && grep -q '= its first run' '$TMP/sa.txt' && '$CCRUN' --device host --sleep 'mlp:64x64x10' >'$TMP/s1.txt' && ! grep -q '^sleep ' '$TMP/s1.txt'"
check "--help's usage of --demo lists --conf (the demo takes it)" sh -c \
    "'$CCRUN' --help | grep -q -- '--vm-backing pages|whole-maps\] \[--conf STR\]'"
check "--help's usage of --demo lists every option the demo takes (batch, iters, seed, timeline too)" sh -c \
    "'$CCRUN' --help | sed -n '/ccrun --demo/,/^\$/p' >'$TMP/du.txt' && for o in device capacity vm-granularity vm-backing conf batch iters seed timeline; do grep -q -- \"\\[--\$o \" '$TMP/du.txt' || { echo \"missing --\$o\"; exit 1; }; done"
check "--help lists --sleep, and says the last turn is not slept (one model: no sleep, above)" sh -c \
    "'$CCRUN' --help | grep -q -- '--sleep  ' && '$CCRUN' --help | grep -q -- \"end each MODEL's turn but the last with a sleep\""
expect 1 "cannot sleep: the allocator has classic segments" -- --sleep --conf expandable:0 "mlp:64x64" "mlp:32x32"
check "--sleep with classic segments: refused before the first model loads" sh -c \
    "! '$CCRUN' --device host --sleep --conf expandable:0 'mlp:64x64' 'mlp:32x32' >'$TMP/sc.txt' 2>/dev/null && ! grep -q '^load ' '$TMP/sc.txt'"
expect 2 "--sleep needs memory domains, which policy greedy cannot have (allocator config 'policy:greedy')" -- --sleep --conf policy:greedy "mlp:4x4" "mlp:4x4"
check "--sleep --conf policy:greedy: refused before the engine opens (no table; --json: one document, no device)" sh -c \
    "! '$CCRUN' --device host --sleep --conf policy:greedy 'mlp:4x4' 'mlp:4x4' >'$TMP/sg.txt' 2>/dev/null && test ! -s '$TMP/sg.txt' && ! '$CCRUN' --device host --sleep --json --conf policy:greedy 'mlp:4x4' 'mlp:4x4' >'$TMP/sg.json' 2>/dev/null && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[\"device\"] is None and \"policy greedy\" in d[\"error\"], d' '$TMP/sg.json'"
expect 2 "--sleep needs memory domains, which policy greedy cannot have (allocator config 'policy:growth,max_reserved:1G,policy:greedy')" -- --sleep --policy growth --conf max_reserved:1G,policy:greedy "mlp:4x4" "mlp:4x4"
expect 2 "--sleep takes no --resident" -- --sleep --resident "mlp:4x4" "mlp:4x4"
# docs/release.md, "Greedy vs growth in numbers": on 1 GiB the greedy arena
# is 922.00 MiB over expandable segments (whole 2 MiB pages), 921.60 MiB over
# classic ones; released whole after each model without --keep-cache
check "greedy on 1 GiB keeps 922.00 MiB, 921.60 MiB with expandable:0" sh -c \
    "'$CCRUN' --device host --policy greedy --keep-cache --iters 1 mlp:4x4 | grep -q 'the process still holds 922.00 MiB' && '$CCRUN' --device host --policy greedy --conf expandable:0 --keep-cache --iters 1 mlp:4x4 | grep -q 'the process still holds 921.60 MiB' && '$CCRUN' --device host --policy greedy --iters 1 mlp:4x4 mlp:4x4 | grep -c 'released 922.00 MiB; device free == baseline' | grep -qx 2"
# docs/release.md, "Domains in traces": the recorded --resident command's
# unloads return +98, +34, +98 MiB over classic segments, +102, +42, +102 MiB
# over expandable ones (the resident model's 22 MiB at the end in both)
RES="--capacity 1G --iters 1 --batch 32 --resident mlp:512x2048x2048x10:relu:softmax mlp:1024x4096x4096x1024:relu mlp:512x8192x512:gelu mlp:1024x4096x4096x1024:relu"
rises() { "$CCRUN" --device host "$@" $RES | sed -n 's/.*device free +\([0-9.]*\) MiB, exactly.*/\1/p' | paste -sd' ' -; }
n=$((n + 1))
if [ "$(rises --conf expandable:0)" = "98.00 34.00 98.00 22.00" ] && [ "$(rises)" = "102.00 42.00 102.00 22.00" ]; then
    echo "ok: the recorded --resident command's unloads: 98/34/98 MiB classic, 102/42/102 expandable"
else
    echo "FAIL: the recorded --resident command's unloads: '$(rises --conf expandable:0)' classic, '$(rises)' expandable"
    fails=$((fails + 1))
fi
# docs/engine.md, "How a forward pass uses memory": the timeline figure's
# table (its command at one pass a model): --no-domains leaves the cache
# reserved at each unload, the default gives each model's domain back there
TL="mlp:256x2048x2048x256x10:relu:softmax mlp:256x1024x1024x1024x10:gelu:softmax"
check "the timeline figure's unload rows: --no-domains keeps 42 and 22 MiB reserved" sh -c \
    "'$CCRUN' --device host --capacity 256M --batch 512 --iters 1 --no-domains $TL >'$TMP/tl.txt' && grep '^unload' '$TMP/tl.txt' | head -1 | grep -q ' 0 B   42.00 MiB  214.00 MiB' && grep '^unload' '$TMP/tl.txt' | tail -1 | grep -q ' 0 B   22.00 MiB  234.00 MiB'"
# the same 42 MiB is one free stretch per range by default, two medium segments and a small one when classic
check "the timeline figure's first unload: fragmentation 0.048 over pages, 0.524 over classic segments" sh -c \
    "'$CCRUN' --device host --capacity 256M --batch 512 --iters 1 --no-domains $TL >'$TMP/tl.txt' && grep '^unload' '$TMP/tl.txt' | head -1 | grep -q ' 42.00 MiB  214.00 MiB  0.048 ' && '$CCRUN' --device host --capacity 256M --batch 512 --iters 1 --no-domains --conf expandable:0 $TL >'$TMP/tl.txt' && grep '^unload' '$TMP/tl.txt' | head -1 | grep -q ' 42.00 MiB  214.00 MiB  0.524 '"
check "the timeline figure's unload rows: with domains 0 B reserved, 256 MiB free" sh -c \
    "'$CCRUN' --device host --capacity 256M --batch 512 --iters 1 $TL >'$TMP/tl.txt' && test \$(grep -c '^unload .* 0 B         0 B  256.00 MiB' '$TMP/tl.txt') -eq 2"
# docs/engine.md, "The timeline CSV", lists the events and the phases a
# timeline marks: every one these runs write is listed there, and each
# listed one is written (a sleep and a wake; --resident with --no-domains
# trims; a model too large for the device writes an oom row)
doc_events="alloc free oom phase"
doc_phases="create load loaded run unload idle release sleep asleep wake awake trim"
"$CCRUN" --device host --timeline "$TMP/ph1.csv" --sleep mlp:16x16:seed=1 mlp:16x16:seed=2 mlp:16x16:seed=1 >/dev/null 2>&1
"$CCRUN" --device host --timeline "$TMP/ph2.csv" --no-domains --resident mlp:16x16 mlp:8x8 >/dev/null 2>&1
"$CCRUN" --device host --capacity 64M --timeline "$TMP/ph3.csv" mlp:4096x4096x4096:relu >/dev/null 2>&1
seen_events=$(cat "$TMP/ph1.csv" "$TMP/ph2.csv" "$TMP/ph3.csv" | grep -v '^t_ms,' | cut -d, -f2 | sort -u | tr '\n' ' ')
seen_phases=$(cat "$TMP/ph1.csv" "$TMP/ph2.csv" "$TMP/ph3.csv" | grep -v '^t_ms,' | grep '^[^,]*,phase,' | cut -d, -f3 | sort -u | tr '\n' ' ')
undocumented="" unseen=""
for e in $seen_events; do case " $doc_events " in *" $e "*) ;; *) undocumented="$undocumented event:$e" ;; esac; done
for p in $seen_phases; do case " $doc_phases " in *" $p "*) ;; *) undocumented="$undocumented phase:$p" ;; esac; done
for e in $doc_events; do case " $seen_events" in *" $e "*) ;; *) unseen="$unseen event:$e" ;; esac; done
for p in $doc_phases; do case " $seen_phases" in *" $p "*) ;; *) unseen="$unseen phase:$p" ;; esac; done
n=$((n + 1))
if [ -z "$undocumented$unseen" ]; then
    echo "ok: the timeline's events and phases are the ones docs/engine.md lists"
else
    echo "FAIL: timeline rows: not in docs/engine.md:${undocumented:- none}; listed there but not written:${unseen:- none}"
    fails=$((fails + 1))
fi
expect 2 "--sleep needs memory domains: not with --no-domains" -- --sleep --no-domains "mlp:4x4" "mlp:4x4"
expect 2 "--sleep needs memory domains: not with --keep-cache" -- --sleep --keep-cache "mlp:4x4" "mlp:4x4"
expect 2 "policy greedy cannot have" -- --sleep --policy greedy "mlp:4x4" "mlp:4x4"
expect 2 "--demo takes no --sleep" -- --demo --sleep
# the demo's acts choose their policy, cache and domains themselves: options
# that would change them are refused, never silently ignored
for opt in "--policy greedy" "--policy growth" --keep-cache --no-domains --footprint-sidecar; do
    expect 2 "--demo takes no ${opt%% *}: its acts" -- --demo $opt
done
check "--keep-cache implies no domains" sh -c \
    "'$CCRUN' --device host --keep-cache 'mlp:64x64' | grep -q 'no memory domains'"
expect 2 "--demo takes no --resident" -- --demo --resident "mlp:4x4"
expect 2 "--save needs exactly one MODEL and no --resident" -- --save "$TMP/x.safetensors" --resident "mlp:4x4" "mlp:4x4"
expect 2 "at most 8 times" -- --resident m1 --resident m2 --resident m3 --resident m4 --resident m5 --resident m6 --resident m7 --resident m8 --resident m9
expect 1 "cannot open" -- --resident "$TMP/missing.safetensors" "mlp:4x4"
expect 1 "cannot open" -- --resident "mlp:64x64" "$TMP/missing.safetensors"
# footprint sidecars: written at unload, read by the next process; a hostile one is ignored with a warning
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/fp.safetensors"
check "--footprint-sidecar: the first run writes FILE.ccfoot, the second reserves it up front" sh -c \
    "'$CCRUN' --device host --footprint-sidecar '$TMP/fp.safetensors' >/dev/null && grep -q '^reserved_peak 2097152\$' '$TMP/fp.safetensors.ccfoot' && '$CCRUN' --device host --footprint-sidecar '$TMP/fp.safetensors' | grep -q 'footprint 2.00 MiB reserved up front (1 upstream call), then 0 upstream calls'"
printf 'ccfoot 1\narch mlp:64x32x10:relu:softmax\nbatch 8\nreserved_peak 99999999999\n' >"$TMP/fp.safetensors.ccfoot"
check "--footprint-sidecar: a hostile sidecar is ignored with a warning, the run succeeds" sh -c \
    "'$CCRUN' --device host --footprint-sidecar '$TMP/fp.safetensors' >'$TMP/fo' 2>'$TMP/fe' && grep -q 'ignored' '$TMP/fe' && ! grep -q 'footprint' '$TMP/fo'"

# --snapshot FILE: hostile paths fail the run with the reason, nothing is half-done silently
check "--snapshot into a missing directory fails with the reason (exit 1)" sh -c \
    "'$CCRUN' --device host --snapshot '$TMP/snapdir-missing/s.pickle' 'mlp:8x8' >/dev/null 2>'$TMP/se'; test \$? -eq 1 && grep -q -- '--snapshot .*No such file or directory' '$TMP/se'"
ln -sf /dev/full "$TMP/full.pickle"
check "--snapshot whose write fails (a full device) fails with the path and the reason (exit 1)" sh -c \
    "'$CCRUN' --device host --snapshot '$TMP/full.pickle' 'mlp:8x8' >/dev/null 2>'$TMP/sf'; test \$? -eq 1 && grep -q -- '--snapshot $TMP/full.pickle: cca_write_snapshot_torch: write failed: No space left on device' '$TMP/sf'"
ln -sf /dev/full "$TMP/full.json"
check "--snapshot FILE.json whose write fails fails with the path and the reason (exit 1)" sh -c \
    "'$CCRUN' --device host --snapshot '$TMP/full.json' 'mlp:8x8' >/dev/null 2>'$TMP/sj'; test \$? -eq 1 && grep -q -- '--snapshot $TMP/full.json: .*No space left on device' '$TMP/sj'"
check "--snapshot is refused with --demo and for other suffixes (exit 2)" sh -c \
    "'$CCRUN' --demo --device host --snapshot '$TMP/d.pickle' >/dev/null 2>&1; test \$? -eq 2 && '$CCRUN' --device host --snapshot '$TMP/s.txt' 'mlp:8x8' >/dev/null 2>&1; test \$? -eq 2 && test ! -e '$TMP/s.txt'"
check "--snapshot FILE.json writes the JSON snapshot of the loaded model" sh -c \
    "'$CCRUN' --device host --snapshot '$TMP/s.json' 'mlp:16x32x4' >/dev/null && python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); assert d['stats']['allocated_bytes'] > 0 and d['segments']\" '$TMP/s.json'"

# Two outputs on one file (any spelling: ./X, X//, d/../X, a symlink, a hard
# link, a symlink to a file not yet made), an output on a MODEL file, or on
# the file standard output goes to: refused before anything runs (exit 2),
# naming both, and nothing is written.
mkdir -p "$TMP/sd/sub"
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/sd/in.safetensors"
: >"$TMP/sd/real.json"
ln -s real.json "$TMP/sd/link.json"
ln "$TMP/sd/real.json" "$TMP/sd/hard.json"
ln -s new.json "$TMP/sd/dangling.json"
# same OUT WORDS ARGS...: exit 2, WORDS in stderr, no file made or changed in $TMP/sd
same() {
    desc=$1 words=$2; shift 2
    n=$((n + 1))
    ls -l "$TMP/sd" "$TMP/sd/sub" >"$TMP/sd-before"
    (cd "$TMP/sd" && "$CCRUN" --device host "$@" >"$TMP/sdo" 2>"$TMP/sde")
    rc=$?
    ls -l "$TMP/sd" "$TMP/sd/sub" >"$TMP/sd-after"
    if [ "$rc" -ne 2 ] || ! grep -qF -- "$words" "$TMP/sde" || ! grep -qF "(see ccrun --help)" "$TMP/sde" ||
        ! cmp -s "$TMP/sd-before" "$TMP/sd-after" || [ -e "$TMP/sd/new.json" ]; then
        echo "FAIL: $desc: exit $rc, want 2 and '$words', nothing written:"; cat "$TMP/sde"
        diff "$TMP/sd-before" "$TMP/sd-after"; fails=$((fails + 1))
    else
        echo "ok: $desc: $(head -1 "$TMP/sde")"
    fi
}
same "--timeline and --snapshot on one new file" \
    "--timeline 'o.json' and --snapshot 'o.json' are the same file" --timeline o.json --snapshot o.json 'mlp:8x8'
same "./X and X" "--timeline './o.json' and --snapshot 'o.json' are the same file" \
    --timeline ./o.json --snapshot o.json 'mlp:8x8'
same "X spelled with // and sub/.." "--save 'sub/..//o.json' and --snapshot '$TMP/sd/./o.json' are the same file" \
    --save 'sub/..//o.json' --snapshot "$TMP/sd/./o.json" 'mlp:8x8'
same "a symlink and its existing file" "--timeline 'link.json' and --snapshot 'real.json' are the same file" \
    --timeline link.json --snapshot real.json 'mlp:8x8'
same "a hard link and its file" "--save 'hard.json' and --snapshot 'real.json' are the same file" \
    --save hard.json --snapshot real.json 'mlp:8x8'
same "a dangling symlink and the file it would make" \
    "--timeline 'dangling.json' and --snapshot 'new.json' are the same file" \
    --timeline dangling.json --snapshot new.json 'mlp:8x8'
same "--timeline on the MODEL file" "--timeline 'in.safetensors' is the same file as MODEL './in.safetensors'" \
    --timeline in.safetensors ./in.safetensors
same "--save on the MODEL file" "--save 'in.safetensors' is the same file as MODEL 'in.safetensors'" \
    --save in.safetensors in.safetensors
same "--snapshot on a --resident file" "--snapshot 'real.json' is the same file as --resident 'hard.json'" \
    --snapshot real.json --resident hard.json 'mlp:8x8'
same "--timeline on a MODEL's footprint sidecar" \
    "--timeline 'in.safetensors.ccfoot' and --footprint-sidecar 'in.safetensors.ccfoot' are the same file" \
    --footprint-sidecar --timeline in.safetensors.ccfoot in.safetensors
same "--demo --timeline on the file standard output goes to" \
    "standard output and --timeline '$TMP/sdo' are the same file" --demo --timeline "$TMP/sdo"
same "--timeline on the file standard error goes to" "standard error and --timeline '$TMP/sde' are the same file" \
    --timeline "$TMP/sde" 'mlp:8x8'
# CCALLOC_TRACE is an output too: the library empties the file when the
# first allocator is made, before the first load (a MODEL named there was
# lost, exit 1 on a header of trace lines; on --timeline or standard
# output the two writers mixed their lines, exit 0); %p is ccrun's own id
export CCALLOC_TRACE=in.safetensors
same "CCALLOC_TRACE on the MODEL file" "CCALLOC_TRACE 'in.safetensors' is the same file as MODEL './in.safetensors'" \
    ./in.safetensors
export CCALLOC_TRACE=real.json
same "CCALLOC_TRACE on --timeline's file" "CCALLOC_TRACE 'real.json' and --timeline 'hard.json' are the same file" \
    --timeline hard.json 'mlp:8x8'
export CCALLOC_TRACE="$TMP/sdo"
same "CCALLOC_TRACE on the file standard output goes to" \
    "standard output and CCALLOC_TRACE '$TMP/sdo' are the same file" 'mlp:8x8'
export CCALLOC_TRACE="$TMP/sd/new%%.json"
same "CCALLOC_TRACE with %% on --snapshot's new file" \
    "CCALLOC_TRACE '$TMP/sd/new%.json' and --snapshot 'new%.json' are the same file" --snapshot 'new%.json' 'mlp:8x8'
unset CCALLOC_TRACE
# A MODEL's footprint sidecar is read at load and a new one renamed over its
# name at unload: standard output or error sent there would be lost with the
# file it replaces (the run exited 0, the table gone), and an output on a hard
# link to it wipes it before it is read. Both are refused (exit 2).
for fd in 1 2; do
    n=$((n + 1))
    rm -f "$TMP/sd/in.safetensors.ccfoot"
    if [ $fd = 1 ]; then
        (cd "$TMP/sd" && "$CCRUN" --device host --footprint-sidecar in.safetensors >in.safetensors.ccfoot 2>"$TMP/sde")
        rc=$?
    else
        (cd "$TMP/sd" && "$CCRUN" --device host --footprint-sidecar in.safetensors 2>in.safetensors.ccfoot >"$TMP/sdo")
        rc=$?
        cp "$TMP/sd/in.safetensors.ccfoot" "$TMP/sde"
    fi
    stream=$([ $fd = 1 ] && echo output || echo error)
    want="standard $stream and --footprint-sidecar 'in.safetensors.ccfoot' are the same file"
    if [ "$rc" -eq 2 ] && grep -qF -- "$want" "$TMP/sde"; then
        echo "ok: standard $stream sent to a MODEL's footprint sidecar refused"
    else
        echo "FAIL: standard $stream sent to a MODEL's footprint sidecar: exit $rc, want 2 and '$want':"
        cat "$TMP/sde"; fails=$((fails + 1))
    fi
done
rm -f "$TMP/sd/in.safetensors.ccfoot"
(cd "$TMP/sd" && "$CCRUN" --device host --footprint-sidecar in.safetensors >/dev/null 2>&1)
ln "$TMP/sd/in.safetensors.ccfoot" "$TMP/sd/h.csv"
same "--timeline on a hard link to a MODEL's existing footprint sidecar" \
    "--timeline 'h.csv' and --footprint-sidecar 'in.safetensors.ccfoot' are the same file" \
    --footprint-sidecar --timeline h.csv in.safetensors
rm -f "$TMP/sd/in.safetensors.ccfoot" "$TMP/sd/h.csv"
check "outputs on one device file that is not a regular file (/dev/null) are not refused" sh -c \
    "'$CCRUN' --device host --timeline /dev/null --save /dev/null 'mlp:8x8' >/dev/null"
check "two outputs on different files still run" sh -c \
    "cd '$TMP/sd' && '$CCRUN' --device host --timeline o.csv --snapshot o.json 'mlp:8x8' >/dev/null && test -s o.csv && test -s o.json"

# Outputs that cannot be written completely (a full device) are said on
# stderr with the path (or "standard output") and the reason, and ccrun
# exits 1 however the run went (a model with NaN weights, exit 4 otherwise,
# too); nothing is written silently in part.
full() { # full DESCRIPTION WORDS STDOUT ARGS...: exit 1 and WORDS in stderr
    desc=$1 words=$2 out=$3; shift 3
    n=$((n + 1))
    "$CCRUN" "$@" >"$out" 2>"$TMP/fe"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -qF -- "$words" "$TMP/fe"; then echo "ok: $desc"; else
        echo "FAIL: $desc: exit $rc, want 1 and '$words' in stderr:"; cat "$TMP/fe"; fails=$((fails + 1)); fi
}
NOSPACE='write failed: No space left on device'
# an output that cannot be created is the same kind of failure (exit 1) for
# --timeline as for --snapshot and --save (--timeline exited 2, a usage error)
full "--timeline in a missing directory: exit 1 naming the file" "/nonexistent-ccrun-dir/t.csv" /dev/null \
    --device host --timeline /nonexistent-ccrun-dir/t.csv 'mlp:8x8'
full "the table on a full standard output: exit 1 with the reason" "ccrun: standard output: $NOSPACE" /dev/full \
    --device host 'mlp:8x8'
full "--json on a full standard output: exit 1 with the reason" "ccrun: standard output: $NOSPACE" /dev/full \
    --device host --json 'mlp:8x8'
full "a full standard output takes precedence over exit 4 (NaN weights)" "ccrun: standard output: $NOSPACE" /dev/full \
    --device host "$TMP/nan.safetensors"
full "--timeline on a full device: exit 1 naming the file" "ccrun: error: --timeline /dev/full: $NOSPACE" /dev/null \
    --device host --timeline /dev/full 'mlp:8x8'
full "--timeline on a full device with --json: exit 1 naming the file" "ccrun: error: --timeline /dev/full: $NOSPACE" /dev/null \
    --device host --json --timeline /dev/full 'mlp:8x8'
full "--save on a full device: exit 1 naming the file" "/dev/full: $NOSPACE" /dev/null \
    --device host --save /dev/full 'mlp:8x8'
full "--help on a full standard output: exit 1 with the reason" "ccrun: standard output: $NOSPACE" /dev/full \
    --help
# a file cut short by a file-size limit (SIGXFSZ ignored; sh's ulimit -f
# counts 512-byte blocks) is left as it is, a prefix, and exit 1 says so
# (docs/engine.md, "Outputs are checked to the end")
for out in --save:s.safetensors --snapshot:s.json --timeline:t.csv; do
    opt=${out%%:*} f=$TMP/cut-${out#*:}
    check "$opt past the file-size limit: exit 1 naming the file, 1024 bytes left" sh -c \
        "(trap '' XFSZ && ulimit -f 2 && exec '$CCRUN' --device host $opt '$f' 'mlp:64x64') >/dev/null 2>'$TMP/fe'; test \$? -eq 1 && grep -qF '$f' '$TMP/fe' && grep -qF 'File too large' '$TMP/fe' && test \$(wc -c <'$f') -eq 1024"
done
full "--demo on a full standard output: exit 1 with the reason" "ccrun: standard output: $NOSPACE" /dev/full \
    --demo --device host --capacity 192M --iters 1
# An allocator trace that could not be written (CCALLOC_TRACE on a full
# device) is an output that failed, as --timeline is: exit 1 with the
# allocator's message, whatever the run (a table, --json: the document's
# "error" too, as the run knows it before the document; --sleep); in the
# demo a failed step under the act (its run shared with --timeline's and a
# missing TMPDIR's: a demo takes seconds).
traced_full() { # traced_full DESCRIPTION WORDS... -- ARGS...: CCALLOC_TRACE=$TF_TRACE (/dev/full), exit 1, each WORDS said
    desc=$1; shift
    n=$((n + 1))
    words=
    while [ "$1" != -- ]; do words="$words
$1"; shift; done
    shift
    CCALLOC_TRACE=${TF_TRACE:-/dev/full} TMPDIR=${TF_TMPDIR:-${TMPDIR:-}} "$CCRUN" "$@" >"$TMP/to" 2>"$TMP/te"
    rc=$?
    missing=$(printf '%s\n' "$words" | while IFS= read -r w; do [ -z "$w" ] || cat "$TMP/to" "$TMP/te" | grep -qF -- "$w" || echo "$w"; done)
    if [ "$rc" -eq 1 ] && [ -z "$missing" ]; then echo "ok: $desc"; else
        echo "FAIL: $desc: exit $rc, want 1 and said: $missing"; cat "$TMP/te"; fails=$((fails + 1)); fi
}
TRACE_FULL="CCALLOC_TRACE: cca_trace_mark: writing the trace failed, the recording is incomplete: '/dev/full'"
traced_full "CCALLOC_TRACE on a full device: exit 1 with the reason" "ccrun: error: $TRACE_FULL" -- \
    --device host 'mlp:8x8'
traced_full "CCALLOC_TRACE on a full device with --json: exit 1 with the reason, the document's error" \
    "ccrun: error: $TRACE_FULL" "\"error\": \"$TRACE_FULL\"" -- \
    --device host --json 'mlp:8x8'
traced_full "CCALLOC_TRACE on a full device with --sleep: exit 1 with the reason" "ccrun: error: $TRACE_FULL" -- \
    --device host --sleep 'mlp:8x8' 'mlp:8x4' 'mlp:8x8'
check "CCALLOC_TRACE on a full device: the trace's error is the run's, said once" sh -c \
    "CCALLOC_TRACE=/dev/full '$CCRUN' --device host 'mlp:8x8' >/dev/null 2>'$TMP/te1'; test \$? -eq 1 && test \$(grep -c '^ccrun: error: ' '$TMP/te1') -eq 1"
# A run that failed keeps its own error (the --json "error" too); the
# trace's is said once, after it, and the exit status stays 1.
check "CCALLOC_TRACE on a full device, a model that does not fit: its error first, the trace's once after, the document's error the model's" sh -c \
    "CCALLOC_TRACE=/dev/full '$CCRUN' --device host --capacity 4M --json 'mlp:2048x2048' >'$TMP/tj' 2>'$TMP/te'; test \$? -eq 1 && grep '^ccrun: error: ' '$TMP/te' | cut -c1-48 | tr '\\n' '|' | grep -qxF \"ccrun: error: model 'mlp:2048x2048' (16.01 MiB o|ccrun: error: CCALLOC_TRACE: cca_trace_mark: wri|\" && grep '^  \"error\": \"model ' '$TMP/tj' | grep -qF 'of weights) does not fit on host (4.00 MiB)'"
# ... and a TMPDIR where act 5 cannot save model A: skipped, with the reason
TF_TMPDIR=$TMP/none
traced_full "--demo with --timeline and CCALLOC_TRACE on full devices, TMPDIR missing: exit 1 naming each" \
    "ccrun: error: --timeline /dev/full: $NOSPACE" "          -> $TRACE_FULL" \
    "          -> save skipped: cannot create a temporary file in $TMP/none: No such file or directory" -- \
    --demo --device host --capacity 192M --iters 1 --timeline /dev/full
TF_TMPDIR=
# A trace the allocator could not open (a missing directory) is an output
# that failed too: exit 1 naming the file and the reason (--json: the
# document's "error"; the demo: a failed step).
TF_TRACE=$TMP/none/t.csv
TRACE_REFUSED="CCALLOC_TRACE: cca_trace_status: not tracing: cannot open for writing (No such file or directory): '$TMP/none/t.csv'"
traced_full "CCALLOC_TRACE in a missing directory: exit 1 naming the file and the reason" \
    "ccrun: error: $TRACE_REFUSED" -- --device host 'mlp:8x8'
traced_full "CCALLOC_TRACE in a missing directory with --json: exit 1, the document's error" \
    "ccrun: error: $TRACE_REFUSED" "\"error\": \"$TRACE_REFUSED\"" -- --device host --json 'mlp:8x8'
traced_full "CCALLOC_TRACE in a missing directory with --demo: exit 1, a failed step naming it" \
    "          -> $TRACE_REFUSED" -- --demo --device host --capacity 192M --iters 1
TF_TRACE=

# Standard output closed (>&-): a run that prints nothing there is not a
# failure (GNU close_stdout: EBADF at the close is ignored when nothing was
# written), one that prints its table fails with the reason; and no file
# ccrun opens takes the closed descriptor, so the table never lands in the
# timeline (it did: fopen reused descriptor 1).
closed() { # closed DESCRIPTION CODE WORDS UNWANTED ARGS...
    desc=$1 code=$2 words=$3 unwanted=$4; shift 4
    n=$((n + 1))
    (cd "$TMP" && "$CCRUN" "$@" >&- 2>"$TMP/ce")
    rc=$?
    if [ "$rc" -eq "$code" ] && grep -qF -- "$words" "$TMP/ce" && ! grep -qF -- "$unwanted" "$TMP/ce"; then
        echo "ok: $desc"
    else
        echo "FAIL: $desc: exit $rc, want $code, '$words' and not '$unwanted' in stderr:"; cat "$TMP/ce"
        fails=$((fails + 1))
    fi
}
closed "a usage error with standard output closed: exit 2, nothing said of standard output" 2 \
    "unknown option '--nope'" "standard output" --device host --nope
closed "the table on a closed standard output: exit 1 with the reason" 1 \
    "ccrun: standard output: write failed: Bad file descriptor" "--timeline" --device host 'mlp:8x8'
rm -f "$TMP/closed.csv"
closed "--timeline with standard output closed: exit 1, the table not in the timeline" 1 \
    "ccrun: standard output: write failed: Bad file descriptor" "--timeline" \
    --device host --timeline "$TMP/closed.csv" 'mlp:8x8'
check "--timeline with standard output closed: the timeline holds CSV rows only" sh -c \
    "head -1 '$TMP/closed.csv' | grep -q '^t_ms,event,' && ! grep -q 'allocator defaults\|^phase ' '$TMP/closed.csv'"

# An output naming a FIFO that no process reads: fopen for writing would wait
# for a reader for ever; refused at once (exit 1, naming the file and why),
# as --snapshot and CCALLOC_TRACE are. `timeout` turns a hang into a failure.
mkfifo "$TMP/fifo.json" 2>/dev/null && {
    for opt in --timeline --save --snapshot; do
        n=$((n + 1))
        timeout 20 "$CCRUN" --device host "$opt" "$TMP/fifo.json" 'mlp:8x8' >/dev/null 2>"$TMP/fe"
        rc=$?
        if [ "$rc" -eq 1 ] && grep -qF -- "$TMP/fifo.json" "$TMP/fe" && grep -qF "a FIFO nobody reads" "$TMP/fe"; then
            echo "ok: $opt on a FIFO nobody reads: exit 1, said"
        else
            echo "FAIL: $opt on a FIFO nobody reads: exit $rc (124: hung), want 1 naming the file and the FIFO:"
            cat "$TMP/fe"; fails=$((fails + 1))
        fi
    done
}

# A FIFO as a MODEL (or --resident): fopen for reading would wait for a
# writer for ever; refused at once as not a regular file (exit 1, naming it).
mkfifo "$TMP/fifo.safetensors" 2>/dev/null && {
    for args in "$TMP/fifo.safetensors" "--resident $TMP/fifo.safetensors mlp:8x8"; do
        n=$((n + 1))
        # shellcheck disable=SC2086 # args is split on purpose
        timeout 20 "$CCRUN" --device host $args >/dev/null 2>"$TMP/fe"
        rc=$?
        if [ "$rc" -eq 1 ] && grep -qF -- "$TMP/fifo.safetensors: not a regular file (a FIFO)" "$TMP/fe"; then
            echo "ok: a FIFO as the model ($args): exit 1, said"
        else
            echo "FAIL: a FIFO as the model ($args): exit $rc (124: hung), want 1 naming the file and the FIFO:"
            cat "$TMP/fe"; fails=$((fails + 1))
        fi
    done
}

# one model file twice, with footprint sidecars: two inputs and two sidecars
# on one file are no clash (both are read, the sidecar rewritten in turn)
cp "$SRC/tests/fixtures/digits_mlp.safetensors" "$TMP/twice.safetensors"
check "a model file given twice, with --footprint-sidecar, runs (exit 0)" \
    "$CCRUN" --device host --footprint-sidecar "$TMP/twice.safetensors" "$TMP/twice.safetensors"
# a MODEL whose batches fail while a resident stays loaded: exit 1 (the
# resident's later runs succeed, but the failure stands)
expect 1 "batch 100000 of model 'mlp:1024x1024' needs at least" -- --batch 100000 --resident "mlp:4x4" "mlp:1024x1024"
# the banner's allocator config: --snapshot FILE.pickle adds history:65536
# (no comma after it without --conf), FILE.json nothing; --policy with an
# empty --conf has no comma either
banner() { # banner WANT ARGS...: the banner line ends '; WANT'
    want=$1; shift
    n=$((n + 1))
    "$CCRUN" --device host --capacity 64M "$@" "mlp:4x4" >"$TMP/bo" 2>"$TMP/be"
    if [ "$(head -1 "$TMP/bo" | sed 's/.*; //')" = "$want" ]; then
        echo "ok: ccrun $*: the banner ends '$want'"
    else
        echo "FAIL: ccrun $*: the banner is not '...; $want':"; head -1 "$TMP/bo"; cat "$TMP/be"
        fails=$((fails + 1))
    fi
}
banner "allocator history:65536" --snapshot "$TMP/b.pickle"
banner "allocator defaults (growth)" --snapshot "$TMP/b.json"
banner "allocator policy:growth" --policy growth --conf ""
# the table's columns: a model of 34 characters is shown whole, and the
# figures end in the same column as the header's names (the allocated
# column at 56) for it and for a short one
M34='mlp:16x16:relu:softmax:seed=123456'
n=$((n + 1))
"$CCRUN" --device host --capacity 64M "$M34" "mlp:4x4" >"$TMP/co" 2>"$TMP/ce"
if awk -v m="$M34" '
    /^phase / { ok += substr($0, 47, 10) == " allocated" }
    /^load / { ok += substr($0, 56, 1) != " " && substr($0, 57, 1) == " " }
    /^load / && substr($0, 11, 34) == m { whole = 1 }
    END { exit !(ok == 3 && whole) }' "$TMP/co"; then
    echo "ok: the table's columns line up; a 34-character model is shown whole"
else
    echo "FAIL: the table's columns or a 34-character model:"; cat "$TMP/co"; fails=$((fails + 1))
fi

# the model column counts display columns, not bytes: names with wide
# (CJK) and two-byte (Cyrillic, accented) characters, a control written
# \xNN, and paths cut to their tail all end their allocated figure at
# column 56 (East Asian Wide and Fullwidth as 2 columns, by Python's
# unicodedata); a cut name fills its 34 columns exactly, or 33 when its
# next wide character would pass them
n=$((n + 1))
E="$(printf 'x\033y')"
mkdir -p "$TMP/w/$E"
"$CCRUN" --device host --save "$TMP/w/模型-модель-ü.safetensors" mlp:4x4 >/dev/null
cp "$TMP/w/模型-модель-ü.safetensors" "$TMP/w/模型-模型-模型-模型-模型-模型-模型-ü.safetensors"
cp "$TMP/w/模型-модель-ü.safetensors" "$TMP/w/模-ü.st"
ACC=$(printf 'e\314\201%.0s' $(seq 40)) # e + U+0301 (combining acute), 40 times: 40 columns
cp "$TMP/w/模型-модель-ü.safetensors" "$TMP/w/$ACC.st"
CCRUN_ABS=$(realpath "$CCRUN")
(cd "$TMP/w" && "$CCRUN_ABS" --device host --capacity 64M "模型-модель-ü.safetensors" "$E/../模-ü.st" \
    "$TMP/w/$E/../模型-модель-ü.safetensors" "$E/../模型-模型-模型-模型-模型-模型-模型-ü.safetensors" "$ACC.st" mlp:4x4 \
    mlp:16x16:relu:softmax:seed=1234567890123456789 \
    >"$TMP/wo" 2>"$TMP/we")
if python3 - "$TMP/wo" "$TMP/w" <<'PY'; then
import sys, unicodedata
def cols(s):
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)
text = open(sys.argv[1], encoding="utf-8").read()
rows = [l for l in text.splitlines() if l.startswith("load ")]
assert len(rows) == 7 and "\x1b" not in text, text
for l in rows:
    assert cols(l[:l.index(" KiB") + 4]) == 56, l
names = [l[10:].split("  ")[0] for l in rows]
assert names[0] == "模型-модель-ü.safetensors" and names[1] == "x\\x1by/../模-ü.st", names
assert [n[:3] == "..." for n in names] == [False, False, True, True, True, False, False], names
assert names[6] == "mlp:16x16:relu:softmax:seed=123...", names[6]  # a spec keeps its head
# a cut never leaves a combining mark first, on the "..."
assert names[4][3] == "e" and names[4].endswith("e\u0301.st") and cols(names[4]) == 34, names[4]
# cut between characters (an escape is one): 31 columns at most, then "...",
# and the next character before them would pass 31
full = [sys.argv[2] + "/x\\x1by/../模型-модель-ü.safetensors", "x\\x1by/../" + "模型-" * 7 + "ü.safetensors"]
for n, f in zip(names[2:4], full):
    tail, more = n[3:], f[:len(f) - len(n) + 3]
    unit = more[-4:] if more.endswith("\\x1b") else more[-1:]
    assert f.endswith(tail) and cols(tail) <= 31 < cols(unit + tail), (n, f)
PY
    echo "ok: the model column counts display columns: wide, two-byte and escaped names line up"
else
    echo "FAIL: the model column with wide or escaped names:"; cat "$TMP/wo" "$TMP/we"; fails=$((fails + 1))
fi

# a run on the simulated device loads no cuBLAS (kernels/src/cublas.c loads
# it at the first GPU context): the loader's own record of the files it
# opened, checked to name the C library, so a silent LD_DEBUG cannot pass
n=$((n + 1))
LD_DEBUG=files "$CCRUN" --device host --capacity 64M mlp:8x8x2 >/dev/null 2>"$TMP/ld"
if ! grep -q 'file=libc\.so' "$TMP/ld"; then
    echo "FAIL: LD_DEBUG=files recorded no file opened: cannot check what a CPU run loads"; fails=$((fails + 1))
elif grep -q 'file=libcublas' "$TMP/ld"; then
    echo "FAIL: a run on the simulated device loaded cuBLAS:"; grep 'file=libcublas' "$TMP/ld"; fails=$((fails + 1))
else
    echo "ok: a run on the simulated device loads no cuBLAS"
fi

echo "$((n - fails)) of $n ccrun checks passed"
[ "$fails" -eq 0 ]
