#!/usr/bin/env bash
# kernel_resources.sh — what the compiler made of the CUDA kernels, without a GPU.
#
#   bench/kernels/kernel_resources.sh [--check] [--nvcc PATH] [--arch "80 90"]
#
# For every kernel of kernels/src/softmax.cu and kernels/src/dense.cu and every
# target architecture, ptxas reports (nvcc --resource-usage) registers per
# thread, static shared memory, stack frame and spill bytes. From the
# registers follows how many threads one SM can hold (64K registers per SM,
# allocated per warp in units of 256, at most 2048 threads: the same on
# sm_80 and sm_90); a memory-bound kernel wants that high, to keep many loads
# in flight. The PTX (nvcc -ptx) shows which loads and stores are vectorized:
# softmax v4's and v5's claims of 16-byte loads and streaming 16-byte stores
# can be checked here, on a machine without a GPU, and so can v5's claim that
# a row kept in registers is read from memory once.
#
# Prints a markdown table. With --check it also fails (exit 1) when:
#   - any kernel spills registers or has a stack frame (local memory traffic);
#   - a kernel's registers do not fit its largest block in one SM's 64K
#     (softmax v3's, v4's and v5's block kernels: their BLOCK argument, the
#     block they are launched with; every other kernel: 1024 threads, the
#     largest block the launchers accept, so at most 64 registers): the
#     launch would fail on a GPU with "too many resources requested";
#   - a softmax v4 kernel lacks ld.global.v4.f32 or st.global.cs.v4.f32;
#   - a softmax v5 kernel lacks streaming 16-byte stores, or its 16-byte
#     loads are not exactly one per register slot (VPT, its template
#     argument) when the row is resident, two per slot (pass 1 and the
#     re-read) when it is taken in chunks: more would mean x is read twice;
#   - the float4 epilogue (bias_act_kernel4) lacks 16-byte loads and stores
#     (but the identity instance <none, no bias>, which is never launched);
#   - softmax v1-v3 or the scalar epilogue use 16-byte accesses (they should not:
#     the table would then not say what their comments say);
#   - a kernel family is missing, or a kernel is not one the script knows.
# Kernels are recognised by their mangled names, so c++filt (used only to
# print readable names) may be absent.
# CTest runs it with --check (label cpu) when the build has CUDA.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
archs="80 90"
check=0
while (($#)); do
  case "$1" in
  --check) check=1 ;;
  --nvcc) nvcc="$2"; shift ;;
  --arch) archs="$2"; shift ;;
  -h | --help) sed -n '2,32p' "$0"; exit 0 ;;
  *) echo "kernel_resources.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# CMake's spellings: "90a-real" -> 90a; "native" / "all" -> the defaults
arch_list=""
for a in $archs; do
  a="${a%%-*}"
  [[ "$a" =~ ^[0-9]+[a-z]?$ ]] && arch_list="$arch_list $a"
done
archs="${arch_list:-80 90}"
if [ ! -x "$nvcc" ]; then
  echo "kernel_resources.sh: no nvcc at '$nvcc' (set NVCC or --nvcc)" >&2
  exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
flags=(-std=c++17 -I"$root/kernels/include" -I"$root/kernels/src")
failures=0
seen=""                                                    # kernel families met (--check)
wide='(v4\.(f32|b32|u32|s32)|v2\.(f64|b64|u64|s64))'         # a 16-byte vector access in PTX
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# One line per kernel: name regs smem stack spill_st spill_ld. The same
# compile keeps its PTX (--keep) as $work/$2/<source>.ptx. Device code only
# (-cubin): the host side, which ptxas never sees, is not compiled (half the
# time: 8 s instead of 15 s for softmax.cu on the 2-core build machine).
ptxas_table() { # $1 = source, $2 = arch
  mkdir -p "$work/$2"
  if ! "$nvcc" "${flags[@]}" -arch="sm_$2" --resource-usage --keep --keep-dir "$work/$2" -cubin "$1" -o "$work/$2/x.cubin" \
    >"$work/$2/nvcc.log" 2>&1; then
    cat "$work/$2/nvcc.log" >&2
    return 1
  fi
  awk '
      /Compiling entry function/ { match($0, /\x27[^\x27]+\x27/); name = substr($0, RSTART + 1, RLENGTH - 2) }
      /bytes stack frame/ { stack = $1; spst = $5; spld = $9 }
      /Used [0-9]+ registers/ {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ .*/, "", smem) }
        print name, regs, smem, stack, spst, spld
      }' "$work/$2/nvcc.log"
}

# The PTX body of one kernel (from its .entry line to the closing brace).
ptx_body() { # $1 = ptx file, $2 = mangled name
  awk -v k="$2" '$0 ~ "\\.entry " k "\\(" { on = 1 } on { print } on && /^}/ { exit }' "$1"
}

demangle() {
  if command -v c++filt >/dev/null; then c++filt "$1"; else echo "$1"; fi
}

# threads one SM can hold, limited by registers only
threads_per_sm() { # $1 = registers per thread
  awk -v r="$1" 'BEGIN {
    per_warp = int((r * 32 + 255) / 256) * 256
    warps = int(65536 / per_warp); if (warps > 64) warps = 64
    print warps * 32 }'
}

# the largest block a kernel is launched with (mangled name): the block
# kernels of v3-v5 name theirs (_Z15softmax_kernel3ILi<BLOCK>E...,
# softmax_kernel4_blockILi<BLOCK>E, softmax_kernel5_blockILi<BLOCK>E), the
# others take any the launchers accept, up to 1024
max_block() { # $1 = mangled name
  local b
  b=$(sed -nE 's/.*softmax_kernel(3|4_block|5_block)ILi([0-9]+)E.*/\2/p' <<<"$1")
  echo "${b:-1024}"
}

