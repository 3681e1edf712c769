"""The package as a user gets it: a wheel built from a clean copy of the
repository, installed into a fresh virtual environment, used from a
directory outside the checkout with no environment variable.

1. The copy: the files git tracks and the untracked ones it does not ignore
   (an uncommitted change is tested too), as a fresh clone has them; no
   build directory of the checkout comes along.
2. ``pip wheel --no-build-isolation --no-deps --no-index`` of
   ``allocator/python``: scikit-build-core (scripts/deps.sh installs it)
   runs the repository's CMake project, allocator only; no network.
3. The wheel holds every module of ``allocator/python/ccalloc``,
   ``py.typed`` and ``ccalloc/lib/libccalloc.so`` (no CUDA library among its
   needs), tagged ``py3-none-<platform>``.
4. A venv made ``--without-pip`` (no build tools in it; it sees the system's
   site-packages only for pytest), the wheel installed into it by pip with
   ``--no-index --no-deps``: an install, no build.
5. From a temporary directory, CCALLOC_LIBRARY unset: the quick start of
   docs/python.md, taken from the doc and run as it stands, prints what its
   comments say; the library loaded is the bundled copy; ``pip show``.
6. The framework-free suites (test_api, test_plug_abi, test_adapters, test_domains,
   test_hostile) against the installed package (CCALLOC_TEST_INSTALLED=1,
   conftest.py): a module or the library missing from the wheel fails here.
7. The hostile cases: run from inside the checkout, next to its build
   directories, the installed package still loads its bundled copy;
   CCALLOC_LIBRARY naming a missing file is an error, never a fallback;
   CUDA asked for where no runtime loads is ``NoDeviceError`` saying what
   to install, at ``Allocator(device=0)``, never at import; the bundled
   copy truncated, then removed: ``LibraryNotFoundError`` naming it.

Skipped, with the reason, where venv or scikit-build-core is missing; under
CI (``CI`` set) that fails instead, so a CI machine without them cannot pass
by skipping.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE_SRC = ROOT / "allocator" / "python"
DOC = ROOT / "docs" / "python.md"
FRAMEWORK_FREE = ["test_api.py", "test_plug_abi.py", "test_adapters.py", "test_domains.py", "test_hostile.py"]


def _run(cmd, timeout=900, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


def _missing_tools():
    try:
        import venv  # noqa: F401
    except ImportError:
        return "the venv module is not available"
    try:
        import scikit_build_core  # noqa: F401
    except ImportError:
        return "scikit-build-core is not installed (scripts/deps.sh installs it)"
    if not shutil.which("cmake"):
        return "cmake is not on the PATH"
    return None


def _clean_copy(dest: Path) -> None:
    """The repository's files as a fresh clone has them (see the module docstring)."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True)
    if r.returncode != 0:  # not a git checkout (an unpacked archive): everything but build output
        shutil.copytree(ROOT, dest, ignore=lambda d, names: [n for n in names if n in (".git", "__pycache__") or (
            Path(d) == ROOT and n.startswith("build")) or (Path(d) == PACKAGE_SRC / "ccalloc" and n == "lib")])
        return
    for name in r.stdout.decode().split("\0"):
        src = ROOT / name
        if name and src.is_file():  # a file deleted in the working tree is not copied
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _env(**extra):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    for name in ("CCALLOC_LIBRARY", "CCALLOC_CUDART", "PYTHONPATH", "CCALLOC_PLUG_UPSTREAM", "CCALLOC_CONF"):
        env.pop(name, None)
    env.update(extra)
    return env


