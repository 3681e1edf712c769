"""Shared set-up of the Python suites (tests/python/test_*.py).

The package is imported from the checkout (allocator/python), and the
library from CCALLOC_LIBRARY, which CTest sets to the library it built
(tests/python/python.cmake); run by hand, the package's own discovery finds a
build directory of the checkout.

With CCALLOC_TEST_INSTALLED=1 (test_install.py, in the virtual environment
it installed the wheel into) the suites test the installed package instead:
nothing from the checkout is put on the path, the package must import from
outside the checkout, and PACKAGE_DIR is the folder that holds it (what the
suites' subprocesses put on PYTHONPATH).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "allocator" / "python"
HEADER = ROOT / "allocator" / "include" / "ccalloc.h"
INSTALLED = os.environ.get("CCALLOC_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(PACKAGE_DIR))

import ccalloc  # noqa: E402
from ccalloc import plug  # noqa: E402

if INSTALLED:
    PACKAGE_DIR = Path(ccalloc.__file__).resolve().parents[1]
    if ROOT in PACKAGE_DIR.parents or PACKAGE_DIR == ROOT:
        raise RuntimeError(f"CCALLOC_TEST_INSTALLED=1 but ccalloc comes from the checkout: {ccalloc.__file__}")

KiB = 1024
MiB = 1024 * KiB


def no_access_bytes():
    """The address space this process has mapped with no access: a
    simulated device reserves its whole range so, and gives it back when
    it is destroyed."""
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split()[:2]
            if perms.startswith("---"):
                lo, hi = (int(x, 16) for x in span.split("-"))
                total += hi - lo
    return total


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


def fork_children(child, times, alarm=20):
    """Fork `times` children one after another (the caller's threads keep
    running); each runs child() under an alarm of `alarm` seconds and exits
    0 when it returns True. A child that hangs on a lock ends by its alarm,
    exit by signal. Returns the (fork number, wait status) of the first
    child that failed, or None."""
    import os
    import signal
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
        for i in range(times):
            pid = os.fork()
            if pid == 0:
                signal.alarm(alarm)
                ok = False
                try:
                    ok = bool(child())
                except BaseException:  # said on stderr, where pytest shows it
                    import traceback

                    traceback.print_exc()
                finally:
                    os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            if status:
                return (i, status)
    return None