echo "| kernel | arch | registers | threads/SM (by registers) | static smem B | stack B | spills B | 16-byte loads / stores (PTX) |"
echo "|---|---|---|---|---|---|---|---|"
for src in softmax dense; do
  for arch in $archs; do
    table="$(ptxas_table "$root/kernels/src/$src.cu" "$arch")" || table=""
    ptx="$(ls "$work/$arch"/*.ptx 2>/dev/null | grep -F "$src" | head -n1 || true)"
    if [ -z "$table" ] || [ -z "$ptx" ]; then
      fail "$src.cu for sm_$arch: no ptxas report or no PTX (did it compile?)"
      continue
    fi
    while read -r name regs smem stack spst spld; do
      body="$(ptx_body "$ptx" "$name")"
      if [ -z "$body" ]; then
        fail "$name: no .entry in the PTX of $src.cu for sm_$arch"
        continue
      fi
      # 16-byte accesses of any element type: .v4 of 32-bit, .v2 of 64-bit
      v4ld=$(grep -cE "ld\.global[.a-z]*\.$wide" <<<"$body" || true)
      v4st=$(grep -cE "st\.global[.a-z]*\.$wide" <<<"$body" || true)
      v4cs=$(grep -cE "st\.global\.cs\.$wide" <<<"$body" || true)
      pretty="$(demangle "$name")"
      pretty="$(sed -E 's/^void //; s/\([^()]*\)$//' <<<"$pretty")" # drop the return type and parameters
      vec="none"
      if ((v4ld + v4st)); then
        vec="$v4ld / $v4st"
        ((v4cs)) && vec="$vec (streaming .cs)"
      fi
      echo "| \`$pretty\` | sm_$arch | $regs | $(threads_per_sm "$regs") | $smem | $stack | $((spst + spld)) | $vec |"
      ((check)) || continue
      if ! [[ "$regs $smem $stack $spst $spld" =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]]; then
        fail "$pretty sm_$arch: ptxas report not understood ('$regs $smem $stack $spst $spld')"
        continue
      fi
      ((spst + spld == 0)) || fail "$pretty sm_$arch spills $spst B stored / $spld B loaded"
      ((stack == 0)) || fail "$pretty sm_$arch has a $stack B stack frame"
      block=$(max_block "$name")
      (($(threads_per_sm "$regs") >= block)) ||
        fail "$pretty sm_$arch: $regs registers per thread leave room for $(threads_per_sm "$regs") threads, under its block of $block"
      # Matched on the MANGLED name (the same with or without c++filt):
      # _Z<len><name>P... for plain kernels, <name>I... for templates.
      # bias_act_kernel*IL14cck_activation0ELb0E: <none, no bias>, the
      # identity, instantiated by the template but never launched (dense.cu
      # returns before the epilogue without bias or activation).
      family=""
      case "$name" in
      *softmax_kernel4_warpP* | *softmax_kernel4_blockI*)
        family=v4
        ((v4ld > 0)) || fail "$pretty sm_$arch: no 16-byte global load"
        ((v4cs > 0)) || fail "$pretty sm_$arch: no 16-byte streaming store (st.global.cs)" ;;
      *softmax_kernel5_warpI* | *softmax_kernel5_blockI*)
        # _Z20softmax_kernel5_warpILi<VPT>E..., _Z21softmax_kernel5_blockILi<BLOCK>ELi<VPT>ELb<RESIDENT>E...
        family=v5
        vpt=$(sed -nE 's/.*softmax_kernel5_warpILi([0-9]+)E.*/\1/p; s/.*softmax_kernel5_blockILi[0-9]+ELi([0-9]+)E.*/\1/p' <<<"$name")
        resident=1
        [[ $name == *ELb0E* ]] && resident=0
        want=$((resident ? vpt : 2 * vpt))
        ((v4cs > 0)) || fail "$pretty sm_$arch: no 16-byte streaming store (st.global.cs)"
        ((v4ld == want)) || fail "$pretty sm_$arch: $v4ld 16-byte loads, expected $want (VPT $vpt, resident $resident)" ;;
      *bias_act_kernel4IL14cck_activation0ELb0E* | *bias_act_kernelIL14cck_activation0ELb0E*)
        family=identity
        ((v4ld + v4st == 0)) || fail "$pretty sm_$arch: the identity epilogue touches memory" ;;
      *bias_act_kernel4I*)
        family=epilogue4
        ((v4ld > 0 && v4st > 0)) || fail "$pretty sm_$arch: no 16-byte load and store" ;;
      *softmax_kernel1P* | *softmax_kernel2P* | *softmax_kernel3I* | *bias_act_kernelI*)
        family=scalar
        ((v4ld + v4st == 0)) || fail "$pretty sm_$arch: unexpected 16-byte accesses" ;;
      *) fail "$pretty sm_$arch ($name): a kernel this script does not know; add its expectations" ;;
      esac
      [ -n "$family" ] && seen="$seen $family"
    done <<<"$table"
  done
done
if ((check)); then
  for family in v4 v5 epilogue4 scalar identity; do
    [[ " $seen " == *" $family "* ]] || fail "no kernel of the '$family' family was found: renamed?"
  done
  if ((failures)); then
    echo "kernel_resources.sh: $failures check(s) failed" >&2
    exit 1
  fi
  echo "kernel_resources.sh: every kernel free of spills and stack; vector accesses as documented" >&2
elif ((failures)); then
  exit 1 # a source that did not compile
fi
