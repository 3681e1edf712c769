#!/bin/sh
# Build the loader's libFuzzer target with clang (ASan + UBSan) and run it:
# scripts/fuzz.sh loader, kept under its old name.
#
#   runtime/fuzz/run.sh [SECONDS]      # default 60
#
# scripts/fuzz.sh says how (build dir build-fuzz/, seeds, findings in
# build-fuzz/fuzz-artifacts/) and runs the other targets too.
set -eu
exec "$(dirname "$0")/../../scripts/fuzz.sh" loader "${1:-60}"
