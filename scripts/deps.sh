#!/usr/bin/env bash
# Install what ccalloc needs on a fresh Debian machine (root, CUDA toolkit at
# /usr/local/cuda, nothing else). Installs only what is missing.
set -euo pipefail
pkgs=(cmake make gcc g++ pkg-config libcriterion-dev libcjson-dev libopenblas-openmp-dev zlib1g-dev gnuplot-nox clang libclang-rt-dev
      locales      # localedef and de_DE's source, for the decimal-comma tests (tests/support/comma_locale.h)
      abigail-tools) # abidw, abidiff: the library's ABI against its record (tests/allocator/contract/test_abi.sh)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# pytest for the recorder's tests (tests/bench/test_record_torch.py), from PyPI
if command -v python3 >/dev/null && ! python3 -c "import pytest" 2>/dev/null; then
  echo "deps: installing pytest"
  python3 -m pip install -q pytest || echo "deps: pytest could not be installed: test_record_torch will not be registered"
fi
# scikit-build-core: the Python package's build backend; tests/python/test_install.py
# builds the wheel with pip --no-build-isolation (no network in the test), so it is
# installed here, with the system's pip (23 or later reads its metadata)
if command -v python3 >/dev/null && ! python3 -c "import scikit_build_core" 2>/dev/null; then
  echo "deps: installing scikit-build-core"
  python3 -m pip install -q "scikit-build-core>=0.10" || echo "deps: scikit-build-core could not be installed: the wheel test will fail under CI"
fi
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "deps: CUDA toolkit $(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') found"
else
  echo "deps: no CUDA toolkit: building host-only"
fi
