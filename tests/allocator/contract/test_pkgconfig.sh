#!/usr/bin/env bash
# test_pkgconfig.sh SRC — the ccalloc.pc that `cmake --install` puts in
# LIBDIR/pkgconfig leads pkg-config to the installed header and library,
# whatever CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR are:
#   - lib/x86_64-linux-gnu, two levels (GNUInstallDirs' LIBDIR on Debian for
#     the prefix /usr, and what Debian's packaging passes), checked again
#     after the whole prefix is moved (a relative LIBDIR: the file finds the
#     prefix from its own directory);
#   - absolute directories (what Nix passes), used as they are.
# The .pc is written at configure time, so each case configures the allocator
# alone (no build, no CUDA), copies the .pc where the install would put it, and
# lays a header and a library beside it for pkg-config's paths to lead to.
set -u
SRC=$(cd "${1:-$(dirname "$0")/../../..}" && pwd)
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0

# resolved DIR: the directory, symbolic links and .. resolved; empty if none
resolved() { (cd "$1" 2>/dev/null && pwd -P); }

# expect PCDIR INCDIR LIBDIR CASE: pkg-config --cflags/--libs, run on the .pc in
# PCDIR, name INCDIR (holding ccalloc.h) and LIBDIR (holding libccalloc.so)
expect() {
    local inc lib want_inc want_lib
    inc=$(PKG_CONFIG_PATH="$1" pkg-config --cflags-only-I ccalloc | sed 's/^ *-I//; s/ *$//')
    lib=$(PKG_CONFIG_PATH="$1" pkg-config --libs-only-L ccalloc | sed 's/^ *-L//; s/ *$//')
    want_inc=$(resolved "$2") want_lib=$(resolved "$3")
    if [ "$(resolved "$inc")" = "$want_inc" ] && [ -f "$inc/ccalloc.h" ] &&
        [ "$(resolved "$lib")" = "$want_lib" ] && [ -f "$lib/libccalloc.so" ]; then
        echo "ok: $4: -I$inc -L$lib"
    else
        echo "FAIL: $4: pkg-config gives -I'$inc' -L'$lib', the install has $want_inc and $want_lib"
        fails=$((fails + 1))
    fi
}

# install_pc CASE PREFIX LIBDIR INCLUDEDIR: configure with those, then lay out
# what the install would: PREFIX's (or the absolute) include and lib dirs
install_pc() {
    local b="$W/build-$1" libdir=$3 incdir=$4
    if ! cmake -S "$SRC" -B "$b" -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_KERNELS=OFF -DCCA_BUILD_RUNTIME=OFF \
        -DCCA_BUILD_BENCH=OFF -DCCA_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$2" \
        -DCMAKE_INSTALL_LIBDIR="$libdir" -DCMAKE_INSTALL_INCLUDEDIR="$incdir" >"$W/$1.log" 2>&1; then
        echo "FAIL: $1: configure failed:"
        tail -5 "$W/$1.log"
        exit 1
    fi
    case $libdir in /*) ;; *) libdir=$2/$libdir ;; esac
    case $incdir in /*) ;; *) incdir=$2/$incdir ;; esac
    mkdir -p "$libdir/pkgconfig" "$incdir"
    cp "$b/allocator/ccalloc.pc" "$libdir/pkgconfig/"
    : >"$incdir/ccalloc.h"
    : >"$libdir/libccalloc.so"
}

install_pc multiarch "$W/usr" lib/x86_64-linux-gnu include
expect "$W/usr/lib/x86_64-linux-gnu/pkgconfig" "$W/usr/include" "$W/usr/lib/x86_64-linux-gnu" \
    "LIBDIR lib/x86_64-linux-gnu"
mv "$W/usr" "$W/moved"
expect "$W/moved/lib/x86_64-linux-gnu/pkgconfig" "$W/moved/include" "$W/moved/lib/x86_64-linux-gnu" \
    "LIBDIR lib/x86_64-linux-gnu, the prefix moved"

install_pc absolute "$W/prefix" "$W/store/lib" "$W/store-dev/include"
expect "$W/store/lib/pkgconfig" "$W/store-dev/include" "$W/store/lib" "absolute LIBDIR and INCLUDEDIR"

[ "$fails" -eq 0 ] || exit 1
echo "ccalloc.pc: every layout leads to the installed header and library"
