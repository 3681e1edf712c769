#!/usr/bin/env bash
# test_package_deps.sh SRC — find_package(ccalloc) asks for no package that
# its libraries do not link. Built with CCA_CUDA_RUNTIME=dlopen, libccalloc
# finds the CUDA runtime at run time and links no CUDA library (one library
# for machines with and without CUDA), so a project using the installed
# package must configure on a machine with no CUDA toolkit: here, with
# CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit.
# No build: configuring writes the package's files (ccallocConfig*.cmake, and
# the targets files under CMakeFiles/Export/), laid out here as the install
# would, beside empty stand-ins for the header and libraries they name.
# Needs the CUDA toolkit's headers (tests/allocator/package.cmake registers
# it only then): without them nothing of CUDA is built.
set -u
SRC=$(cd "${1:-$(dirname "$0")/../../..}" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
b=$W/build p=$W/prefix

if ! cmake -S "$SRC" -B "$b" -DCCA_CUDA_RUNTIME=dlopen -DCCA_BUILD_KERNELS=OFF -DCCA_BUILD_RUNTIME=OFF \
    -DCCA_BUILD_BENCH=OFF -DCCA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_LIBDIR=lib \
    >"$W/ccalloc.log" 2>&1; then
    echo "FAIL: configuring ccalloc (dlopen) failed:"
    tail -5 "$W/ccalloc.log"
    exit 1
fi
grep -q 'CUDA upstream is built (runtime: dlopen)' "$W/ccalloc.log" ||
    { echo "FAIL: the dlopen configuration built no CUDA upstream:"; grep ccalloc: "$W/ccalloc.log"; exit 1; }

mkdir -p "$p/lib/cmake/ccalloc" "$p/include"
cp "$b"/allocator/ccallocConfig.cmake "$b"/allocator/ccallocConfigVersion.cmake \
    "$b"/allocator/CMakeFiles/Export/*/ccalloc*.cmake "$p/lib/cmake/ccalloc/"
: >"$p/include/ccalloc.h"
sed -n 's/.*"\${_IMPORT_PREFIX}\/\([^"]*\)".*/\1/p' "$p"/lib/cmake/ccalloc/ccallocTargets-*.cmake |
    while read -r f; do : >"$p/$f"; done

mkdir -p "$W/consumer"
cat >"$W/consumer/CMakeLists.txt" <<'EOC'
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(ccalloc 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE ccalloc::ccalloc)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE ccalloc::ccalloc_static)
EOC
echo 'int main(void) { return 0; }' >"$W/consumer/main.c"
if ! cmake -S "$W/consumer" -B "$W/consumer/build" -DCMAKE_PREFIX_PATH="$p" \
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON >"$W/consumer.log" 2>&1; then
    echo "FAIL: a project using the dlopen package does not configure without CUDAToolkit:"
    grep -v '^--' "$W/consumer.log" | head -8
    exit 1
fi
echo "ok: the dlopen package configures a consumer (shared and static) with no CUDA toolkit"
