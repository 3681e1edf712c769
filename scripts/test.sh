#!/usr/bin/env bash
# Install missing dependencies, then build and run the whole test suite:
#   1. the normal build (CUDA code included when the toolkit exists) and every
#      CTest suite (GPU suites skip with a reason when no GPU is present);
#   2. the host build under AddressSanitizer + UndefinedBehaviorSanitizer
#      (without AVX2 clones, so the baseline vector code is tested too), and
#      the threaded programs (the allocator's, the engine's) under ThreadSanitizer;
#   3. the installed package consumed by an outside project (CMake + pkg-config);
#   4. short libFuzzer runs of every input parser (scripts/fuzz.sh), two side
#      by side: the model loader, the spec and sidecar texts, the JSON and
#      pickle writers, CCALLOC_CONF, ccbench's traces, and the allocator's
#      API action by action against a model.
# Each stage's wall time is printed at the end: CI allows 25 minutes in all.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# each stage's wall time, printed at the end (CI's budget is 25 minutes)
times="stage seconds:" start=$SECONDS
stage() {
  times="$times
$1: $((SECONDS - start))"
  start=$SECONDS
}
scripts/deps.sh
stage "dependencies"

echo "== 1/4 build + tests =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")
stage "1/4 build + tests"

echo "== 2/4 sanitizers (ASan + UBSan, host build) =="
# also the build without AVX2 clones (the baseline vector code runs, whatever
# the CPU); the host GEMM is OpenBLAS, as in stage 1 (ON explicitly: a build-asan
# configured by an older script keeps OFF in its cache): the kernel suite runs the
# built-in blocked loop directly (cck_dense_host_blocked), and the fuzz build
# of stage 4 is the configuration without OpenBLAS (the loader's fuzzer runs
# models through the loop). With the loop behind every engine suite this
# stage took 2 minutes longer: test_ccrun 160 s instead of 33 s.
# The allocator at assertion level 2: every public call ends with the full
# invariant walk (CCA_DEBUG, allocator/src/core/internal.h)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCCA_SANITIZE=ON -DCCA_DEBUG=2 -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_BENCH=ON \
  -DCCK_USE_OPENBLAS=ON -DCCK_VECTOR_CLONES=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# the longest suites first, by what each took in stage 1 (CTest starts tests
# in descending cost; a fresh build has no costs, and its long suites, run
# last, left one core idle at the end)
mkdir -p build-asan/Testing/Temporary
cp build/Testing/Temporary/CTestCostData.txt build-asan/Testing/Temporary/
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs")
stage "2/4 sanitizers"

echo "== 2b ThreadSanitizer (allocator and engine, threaded programs) =="
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCA_TSAN=ON -DCCA_ENABLE_CUDA=OFF >/dev/null
cmake --build build-tsan --target tsan_programs -j"$jobs"
(cd build-tsan && ctest --output-on-failure -j"$jobs")
stage "2b ThreadSanitizer"

echo "== 3/4 installed package =="
rm -rf build-install
cmake --install build --prefix "$PWD/build-install/prefix" >/dev/null
cmake -S allocator/examples/consumer -B build-install/consumer -DCMAKE_PREFIX_PATH="$PWD/build-install/prefix" >/dev/null
cmake --build build-install/consumer >/dev/null
build-install/consumer/consumer
PKG_CONFIG_PATH="$PWD/build-install/prefix/lib/pkgconfig" \
  cc -std=c11 allocator/examples/consumer/main.c -o build-install/consumer-pc \
  $(PKG_CONFIG_PATH="$PWD/build-install/prefix/lib/pkgconfig" pkg-config --cflags --libs ccalloc) \
  -Wl,-rpath,"$PWD/build-install/prefix/lib"
build-install/consumer-pc
echo "installed package: CMake and pkg-config consumers built and ran"
stage "3/4 installed package"

echo "== 4/4 fuzzing =="
# two side by side (one per core): the safetensors loader and the allocator's
# API action by action against a model, 30 s; then spec + sidecar with the
# JSON/pickle writers, CCALLOC_CONF with ccbench's traces, 20 s each pair
scripts/fuzz.sh loader,api 30
scripts/fuzz.sh text,json 20
scripts/fuzz.sh config,trace 20
stage "4/4 fuzzing"
echo "all test stages passed"
echo "$times" | sed 's/^/  /'

