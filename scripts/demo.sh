#!/usr/bin/env bash
# Install missing dependencies, build, and run the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
if [ -x build/runtime/ccrun ]; then
  exec build/runtime/ccrun --demo "$@"
else
  exec build/allocator/pool_demo
fi