def quick_start() -> str:
    """The first ```python block under docs/python.md's "## Quick start"."""
    text = DOC.read_text()
    section = text[text.index("\n## Quick start"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


class Installed:
    """The wheel, the venv it went into, and the numbers measured on the way."""

    def __init__(self, base: Path):
        if not PACKAGE_SRC.joinpath("pyproject.toml").is_file():
            pytest.fail(f"{PACKAGE_SRC}/pyproject.toml is missing")
        src = base / "src"
        _clean_copy(src)
        self.dist = base / "dist"
        t = time.monotonic()
        r = _run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                  "-w", self.dist, src / "allocator" / "python"], env=_env(CMAKE_BUILD_PARALLEL_LEVEL="2"), cwd=base)
        self.build_s = time.monotonic() - t
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        wheels = list(self.dist.glob("ccalloc-*.whl"))
        assert len(wheels) == 1, wheels
        self.wheel = wheels[0]
        self.venv = base / "venv"
        r = _run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", self.venv])
        assert r.returncode == 0, r.stderr
        self.python = self.venv / "bin" / "python"
        t = time.monotonic()
        r = _run([self.python, "-m", "pip", "install", "--no-index", "--no-deps", self.wheel], env=_env(), cwd=base)
        self.install_s = time.monotonic() - t
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        site = _run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
        self.package = Path(site) / "ccalloc"
        self.library = self.package / "lib" / "libccalloc.so"
        self.outside = base / "elsewhere"
        self.outside.mkdir()

    def python_c(self, code, cwd=None, **env):
        return _run([self.python, "-c", code], env=_env(**env), cwd=cwd or self.outside, timeout=120)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    missing = _missing_tools()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the wheel test: {missing}")
        pytest.skip(missing)
    return Installed(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_the_package_and_its_library(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    modules = {f"ccalloc/{p.name}" for p in (PACKAGE_SRC / "ccalloc").iterdir() if p.suffix in (".py", ".typed")}
    assert modules <= names, f"missing from the wheel: {sorted(modules - names)}"
    assert "ccalloc/lib/libccalloc.so" in names
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert installed.wheel.name == f"ccalloc-0.1.0-py3-none-{platform}.whl"
    # one file for machines with and without CUDA: the runtime is found at run time (cudart.c)
    needed = _run(["readelf", "-d", installed.library]).stdout if shutil.which("readelf") else ""
    assert "libcudart" not in needed and "libcuda." not in needed, needed
    print(f"wheel {installed.wheel.name}: {installed.wheel.stat().st_size} bytes; built in {installed.build_s:.1f} s, "
          f"installed in {installed.install_s:.1f} s")


def test_the_quick_start_runs_outside_the_checkout(installed):
    code = quick_start()
    r = installed.python_c(code)
    assert r.returncode == 0, r.stderr
    # each print's comment starts with what it prints, up to a colon
    want = [line.split("#", 1)[1].split(":")[0].strip() for line in code.splitlines() if line.startswith("print(")]
    assert r.stdout.splitlines() == want, (r.stdout, want)


def test_the_installed_package_loads_its_bundled_library(installed):
    r = installed.python_c("import ccalloc; print(ccalloc.__file__); print(ccalloc.library_path()); "
                           "print(ccalloc.__version__)")
    assert r.returncode == 0, r.stderr
    module, lib, version = r.stdout.split()
    assert Path(module).parent == installed.package
    assert lib == str(installed.library.resolve())
    r = _run([installed.python, "-m", "pip", "show", "ccalloc"], env=_env(), cwd=installed.outside)
    fields = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert fields["Name"] == "ccalloc" and fields["Version"] == version, r.stdout
    # from inside the checkout, beside its build directories: still the bundled copy
    r = installed.python_c("import ccalloc; print(ccalloc.library_path())", cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == lib, r.stdout + r.stderr


def test_the_framework_free_suites_pass_on_the_installed_package(installed):
    here = Path(__file__).resolve().parent
    r = _run([installed.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "--rootdir", here,
              *[here / t for t in FRAMEWORK_FREE]], env=_env(CCALLOC_TEST_INSTALLED="1"), cwd=installed.outside)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_ccalloc_library_naming_a_missing_file_is_an_error(installed):
    r = installed.python_c("import ccalloc; ccalloc.library_path()", CCALLOC_LIBRARY="/nonexistent/libccalloc.so")
    assert r.returncode != 0
    assert "LibraryNotFoundError" in r.stderr and "/nonexistent/libccalloc.so: no such file" in r.stderr
    assert "bundled" not in r.stderr, "CCALLOC_LIBRARY set: nothing else is tried"


def test_cuda_without_a_runtime_says_what_to_install(installed):
    code = ("import ccalloc\n"
            "try:\n"
            "    ccalloc.Allocator(device=0)\n"
            "except ccalloc.NoDeviceError as e:\n"
            "    print(e)\n")
    r = installed.python_c(code, CCALLOC_CUDART="/nonexistent/libcudart.so.13")
    assert r.returncode == 0, r.stderr
    assert "pip install nvidia-cuda-runtime" in r.stdout and "CUDA toolkit" in r.stdout, r.stdout
    assert "/nonexistent/libcudart.so.13" in r.stdout, r.stdout


def test_a_bundled_library_cut_short_or_gone_is_named(installed):
    """Last: it damages the venv's copy."""
    data = installed.library.read_bytes()
    installed.library.write_bytes(data[:len(data) // 2])
    r = installed.python_c("import ccalloc; ccalloc.library_path()")
    if r.returncode == 0:
        pytest.skip("libccalloc is installed system-wide here: the search goes on and finds it")
    assert "bundled with the package" in r.stderr and "truncated" in r.stderr, r.stderr
    installed.library.unlink()
    r = installed.python_c("import ccalloc; ccalloc.library_path()")
    assert f"bundled with the package: {installed.library}: no such file" in r.stderr, r.stderr
    assert "pip install ./allocator/python" in r.stderr
