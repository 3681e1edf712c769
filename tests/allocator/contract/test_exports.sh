#!/bin/sh
# test_exports.sh LIB HEADER — the shared library exports exactly the public
# API: every function symbol it defines for the dynamic linker is a cca_
# function the header declares, and every one the header declares is among them.
set -eu
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWw]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -o '^[a-z][^(]*\bcca_[a-z0-9_]*(' "$header" | grep -o 'cca_[a-z0-9_]*(' | tr -d '(' | sort -u)
bad=0
others=$(printf '%s\n' "$exported" | grep -v '^cca_' || true)
if [ -n "$others" ]; then
    echo "exported but not public API:"
    printf '  %s\n' $others
    bad=1
fi
# a cca_ function the header does not declare is no API either (README: "the cca_
# functions of ccalloc.h and nothing else")
undeclared=$(printf '%s\n' "$exported" | grep '^cca_' | while read -r f; do printf '%s\n' "$declared" | grep -qx "$f" || echo "$f"; done)
if [ -n "$undeclared" ]; then
    echo "exported but not declared in $(basename "$header"):"
    printf '  %s\n' $undeclared
    bad=1
fi
missing=$(printf '%s\n' "$declared" | while read -r f; do printf '%s\n' "$exported" | grep -qx "$f" || echo "$f"; done)
if [ -n "$missing" ]; then
    echo "declared in $(basename "$header") but not exported:"
    printf '  %s\n' $missing
    bad=1
fi
[ -n "$declared" ] || { echo "no cca_ declarations found in $header"; bad=1; }
echo "$(printf '%s\n' "$declared" | wc -l) public functions declared, $(printf '%s\n' "$exported" | wc -l) exported"
exit $bad
