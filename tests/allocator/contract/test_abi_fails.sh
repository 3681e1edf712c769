#!/bin/sh
# test_abi_fails.sh LIB SRCDIR — test_abi.sh fails on every kind of change
# it is there for, against copies of ccalloc.h and the records:
#   - a copy under a directory whose name has spaces passes as it is;
#   - the ABI record differing from the library (abidiff): a struct of
#     another size (cca_release_report, as if a field had been added), a
#     function the record lacks (one added since) fails it, status 1,
#     abidiff's report naming the type or the function;
#   - a macro value abidiff cannot see (a flag's value, an option value's,
#     a limit's, a macro removed, one added) fails it, status 1, the macro
#     named;
#   - CCA_VERSION_PATCH changed (a patch release) passes.
# Skipped (77) where test_abi.sh is.
# Costs: one test_abi.sh run per case, under a second each.
set -u
lib=$1 src=$2
script=$src/tests/allocator/contract/test_abi.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/a src dir"
fail=0
# run_case NAME SED-EXPRESSION WANT-STATUS WANT-TEXT [RECORD-SED-EXPRESSION]
# (the first edits the header's copy, the last the ABI record's)
run_case() {
    rm -rf "$copy"
    mkdir -p "$copy/allocator/include"
    cp -R "$src/allocator/abi" "$copy/allocator/abi"
    sed "$2" "$src/allocator/include/ccalloc.h" >"$copy/allocator/include/ccalloc.h"
    if [ $# -ge 5 ]; then
        for r in "$copy"/allocator/abi/*.abi; do
            sed "$5" "$r" >"$tmp/record" && cp "$tmp/record" "$r"
        done
    fi
    sh "$script" "$lib" "$copy" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then
        cat "$tmp/out"
        exit 77
    fi
    if [ $rc -ne "$3" ] || ! grep -q -- "$4" "$tmp/out"; then
        echo "FAIL $1: status $rc (want $3), output lacks '$4':"
        cat "$tmp/out"
        fail=1
    else
        echo "ok $1"
    fi
}
run_case unchanged 's/^//' 0 'ABI as recorded'
run_case struct_size 's/^//' 1 "cca_release_report" \
    "s/<class-decl name='cca_release_report' size-in-bits='[0-9]*'/<class-decl name='cca_release_report' size-in-bits='704'/"
run_case function_added 's/^//' 1 "cca_trim" "/<elf-symbol name='cca_trim' /d"
run_case flag_value 's/^#define CCA_DOMAIN_FORCE 1u/#define CCA_DOMAIN_FORCE 4u/' 1 '^+#define CCA_DOMAIN_FORCE 4u'
run_case option_value 's/^#define CCA_VM_PAGES 1 /#define CCA_VM_PAGES 2 /' 1 '^+#define CCA_VM_PAGES 2'
run_case limit 's/^#define CCA_MARK_MAX 63/#define CCA_MARK_MAX 127/' 1 '^+#define CCA_MARK_MAX 127'
run_case removed '/^#define CCA_SLEEP_DISCARD /d' 1 '^-#define CCA_SLEEP_DISCARD 1u'
run_case added 's/^#define CCA_MARK_MAX 63/&\n#define CCA_NEW_LIMIT 9/' 1 '^+#define CCA_NEW_LIMIT 9'
run_case patch 's/^#define CCA_VERSION_PATCH 0/#define CCA_VERSION_PATCH 7/' 0 'ABI as recorded'
exit $fail
