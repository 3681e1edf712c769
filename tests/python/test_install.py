"""`pip install` of the package from the checkout, in a throwaway venv.

The venv sees the system's site-packages (``--system-site-packages``) so the
build needs no network (``--no-build-isolation --no-index``): setuptools, and
``wheel`` where setuptools is older than 70.1, come from the system
(scripts/deps.sh installs wheel). The package is copied to a temporary
directory first, so the build's ``build/`` and ``*.egg-info`` never land in
the checkout. Skipped, with the reason, where venv or those build tools are
missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import PACKAGE_DIR


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)


def _build_tools_missing():
    try:
        import setuptools
    except ImportError:
        return "setuptools is not installed"
    major_minor = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    if major_minor < (61, 0):
        return f"setuptools {setuptools.__version__} cannot read pyproject.toml metadata (61 or later)"
    if major_minor < (70, 1):
        try:
            import wheel  # noqa: F401
        except ImportError:
            return (f"setuptools {setuptools.__version__} needs the 'wheel' package to build "
                    "without isolation (scripts/deps.sh installs it)")
    return None


def test_pip_install_and_pip_show(tmp_path):
    try:
        import venv  # noqa: F401
    except ImportError:
        pytest.skip("the venv module is not available")
    missing = _build_tools_missing()
    if missing:
        pytest.skip(missing)
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_DIR, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    env_dir = tmp_path / "venv"
    r = _run([sys.executable, "-m", "venv", "--system-site-packages", env_dir])
    if r.returncode != 0:
        pytest.skip(f"python -m venv failed: {r.stderr.strip()[-500:]}")
    py = env_dir / "bin" / "python"
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    r = _run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", src], env=env,
             cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    r = _run([py, "-m", "pip", "show", "ccalloc"], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    fields = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert fields["Name"] == "ccalloc"
    import ccalloc

    assert fields["Version"] == ccalloc.__version__
    assert os.path.realpath(fields["Location"]).startswith(os.path.realpath(env_dir))

    # the installed copy (not the checkout) imports and finds the library it is told to use
    lib = ccalloc.library_path()
    check = ("import ccalloc, os; "
             "assert ccalloc.__file__.startswith(os.environ['VENV']), ccalloc.__file__; "
             "a = ccalloc.Allocator(capacity='8M'); p = a.alloc(1000); a.free(p); "
             "print(a.empty_cache().bytes_released, ccalloc.library_path())")
    r = _run([py, "-c", check], env=dict(env, CCALLOC_LIBRARY=lib, VENV=os.path.realpath(env_dir)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(2 << 20), lib]

    # and without CCALLOC_LIBRARY or a checkout around it, says where it looked
    bare = dict(env, VENV=os.path.realpath(env_dir), LD_LIBRARY_PATH="")
    bare.pop("CCALLOC_LIBRARY", None)
    r = _run([py, "-c", "import ccalloc; ccalloc.library_path()"], env=bare, cwd=tmp_path)
    if r.returncode == 0:
        pytest.skip("libccalloc is installed system-wide here: the not-found message cannot be checked")
    assert "LibraryNotFoundError" in r.stderr and "CCALLOC_LIBRARY" in r.stderr
    assert "install prefix" in r.stderr and "find_library" in r.stderr
