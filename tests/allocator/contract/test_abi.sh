#!/bin/sh
# test_abi.sh LIB SRCDIR [--write] — no change to the shared library's ABI
# goes unnoticed:
#   - allocator/abi/SONAME.abi records the ABI (libabigail's abixml: every
#     exported function's signature and every type reachable from one, as
#     ccalloc.h defines it) of the library that soname names;
#   - any difference fails, printed by abidiff. A change that only adds (a
#     new function) keeps the soname: rewrite the record with --write and
#     commit it. Any other change (a field added to a struct, a parameter, a
#     function removed) breaks programs built against a released library of
#     that soname: once the soname is released (a tag vMAJOR.MINOR.PATCH),
#     bump CCA_VERSION_MINOR (before 1.0) or MAJOR first; then --write.
#     Either way the change shows in the commit as a change to the record;
#   - what abidiff cannot see: the values of ccalloc.h's macros, which a
#     program compiles in (CCA_DOMAIN_FORCE passed as a flag, CCA_VM_PAGES
#     stored in an option, CCA_DOMAIN_NAME_MAX sizing its buffer): every
#     object-like CCA_ macro as the C preprocessor defines it (but
#     CCA_VERSION_PATCH, which a patch release changes) is recorded beside
#     the ABI, allocator/abi/SONAME.macros, and any difference fails the
#     same way (a value changed, a macro removed, or one added);
#   - not seen at all: what a function does with its arguments (a default,
#     a unit, a flag's meaning), inline code and function-like macros;
#   - skipped (status 77), saying why, for a library without DWARF (a build
#     without -g: abidw would see symbols only; the README's test command
#     builds RelWithDebInfo) or without libabigail's tools (Debian:
#     abigail-tools, which scripts/deps.sh installs).
# Costs: abidw and abidiff, under a second each; one preprocessor run ($CC,
# else cc).
set -eu
lib=$1 src=$2 mode=${3:-check}
for tool in abidw abidiff; do
    command -v $tool >/dev/null || { echo "SKIP: no $tool (Debian: apt-get install abigail-tools)"; exit 77; }
done
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[ -n "$soname" ] || { echo "$lib has no soname"; exit 1; }
record=$src/allocator/abi/$soname.abi
macros=$src/allocator/abi/$soname.macros
if ! objdump -h "$lib" | grep -q '\.debug_info'; then
    echo "SKIP: $lib has no debug information (built without -g): its ABI cannot be read"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# only the types ccalloc.h defines and the functions the library exports;
# no source locations, paths or DT_NEEDED (a dlopen build needs no libcudart)
abidw --headers-dir "$src/allocator/include" --drop-private-types --no-corpus-path --no-comp-dir-path \
    --no-show-locs --no-elf-needed --out-file "$tmp/built.abi" "$lib"
# the macros' values (object-like CCA_ macros; a function-like one has '(' after its name)
${CC:-cc} -dM -E -x c "$src/allocator/include/ccalloc.h" >"$tmp/all.macros"
grep -E '^#define CCA_[A-Z0-9_]+ ' "$tmp/all.macros" | grep -v '^#define CCA_VERSION_PATCH ' | LC_ALL=C sort \
    >"$tmp/built.macros"
case $mode in
--write)
    mkdir -p "$(dirname "$record")"
    cp "$tmp/built.abi" "$record"
    cp "$tmp/built.macros" "$macros"
    echo "wrote $record and $macros"
    exit 0
    ;;
check) ;;
*)
    echo "usage: test_abi.sh LIB SRCDIR [--write]"
    exit 2
    ;;
esac
if [ ! -f "$record" ] || [ ! -f "$macros" ]; then
    echo "no ABI recorded for $soname ($record, $macros): if this soname is new, record it with"
    echo "  sh tests/allocator/contract/test_abi.sh $lib $src --write"
    exit 1
fi
if abidiff --no-show-locs "$record" "$tmp/built.abi" >"$tmp/diff" 2>&1; then
    rc=0
else
    rc=$?
fi
if diff -u "$macros" "$tmp/built.macros" >"$tmp/macros.diff"; then
    [ $rc -ne 0 ] || {
        echo "$soname: ABI as recorded ($(grep -c '<elf-symbol ' "$record") symbols, $(wc -l <"$macros") macros)"
        exit 0
    }
else
    cat "$tmp/macros.diff"
    echo "$soname: ccalloc.h's macros changed (above: - recorded, + now)."
fi
[ $rc -eq 0 ] || cat "$tmp/diff"
# abidiff's status is a bit field: 1 its own error, 2 bad usage, 4 the ABI
# changed, 8 incompatibly (a symbol removed)
if [ $rc -eq 0 ]; then
    :
elif [ $((rc & 3)) -ne 0 ]; then
    echo "abidiff failed (status $rc)"
elif [ $((rc & 8)) -ne 0 ]; then
    echo "$soname: the ABI changed incompatibly (above)."
else
    echo "$soname: the ABI changed (above)."
fi
echo "Only additions: --write the record and commit it. A changed type or signature, or a removal, once"
echo "$soname is released: bump CCA_VERSION_MINOR (MAJOR from 1.0) first. Then record it with"
echo "  sh tests/allocator/contract/test_abi.sh $lib $src --write"
exit 1
