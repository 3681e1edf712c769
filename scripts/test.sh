#!/usr/bin/env bash
# Install missing dependencies, then build and run the whole test suite:
#   1. the normal build (CUDA code included when the toolkit exists) and every
#      CTest suite (GPU suites skip with a reason when no GPU is present);
#   2. the host build under AddressSanitizer + UndefinedBehaviorSanitizer
#      (without OpenBLAS and without AVX2 clones, so the fallback GEMM and
#      the baseline vector code are tested too), and
#      the allocator's threaded stress program under ThreadSanitizer;
#   3. the installed package consumed by an outside project (CMake + pkg-config);
#   4. short libFuzzer runs of every input parser (scripts/fuzz.sh): the model
#      loader, the spec and sidecar texts, the JSON and pickle writers,
#      CCALLOC_CONF, ccbench's traces,
#      and the allocator's API action by action against a model.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scripts/deps.sh

echo "== 1/4 build + tests =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

echo "== 2/4 sanitizers (ASan + UBSan, host build) =="
# also the build without OpenBLAS (the host GEMM is then the built-in blocked
# loop) and without AVX2 clones (the baseline vector code runs, whatever the CPU)
# the allocator at assertion level 2: every public call ends with the full
# invariant walk (CCA_DEBUG, allocator/src/core/internal.h)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCCA_SANITIZE=ON -DCCA_DEBUG=2 -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_BENCH=ON \
  -DCCK_USE_OPENBLAS=OFF -DCCK_VECTOR_CLONES=OFF >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
   ctest --output-on-failure -j"$jobs")

echo "== 2b ThreadSanitizer (allocator, threaded stress) =="
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCA_TSAN=ON -DCCA_ENABLE_CUDA=OFF >/dev/null
cmake --build build-tsan --target tsan_programs -j"$jobs"
(cd build-tsan && ctest --output-on-failure)

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

echo "== 4/4 fuzzing =="
scripts/fuzz.sh loader 30   # the safetensors loader under libFuzzer, 30 s
scripts/fuzz.sh api 30      # the allocator's API, action by action against a model, 30 s
for target in text json config trace; do # spec + sidecar, JSON/pickle writers, CCALLOC_CONF, traces: 20 s each
  scripts/fuzz.sh "$target" 20
done
echo "all test stages passed"
