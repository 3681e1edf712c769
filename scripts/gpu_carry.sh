#!/usr/bin/env bash
# Prepare the build dependencies that a borrowed GPU machine lacks, to be
# sent along with the working tree (docs/gpu.md). Runs HERE (Debian bookworm, x86_64,
# apt reachable), right before the device calls of scripts/gpu_session.sh.
#
#   scripts/gpu_carry.sh            # -> .gpudeps/ (ignored), prints carry list + env
#
# Why: the GPU machine (an Ubuntu-24.04-like image with nvcc, CMake, ninja,
# python3 + PyTorch; seen on the first H100 run) has no network and lacked
# Criterion, cJSON and pkg-config, which the build needs (tests/CMakeLists.txt
# and runtime/CMakeLists.txt use pkg_check_modules). It receives the working
# tree plus this one ignored folder.
#
# What: `apt-get download`s libcriterion-dev + libcriterion3, zlib1g-dev (the
# image may lack zlib.h; ccbench reads gzip traces), libcjson-dev +
# libcjson1, pkgconf (+ pkgconf-bin, libpkgconf3), and every package that
# provides a shared library those load at run time (found with ldd on the
# installed libcriterion.so.3, libcjson.so.1 and pkgconf, then dpkg -S: libgit2
# and its TLS/SSH/Kerberos chain, nanomsg, libffi, ...; glibc, libgcc and
# libstdc++ excluded, the device's own are newer). Each .deb is unpacked with
# `dpkg -x` into .gpudeps/root; docs, man pages and static libraries are
# dropped, symlinks replaced by plain files (each library under its SONAME);
# the .pc files are made relocatable (paths relative to ${pcfiledir}), and
# criterion.pc loses Requires.private/Libs.private (only needed for --static;
# the -dev packages they name are not carried). Also writes
# .gpudeps/commit.txt (the device copy has no .git) and env.sh (for a shell).
#
# On the device, scripts/gpu_session.sh uses .gpudeps when it exists: PATH,
# PKG_CONFIG_PATH and CMAKE_PREFIX_PATH point into it, and it links into
# .gpudeps/lib only those carried libraries whose soname the system lacks
# (so an older bookworm libcrypto or libffi never shadows the device's own),
# LD_LIBRARY_PATH set for our binaries only (not for python3/PyTorch).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
dest=.gpudeps            # carried
cache=.gpudeps-cache     # downloaded .debs (ignored, not carried)
arch_dir=x86_64-linux-gnu

# The packages to carry must be installed here first, to find their run-time
# chain: the project's own dependency script installs them (Criterion, cJSON,
# pkg-config, which pulls pkgconf) with the rest of the build's needs.
scripts/deps.sh

# ---- which packages: the named ones + whatever their .so files load ---------
pkgs=(libcriterion-dev libcriterion3 libcjson-dev libcjson1 zlib1g-dev pkgconf pkgconf-bin libpkgconf3)
exclude=" libc6 libgcc-s1 libstdc++6 "
owner() { # owner PATH: the package that ships PATH (merged /usr: try both spellings)
    local f=$1 cand
    for cand in "$f" "/usr${f#/usr}" "${f#/usr}" "$(readlink -f "$f")"; do
        dpkg -S "$cand" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
    return 1
}
roots=("/usr/lib/$arch_dir/libcriterion.so.3" "/usr/lib/$arch_dir/libcjson.so.1" /usr/bin/pkgconf)
while read -r lib; do
    p=$(owner "$lib") || { echo "gpu_carry: no package owns $lib" >&2; exit 1; }
    [[ $exclude == *" $p "* ]] || pkgs+=("$p")
