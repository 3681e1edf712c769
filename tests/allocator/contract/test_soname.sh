#!/bin/sh
# test_soname.sh LIB HEADER VERSIONFILE — one version, one compatibility rule:
#   - ccalloc.h's CCA_VERSION_MAJOR.MINOR.PATCH is the CMake package's
#     version (VERSIONFILE, ccallocConfigVersion.cmake) and the shared
#     library's real name (libccalloc.so.MAJOR.MINOR.PATCH);
#   - the soname changes exactly when the CMake package calls versions
#     incompatible (SameMinorVersion before 1.0: 0.1 and 0.2 differ): while
#     MAJOR is 0 it is libccalloc.so.0.MINOR, from 1.0 on libccalloc.so.MAJOR.
#     A program built against 0.1 must not load a 0.2 library whose structs
#     may have changed;
#   - a version range is accepted only within versions of this soname
#     (CMake's rule for that compatibility, as the README says).
set -eu
lib=$1 header=$2 versionfile=$3
macro() { sed -n "s/^#define CCA_VERSION_$1 \([0-9]*\)\$/\1/p" "$header"; }
major=$(macro MAJOR) minor=$(macro MINOR) patch=$(macro PATCH)
version=$major.$minor.$patch
package=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$versionfile")
# compatible WANTED: what the CMake package answers find_package(ccalloc WANTED)
compatible() {
    # shellcheck disable=SC2016 # CMake's ${...}, expanded by cmake -P
    printf '%s\n' 'set(PACKAGE_FIND_VERSION "${V}")' 'string(REPLACE "." ";" parts "${V}")' \
        'list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)' 'list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)' \
        'set(CMAKE_SIZEOF_VOID_P 8)' 'include("${F}")' 'message("${PACKAGE_VERSION_COMPATIBLE}")' >"$tmp"
    cmake -DV="$1" -DF="$versionfile" -P "$tmp" 2>&1
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
if [ "$major" = 0 ]; then want=libccalloc.so.0.$minor; else want=libccalloc.so.$major; fi
bad=0
[ "$package" = "$version" ] || { echo "ccalloc.h says $version, the CMake package $package"; bad=1; }
[ "$(basename "$lib")" = "libccalloc.so.$version" ] ||
    { echo "ccalloc.h says $version, the library is $(basename "$lib")"; bad=1; }
# a program that asked for MAJOR.MINOR is given this library, whose soname is
# its; one that asked for MAJOR.(MINOR-1) is given it only if the soname is
# the same (from 1.0 on), never before 1.0
[ "$(compatible "$major.$minor")" = TRUE ] ||
    { echo "the CMake package refuses $major.$minor, which has its soname"; bad=1; }
if [ "$minor" -gt 0 ]; then
    older=$major.$((minor - 1)) answer=$(compatible "$major.$((minor - 1))")
    if [ "$major" = 0 ] && [ "$answer" != FALSE ]; then
        echo "the CMake package accepts $older, whose soname (libccalloc.so.$older) differs"
        bad=1
    elif [ "$major" != 0 ] && [ "$answer" != TRUE ]; then
        echo "the CMake package refuses $older, whose soname (libccalloc.so.$major) is the same"
        bad=1
    fi
fi
# a version range (find_package(ccalloc A...B), CMake 3.19+) is answered by
# CMake's rule for the same compatibility: accepted only when the whole range
# lies within versions of this soname (README, "Versions"); checked by
# find_package itself, on a project of no language (no compiler run) whose
# ccalloc_DIR holds this version file beside an empty config file
found() {
    # shellcheck disable=SC2016 # CMake's ${...}, expanded by cmake
    printf '%s\n' 'cmake_minimum_required(VERSION 3.19)' 'project(p NONE)' "find_package(ccalloc $1 QUIET)" \
        'message("${ccalloc_FOUND}")' >"$rdir/p/CMakeLists.txt"
    rm -rf "$rdir/b"
    cmake -S "$rdir/p" -B "$rdir/b" -Dccalloc_DIR="$rdir/pkg" 2>&1 | sed -n '1p'
}
rdir=$(mktemp -d)
trap 'rm -f "$tmp"; rm -rf "$rdir"' EXIT
mkdir -p "$rdir/p" "$rdir/pkg"
cp "$versionfile" "$rdir/pkg/"
: >"$rdir/pkg/ccallocConfig.cmake"
if [ "$major" = 0 ]; then
    wide="$major.$minor...$major.$((minor + 2))" # other minor versions: other sonames
else
    wide="$major.$minor...$((major + 1)).0"
fi
for want_range in "1 $major.$minor...<$major.$((minor + 1))" "1 $major.$minor.0...$major.$minor.$((patch + 9))" \
    "0 $wide" "0 $((major + 1)).0...$((major + 2)).0"; do
    want_found=${want_range%% *} range=${want_range#* }
    got=$(found "$range")
    [ "$got" = "$want_found" ] || { echo "find_package(ccalloc $range): found '$got', want $want_found"; bad=1; }
done
[ "$soname" = "$want" ] || { echo "soname $soname, want $want (version $version)"; bad=1; }
[ "$bad" = 0 ] && echo "version $version: header, CMake package and library agree; soname $soname"
exit $bad
