#!/usr/bin/env bash
# scripts/fuzz.sh's target list, refused before anything is configured or
# built (exit 2, one line naming the fault): an unknown target, alone or
# beside a known one, an empty name (",", "loader,", ",api", "a,,b"), a
# target named twice, SECONDS that are not a whole number in 1..2^31-1.
# Needs no build and no clang: a refusal happens before either is used.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(mktemp -d)"
trap 'rm -rf "$BUILD"' EXIT
fails=0 cases=0
refused() { # TARGETS WORDS [SECONDS]: exit 2, WORDS on stderr, nothing made in the build dir
    local err dir="$BUILD/case$((++cases))"
    err=$(CCA_FUZZ_BUILD="$dir" sh "$ROOT/scripts/fuzz.sh" "$1" "${3:-1}" 2>&1 >/dev/null)
    local rc=$?
    if [ "$rc" -ne 2 ] || ! grep -qF -- "$2" <<<"$err" || [ -e "$dir" ]; then
        echo "FAIL: fuzz.sh '$1': exit $rc, '$err' (want 2 and '$2', no build dir)"
        fails=$((fails + 1))
    else
        echo "ok: fuzz.sh '$1' refused: $err"
    fi
}
refused nope "unknown target 'nope'"
refused loader,nope "unknown target 'nope'"
refused nope,loader "unknown target 'nope'"
refused , "an empty target name in ','"
refused loader, "an empty target name in 'loader,'"
refused ,api "an empty target name in ',api'"
refused loader,,api "an empty target name in 'loader,,api'"
refused "" "usage: scripts/fuzz.sh"
refused api,api "target 'api' named twice"
refused loader,text,loader "target 'loader' named twice"
refused loader "SECONDS must be a whole number above 0, not '0'" 0
refused loader "not '-5'" -5
refused loader,api "not '1.5'" 1.5
refused config "not '30s'" 30s
# 0 written with leading zeros is 0 (libFuzzer's -max_total_time=0 runs
# for ever), and libFuzzer keeps the seconds in an int: above 2^31 - 1
# they would not be the time asked for
refused loader "SECONDS must be a whole number above 0, not '00'" 00
refused loader "not '000'" 000
refused loader "SECONDS must be at most 2147483647, not '2147483648'" 2147483648
refused loader "at most 2147483647, not '99999999999999999999999'" 99999999999999999999999
refused loader "at most 2147483647, not '0000000000002147483648'" 0000000000002147483648
refused loader "not '+5'" +5
refused loader "not ' 5'" " 5"
refused loader "not '0x10'" 0x10
exit $((fails != 0))
