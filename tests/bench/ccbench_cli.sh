#!/bin/sh
# ccbench_cli.sh — one ccbench command line checked end to end, for the CLI
# tests of tests/bench/bench.cmake (exit status AND what it said; CTest's
# PASS_REGULAR_EXPRESSION alone ignores the exit status):
#
#   ccbench_cli.sh CCBENCH CODE WANT UNWANTED STDOUT ARGS...
#
# runs `CCBENCH ARGS` with stdout to STDOUT ("-": captured, /dev/full: a full
# device, "closed": no standard output at all, `>&-`) and passes when the
# exit status is CODE, stdout (when captured) and stderr together match the
# extended regular expression WANT ("" for no such check), and they do not
# match UNWANTED ("" for no such check). Needs only a POSIX shell and grep.
set -u
ccbench=$1 code=$2 want=$3 unwanted=$4 stdout=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$stdout" = - ]; then
    "$ccbench" "$@" >"$tmp/out" 2>"$tmp/err"
elif [ "$stdout" = closed ]; then
    "$ccbench" "$@" >&- 2>"$tmp/err"
else
    "$ccbench" "$@" >"$stdout" 2>"$tmp/err"
fi
rc=$?
[ -f "$tmp/out" ] || : >"$tmp/out"
cat "$tmp/out" "$tmp/err" >"$tmp/all"
cat "$tmp/all"
echo "-- ccbench $*: exit status $rc (want $code)"
fail=0
if [ "$rc" -ne "$code" ]; then
    echo "FAIL: exit status $rc, want $code"
    fail=1
fi
if [ -n "$want" ] && ! grep -Eq -- "$want" "$tmp/all"; then
    echo "FAIL: the output does not match '$want'"
    fail=1
fi
if [ -n "$unwanted" ] && grep -Eq -- "$unwanted" "$tmp/all"; then
    echo "FAIL: the output matches '$unwanted':"
    grep -E -- "$unwanted" "$tmp/all" | head -5
    fail=1
fi
exit $fail