done < <(ldd "${roots[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
echo "gpu_carry: ${#pkgs[@]} packages: ${pkgs[*]}"

# ---- download: the installed version (from the apt cache or the mirror), else
# the candidate (same soname; e.g. a binNMU rebuild replaced the installed one)
mkdir -p "$cache"
first_deb() { compgen -G "$cache/${1}_*.deb" | head -1 || true; }
debs=()
for p in "${pkgs[@]}"; do
    ver=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
    found=$(first_deb "$p")
    if [ -z "$found" ] && [ -n "$ver" ]; then
        cached="/var/cache/apt/archives/${p}_${ver//:/%3a}_amd64.deb"
        [ -s "$cached" ] && cp "$cached" "$cache/"
    fi
    found=$(first_deb "$p")
    if [ -z "$found" ]; then
        (cd "$cache" && { { [ -n "$ver" ] && apt-get download -qq "$p=$ver" 2>/dev/null; } ||
                          apt-get download -qq "$p" 2>/dev/null ||
                          { apt-get update -qq && apt-get download -qq "$p"; }; })
        found=$(first_deb "$p")
    fi
    [ -n "$found" ] || { echo "gpu_carry: could not download $p" >&2; exit 1; }
    debs+=("$found")
done

# ---- unpack, trim, relocate -------------------------------------------------
rm -rf "$dest"
mkdir -p "$dest/root"
for d in "${debs[@]}"; do dpkg -x "$d" "$dest/root"; done
rm -rf "$dest/root/usr/share/doc" "$dest/root/usr/share/man" "$dest/root/usr/share/lintian" \
       "$dest/root/usr/share/bug" "$dest/root/usr/share/locale"
find "$dest/root" -name '*.a' -delete
# Packages that still ship /lib/<arch> (not merged into /usr here): one lib dir.
if [ -d "$dest/root/lib/$arch_dir" ]; then
    mkdir -p "$dest/root/usr/lib/$arch_dir"
    cp -a "$dest/root/lib/$arch_dir/." "$dest/root/usr/lib/$arch_dir/"
    rm -rf "$dest/root/lib"
fi
# No symlinks in the carried tree (the device transfer may not keep them):
# each library as a plain file under its SONAME (the name the loader asks
# for), the -dev links (libcriterion.so, libcjson.so) and bin/pkg-config as
# copies; real-name files (libfoo.so.1.2.3) go when their SONAME copy exists.
while read -r l; do
    cp --remove-destination "$(readlink -f "$l")" "$l"
done < <(find "$dest/root" -type l)
rm -f "$dest/root/usr/bin/x86_64-linux-gnu-"*
libdir=$dest/root/usr/lib/$arch_dir
for f in "$libdir"/lib*.so.*; do
    so=$(objdump -p "$f" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
    [ -n "$so" ] && [ "$so" != "${f##*/}" ] && [ -f "$libdir/$so" ] && rm -f "$f"
done
[ -z "$(find "$dest/root" -type l)" ] || { echo "gpu_carry: symlinks left in $dest" >&2; exit 1; }
# .pc files: /usr/... -> ${pcfiledir}/<up to root>/usr/...
while read -r pc; do
    rel=${pc#"$dest/root/"}            # usr/lib/x86_64-linux-gnu/pkgconfig/x.pc
    up=$(dirname "$rel" | sed 's#[^/][^/]*#..#g')
    sed -i -E "s#^([A-Za-z_.]+)=/usr(/|\$)#\\1=\${pcfiledir}/$up/usr\\2#" "$pc"
    sed -i -E 's#([ =])-[IL]/usr/(include|lib)[^ ]*##g' "$pc"   # stray absolute -I/-L
    if [ "$(basename "$pc")" = criterion.pc ]; then
        sed -i -E '/^(Requires|Libs)\.private:/d' "$pc"
    fi
done < <(find "$dest/root" -name '*.pc')

# ---- commit of the tree being sent (the device copy has no .git) -----------
{
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    n=$(git status --porcelain 2>/dev/null | wc -l)
    echo "uncommitted: $n paths changed, diff sha256 $(git diff HEAD 2>/dev/null | sha256sum | cut -c1-16)"
    echo "prepared: $(date -u '+%F %T') UTC on $(hostname)"
} >"$dest/commit.txt"

cat >"$dest/env.sh" <<'EOF'
# source .gpudeps/env.sh: use the carried pkg-config, Criterion and cJSON.
# (scripts/gpu_session.sh does the same itself; this is for a manual shell.)
G=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$G/lib"
# Link the carried libraries whose name the system's loader does not know.
known=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) |
    awk '$2 ~ /^\(/ && $NF ~ /^\// {print $1, $NF}' | while read -r so path; do [ -e "$path" ] && echo "$so"; done)
for f in "$G"/root/usr/lib/x86_64-linux-gnu/lib*.so.*; do
    n=$(basename "$f")
    grep -qxF "$n" <<<"$known" || ln -sfn "$f" "$G/lib/$n"
done
export PATH="$G/root/usr/bin:$PATH"
export PKG_CONFIG_PATH="$G/root/usr/lib/x86_64-linux-gnu/pkgconfig:$G/root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CMAKE_PREFIX_PATH="$G/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export LD_LIBRARY_PATH="$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

# ---- self-check: the carried pkgconf alone finds both modules ---------------
G=$repo/$dest
chk=$(env -u PKG_CONFIG_PATH LD_LIBRARY_PATH="$G/root/usr/lib/$arch_dir" \
      PKG_CONFIG_LIBDIR="$G/root/usr/lib/$arch_dir/pkgconfig" \
      "$G/root/usr/bin/pkg-config" --modversion criterion libcjson | tr '\n' ' ')
echo "gpu_carry: carried pkg-config finds criterion + libcjson: $chk"
size=$(du -sh "$dest" | cut -f1)
echo "gpu_carry: $dest is $size ($(find "$dest" -type f | wc -l) files); working tree to send: $(git ls-files -co --exclude-standard -z | du -ch --files0-from=- 2>/dev/null | tail -1 | cut -f1)"
cat <<EOF

carry: [".gpudeps"]

env (what scripts/gpu_session.sh sets from it; G=<repo>/.gpudeps):
  export PATH=\$G/root/usr/bin:\$PATH
  export PKG_CONFIG_PATH=\$G/root/usr/lib/$arch_dir/pkgconfig:\$G/root/usr/share/pkgconfig
  export CMAKE_PREFIX_PATH=\$G/root/usr
  export LD_LIBRARY_PATH=\$G/lib:\$LD_LIBRARY_PATH   # \$G/lib: links to the carried .so files whose soname the system lacks
  cmake ... -DPKG_CONFIG_EXECUTABLE=\$G/root/usr/bin/pkg-config
EOF
