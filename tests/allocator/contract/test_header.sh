#!/usr/bin/env bash
# test_header.sh INCLUDEDIR — ccalloc.h as the programs that include it
# compile it, with -Werror:
#   - C99, C11, C17 (gcc and clang) and C++11, 14, 17, 20 (g++ and clang++)
#     under strict warnings (-Wpedantic, -Wconversion, -Wundef, -Wshadow; in
#     C++ -Wold-style-cast and -Wzero-as-null-pointer-constant too), included
#     twice, every object-like CCA_ macro used in an expression;
#   - after a program's own object-like printf and format macros (a program
#     sending printf to its log does that): the header's attributes must
#     use the reserved spellings;
#   - every name it defines carries the public prefix: macros CCA_ (and the
#     guard CCALLOC_H), types, tags and functions cca_; nothing of the
#     internal ccai_.
# A compiler that is missing is named and skipped; gcc and g++ must exist.
set -u
INC=$(cd "${1:-$(dirname "$0")/../../../allocator/include}" && pwd)
H=$INC/ccalloc.h
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0

# every object-like CCA_ macro, used once
{
    echo '#include <ccalloc.h>'
    echo '#include <ccalloc.h>'
    echo 'static void use_every_macro(void) {'
    sed -n 's/^#define \(CCA_[A-Z0-9_]*\)\([ \t].*\)\{0,1\}$/    (void)(\1);/p' "$H"
    echo '}'
    echo 'int main(void) { use_every_macro(); return (int)CCA_OK; }'
} >"$W/use.c"
cp "$W/use.c" "$W/use.cpp"
sed -i 's/return (int)CCA_OK;/return static_cast<int>(CCA_OK);/' "$W/use.cpp"
grep -c '(void)(CCA_' "$W/use.c" | grep -qv '^0$' || { echo "FAIL: no CCA_ macro found in $H"; exit 1; }

C_WARN="-Wall -Wextra -Wpedantic -Werror -Wstrict-prototypes -Wconversion -Wsign-conversion -Wundef -Wshadow -Wcast-qual"
CXX_WARN="-Wall -Wextra -Wpedantic -Werror -Wconversion -Wsign-conversion -Wundef -Wshadow -Wold-style-cast
 -Wzero-as-null-pointer-constant"

# compiles COMPILER STD SOURCE WHAT [FLAGS...]
compiles() {
    local cc=$1 std=$2 src=$3 what=$4 out
    shift 4
    if ! command -v "$cc" >/dev/null; then
        case $cc in gcc | g++) echo "FAIL: $cc not found"; fails=$((fails + 1)) ;; *) echo "skip: $cc not found" ;; esac
        return
    fi
    # shellcheck disable=SC2086 # the warning lists are words
    if out=$("$cc" -std="$std" "$@" -I"$INC" -fsyntax-only "$src" 2>&1); then
        echo "ok: $cc -std=$std: $what"
    else
        echo "FAIL: $cc -std=$std: $what:"
        printf '%s\n' "$out" | head -n 6 | sed 's/^/    /'
        fails=$((fails + 1))
    fi
}

for cc in gcc clang; do
    for std in c99 c11 c17; do
        # shellcheck disable=SC2086
        compiles $cc $std "$W/use.c" "included twice, every macro used" $C_WARN
    done
    compiles $cc c11 "$W/use.c" "after #define printf and format" -Wall -Werror -Dprintf=prog_printf -Dformat=prog_format
done
for cxx in g++ clang++; do
    for std in c++11 c++14 c++17 c++20; do
        # shellcheck disable=SC2086
        compiles $cxx $std "$W/use.cpp" "included twice, every macro used" $CXX_WARN
    done
    compiles $cxx c++17 "$W/use.cpp" "after #define printf and format" -Wall -Werror -Dprintf=prog_printf -Dformat=prog_format
done

# names: comments and strings dropped, then every defined name checked
code=$(gcc -fpreprocessed -dD -E -P "$H" 2>/dev/null)
bad=$(printf '%s\n' "$code" | sed -n 's/^#define \([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' | grep -v '^CCA_\|^CCALLOC_H$')
bad="$bad $(printf '%s\n' "$code" | grep -o '\b\(struct\|enum\|union\) [A-Za-z_][A-Za-z0-9_]*' | awk '{print $2}' | grep -v '^cca_')"
bad="$bad $(printf '%s\n' "$code" | sed -n 's/^} \([A-Za-z_][A-Za-z0-9_]*\);$/\1/p; s/^typedef .*[ *(]\([A-Za-z_][A-Za-z0-9_]*\)\()(.*\)\{0,1\};$/\1/p' | grep -v '^cca_')"
bad="$bad $(printf '%s\n' "$code" | grep -o '\bccai_[A-Za-z0-9_]*')"
# functions, as gcc lists the prototypes it read (-aux-info)
echo '#include <ccalloc.h>' >"$W/decl.c"
if gcc -I"$INC" -aux-info "$W/aux" -fsyntax-only "$W/decl.c" && grep -qF 'ccalloc.h:' "$W/aux"; then
    bad="$bad $(grep -F 'ccalloc.h:' "$W/aux" | sed -n 's|^/\* [^*]* \*/ [^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\) (.*|\1|p' |
        grep -v '^cca_')"
else
    echo "FAIL: gcc -aux-info listed no prototype of ccalloc.h"
    fails=$((fails + 1))
fi
bad=$(printf '%s\n' "$bad" | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
if [ -n "$bad" ]; then
    echo "FAIL: names without the public prefix: $bad"
    fails=$((fails + 1))
else
    echo "ok: every macro CCA_, every type and function cca_, no ccai_"
fi

[ "$fails" -eq 0 ] || exit 1
echo "ccalloc.h: compiles clean in every standard, every name prefixed"
