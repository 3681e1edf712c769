"""Shared set-up of the Python suites (tests/python/test_*.py).

The package is imported from the checkout (allocator/python), and the
library from CCALLOC_LIBRARY, which CTest sets to the library it built
(tests/python.cmake); run by hand, the package's own discovery finds a
build directory of the checkout.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "allocator" / "python"
HEADER = ROOT / "allocator" / "include" / "ccalloc.h"
sys.path.insert(0, str(PACKAGE_DIR))

import ccalloc  # noqa: E402
from ccalloc import plug  # noqa: E402

KiB = 1024
MiB = 1024 * KiB


@pytest.fixture
def lib():
    """The loaded library (ccalloc._lib.Library)."""
    return plug.library()


@pytest.fixture
def host_plug():
    """The plug table, reset and set to one simulated device of 64 MiB; reset again after."""
    plug.reset()
    plug.configure(upstream="host:64M", conf=None)
    yield
    plug.reset()
