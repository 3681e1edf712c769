"""The package and the plug ABI attacked: lifetimes, values, threads,
configuration, snapshot output.

Each test here was written against a defect found by attacking a class of
inputs (the class is in the test's docstring), so it fails without its fix.
What could kill the process (a use-after-free, a read that never ends)
runs in a subprocess, so a regression fails the one test, not the suite.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ccalloc

from conftest import PACKAGE_DIR


def _run(code: str, *args: str, env_extra=None, timeout: float = 60, limit_as: int = 0):
    """Run ``code`` in a fresh python with the package importable and the
    same library; ``limit_as``: an address-space limit (bytes) for it."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), CCALLOC_LIBRARY=ccalloc.library_path())
    env.update(env_extra or {})

    def limit():
        if limit_as:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, preexec_fn=limit)


# ---- lifetime: an object that owns C memory is not copied --------------------

_COPY = r"""
import copy, pickle, sys
import ccalloc
from ccalloc import plug
a = ccalloc.Allocator("64M")
d = a.domain("m")
plug.configure(upstream="host:64M")
v = plug.allocator(0)
for name, obj in (("Allocator", a), ("Domain", d), ("view", v)):
    for how, fn in (("copy", copy.copy), ("deepcopy", copy.deepcopy), ("pickle", pickle.dumps)):
        try:
            fn(obj)
        except TypeError as e:
            print(name, how, "refused:", e)
        else:
            print(name, how, "COPIED")
d.destroy()
a.close()
print("done")
"""


def test_allocators_domains_and_views_refuse_copy_and_pickle():
    """Lifetime. copy.copy(Allocator) made a second owner of the same
    cca_allocator: closing one, then using or collecting the other, was a
    use-after-free (cca_destroy twice). deepcopy and pickle failed with
    errors about ctypes internals. Each of the three is refused with a
    TypeError that says why, for an Allocator, a Domain and a plug view."""
    r = _run(_COPY)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[-1] == "done", r.stdout
    refused = [line for line in lines[:-1] if "refused:" in line]
    assert len(refused) == 9, r.stdout
    assert all("cannot be copied or pickled" in line for line in refused), r.stdout


# ---- configuration: CCALLOC_LIBRARY naming something that is not a file -----

_LOAD = r"""
import ccalloc
try:
    ccalloc.Allocator("1M")
except ccalloc.LibraryNotFoundError as e:
    print("refused:", e)
"""


@pytest.mark.parametrize("kind", ["char-device", "fifo"])
def test_a_library_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    """Configuration. CCALLOC_LIBRARY=/dev/zero read the device to the end
    (every byte of it, looking for ASan's marker: MemoryError after eating
    the machine's memory), and a FIFO blocked the import for ever (its open
    waits for a writer). Either is refused at once, saying what it is."""
    if kind == "char-device":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    else:
        path = str(tmp_path / "libccalloc.so")
        os.mkfifo(path)
    try:
        r = _run(_LOAD, env_extra={"CCALLOC_LIBRARY": path}, timeout=20, limit_as=1 << 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading CCALLOC_LIBRARY={path} ({kind}) hung")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "refused:" in r.stdout and f"{path}: not a regular file" in r.stdout, r.stdout
