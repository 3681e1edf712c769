"""Finding and loading libccalloc, and the C declarations the package uses.

Everything here mirrors ``allocator/include/ccalloc.h``; the structures are
checked against the header by ``tests/python/test_api.py`` (field names,
order and types), so a change there fails a test instead of reading the
wrong bytes.

Where the library is looked for, in order (the first that loads wins):

1. ``CCALLOC_LIBRARY``: a path to ``libccalloc.so``. When it is set nothing
   else is tried, so a wrong path is an error, never a silent fallback.
2. The checkout this package lives in (``allocator/python/ccalloc`` inside
   the repository): ``build/allocator/`` first, then every other
   ``build*/allocator/`` in name order. A sanitizer build is skipped (its
   runtime would have to be preloaded, and loading it otherwise ends the
   process), as is a library that does not load or lacks a function this
   package needs (an older build); each with its reason recorded.
   ``CCALLOC_LIBRARY`` may name a sanitizer build once its runtime is
   preloaded; an AddressSanitizer build without it is refused there too.
3. The copy bundled with the package: ``ccalloc/lib/libccalloc.so``, which
   ``pip install ./allocator/python`` builds and installs with the package.
   A checkout build comes first (2.): a developer running the package from
   the checkout gets the library just built, not an older copy; an installed
   package is outside any checkout, so the bundled copy is what it loads,
   whatever checkout builds exist or whatever directory the program runs
   from. A bundled copy that is missing or truncated is listed with its
   reason and the search goes on.
4. The install prefix: ``<sys.prefix>/lib``, ``<sys.prefix>/lib64``,
   ``/usr/local/lib``, ``/usr/local/lib64``, ``/usr/lib``, ``/usr/lib64``
   and the system's multiarch directory (``/usr/lib/x86_64-linux-gnu``):
   ``cmake --install`` uses ``lib64`` on Fedora, RHEL and SUSE (a conda
   prefix there too; a venv's ``lib64`` is a link to its ``lib``) and the
   multiarch directory for ``--prefix /usr`` on Debian.
5. ``ctypes.util.find_library("ccalloc")`` (the linker's search path).

If none loads, :class:`LibraryNotFoundError` lists every place tried and why
each failed. Anything that is not a regular file (a directory, a device such as
``/dev/zero``, a FIFO) is refused before it is opened: reading a device
would never end, opening a FIFO waits for a writer. A file shorter than its own ELF headers say (an interrupted
build, copy or download) is refused before ``dlopen`` sees it, wherever a
path names it (a bare name, step 5's or one given without a directory, is
the dynamic linker's to find and open): glibc maps the missing pages anyway
and its loader dies of SIGBUS reading them, taking the process with it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
import struct
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple

_NAMES = ("libccalloc.so", "libccalloc.dylib")

c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_int = ctypes.c_int
c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p
c_double = ctypes.c_double


class LibraryNotFoundError(ImportError):
    """libccalloc could not be found or loaded; the message lists where it looked."""


# ---- structures (ccalloc.h) ------------------------------------------------

class Stats(ctypes.Structure):
    """``cca_stats``."""

    _fields_ = [
        ("allocated_bytes", c_size_t),
        ("allocated_bytes_peak", c_size_t),
        ("requested_bytes", c_size_t),
        ("requested_bytes_peak", c_size_t),
        ("reserved_bytes", c_size_t),
        ("reserved_bytes_peak", c_size_t),
        ("active_blocks", c_size_t),
        ("active_blocks_peak", c_size_t),
        ("pending_blocks", c_size_t),
        ("cached_blocks", c_size_t),
        ("cached_bytes", c_size_t),
        ("segments", c_size_t),
        ("segments_peak", c_size_t),
        ("largest_free_block", c_size_t),
        ("alloc_calls", c_uint64),
        ("free_calls", c_uint64),
        ("upstream_allocs", c_uint64),
        ("upstream_frees", c_uint64),
        ("alloc_retries", c_uint64),
        ("ooms", c_uint64),
        ("splits", c_uint64),
        ("merges", c_uint64),
        ("fragmentation", c_double),
        ("page_size", c_size_t),
        ("expandable_segments", c_size_t),
        ("address_space_bytes", c_size_t),
        ("mapped_bytes", c_size_t),
        ("vm_maps", c_uint64),
        ("vm_unmaps", c_uint64),
        ("pages_mapped", c_uint64),
        ("pages_unmapped", c_uint64),
        ("vm_backing", ctypes.c_int),
        ("peak_holds", c_uint64),
        ("asleep_domains", c_size_t),
        ("host_bytes", c_size_t),
    ]


class UpstreamStats(ctypes.Structure):
    """``cca_upstream_stats``."""

    _fields_ = [
        ("bytes_in_use", c_size_t),
        ("bytes_in_use_peak", c_size_t),
        ("allocations", c_size_t),
        ("alloc_calls", c_uint64),
        ("free_calls", c_uint64),
        ("failed_allocs", c_uint64),
        ("vm_reserved_bytes", c_size_t),
        ("vm_mapped_bytes", c_size_t),
        ("vm_map_calls", c_uint64),
        ("vm_unmap_calls", c_uint64),
        ("vm_failed_maps", c_uint64),
        ("host_bytes_in_use", c_size_t),
        ("host_bytes_peak", c_size_t),
        ("copies", c_uint64),
        ("bytes_copied", c_uint64),
    ]


class ReleaseReport(ctypes.Structure):
    """``cca_release_report``."""

    _fields_ = [
        ("bytes_released", c_size_t),
        ("segments_released", c_size_t),
        ("bytes_still_reserved", c_size_t),
        ("segments_kept", c_size_t),
        ("segments_pinned", c_size_t),
        ("live_bytes_pinning", c_size_t),
        ("free_bytes_pinned", c_size_t),
        ("pages_unmapped", c_size_t),
        ("bytes_unmapped", c_size_t),
        ("free_bytes_trapped", c_size_t),
        ("asleep_domains", c_size_t),
        ("host_bytes", c_size_t),
    ]


class LiveBlock(ctypes.Structure):
    """``cca_live_block``."""

    _fields_ = [
        ("ptr", c_void_p),
        ("size", c_size_t),
        ("requested", c_size_t),
        ("stream", c_void_p),
        ("age", c_uint64),
        ("pending", c_int),
    ]


class DomainReport(ctypes.Structure):
    """``cca_domain_report``."""

    _fields_ = [
        ("bytes_released", c_size_t),
        ("segments_released", c_size_t),
        ("bytes_still_reserved", c_size_t),
        ("live_blocks", c_size_t),
        ("live_bytes", c_size_t),
        ("leaks", ctypes.POINTER(LiveBlock)),
        ("leaks_cap", c_size_t),
        ("leaks_written", c_size_t),
    ]


class SleepReport(ctypes.Structure):
    """``cca_sleep_report``."""

    _fields_ = [
        ("blocks", c_size_t),
        ("bytes_copied", c_size_t),
        ("bytes_unmapped", c_size_t),
        ("bytes_mapped", c_size_t),
        ("host_bytes", c_size_t),
    ]


DOMAIN_NAME_MAX = 63


class DomainStats(ctypes.Structure):
    """``cca_domain_stats``."""

    _fields_ = [
        ("name", ctypes.c_char * (DOMAIN_NAME_MAX + 1)),
        ("allocated_bytes", c_size_t),
        ("allocated_bytes_peak", c_size_t),
        ("requested_bytes", c_size_t),
        ("requested_bytes_peak", c_size_t),
        ("reserved_bytes", c_size_t),
        ("reserved_bytes_peak", c_size_t),
        ("active_blocks", c_size_t),
        ("active_blocks_peak", c_size_t),
        ("cached_bytes", c_size_t),
        ("largest_free_block", c_size_t),
        ("segments", c_size_t),
        ("alloc_calls", c_uint64),
        ("upstream_allocs", c_uint64),
        ("upstream_frees", c_uint64),
        ("fragmentation", c_double),
        ("asleep", ctypes.c_int),
        ("host_bytes", c_size_t),
    ]


# A cca_config is handled as opaque bytes (filled by cca_config_default and
# cca_config_parse, read back as text by cca_config_print): this size is far
# larger than the struct, so a field added in C can never overrun it.
CONFIG_BYTES = 1024

# Spare room after every structure the library writes into, for the same
# reason: a newer library with a longer struct writes into padding, not
# into Python's heap (the header test keeps the field lists exact).
_SLACK = 512


def out_struct(cls):
    """A zeroed instance of ``cls`` with spare room behind it for the C side to write."""
    buf = (ctypes.c_char * (ctypes.sizeof(cls) + _SLACK))()
    inst = cls.from_buffer(buf)
    inst._ccalloc_buffer = buf  # keep the storage alive with the view
    return inst


class HostOptions(ctypes.Structure):
    """``cca_host_options``: the simulated device's capacity, costs, granularity, backing and host pages."""

    _fields_ = [("capacity", c_size_t), ("alloc_latency_ns", ctypes.c_uint64),
                ("free_latency_ns", ctypes.c_uint64), ("vm_granularity", c_size_t),
                ("vm_map_granule_latency_ns", ctypes.c_uint64), ("vm_unmap_granule_latency_ns", ctypes.c_uint64),
                ("vm_backing", ctypes.c_int), ("vm_map_call_latency_ns", ctypes.c_uint64),
                ("vm_unmap_call_latency_ns", ctypes.c_uint64), ("host_pages", ctypes.c_int)]


class CudaOptions(ctypes.Structure):
    """``cca_cuda_options``: the device, the page of its virtual-memory maps, their backing, and
    the host memory a sleeping domain's copy is kept in."""

    _fields_ = [("device", ctypes.c_int), ("vm_granularity", c_size_t), ("vm_backing", ctypes.c_int),
                ("host_memory", ctypes.c_int)]


def as_dict(struct) -> dict:
    """A structure's fields as a dict, with their C names."""
    return {name: getattr(struct, name) for name, _ in struct._fields_}


# ---- functions -------------------------------------------------------------

_P = c_void_p  # every opaque handle (cca_allocator *, cca_upstream *, cca_domain *, FILE *)
_PP = ctypes.POINTER(c_void_p)

_PROTOTYPES = {
    "cca_status_string": (c_char_p, [c_int]),
    "cca_last_error": (c_char_p, []),
    "cca_clear_error": (None, []),
    "cca_parse_size": (c_int, [c_char_p, ctypes.POINTER(c_size_t)]),
    "cca_parse_size_exact": (c_int, [c_char_p, ctypes.POINTER(c_size_t)]),
    "cca_upstream_host_create": (c_int, [c_size_t, _PP]),
    "cca_upstream_cuda_create": (c_int, [c_int, _PP]),
    "cca_upstream_host_create_with": (c_int, [c_void_p, _PP]),
    "cca_upstream_cuda_create_with": (c_int, [c_void_p, _PP]),
    "cca_upstream_destroy": (None, [_P]),
    "cca_upstream_mem_info": (c_int, [_P, ctypes.POINTER(c_size_t), ctypes.POINTER(c_size_t)]),
    "cca_upstream_get_stats": (c_int, [_P, c_void_p]),
    "cca_upstream_name": (c_char_p, [_P]),
    "cca_upstream_vm_backing": (c_int, [_P]),
    "cca_config_default": (None, [c_void_p]),
    "cca_config_parse": (c_int, [c_void_p, c_char_p]),
    "cca_config_validate": (c_int, [c_void_p]),
    "cca_config_print": (c_int, [c_void_p, _P, c_int]),
    "cca_create": (c_int, [c_void_p, _P, _PP]),
    "cca_destroy": (c_int, [_P]),
    "cca_get_config": (c_int, [_P, c_void_p]),
    "cca_alloc": (c_int, [_P, c_size_t, c_void_p, _PP]),
    "cca_free": (c_int, [_P, c_void_p]),
    "cca_record_stream": (c_int, [_P, c_void_p, c_void_p]),
    "cca_block_size": (c_int, [_P, c_void_p, ctypes.POINTER(c_size_t)]),
    "cca_trim": (c_int, [_P, c_size_t, c_void_p]),
    "cca_empty_cache": (c_int, [_P, c_void_p]),
    "cca_get_stats": (None, [_P, c_void_p]),
    "cca_reset_peak_stats": (None, [_P]),
    "cca_write_snapshot_json": (c_int, [_P, _P]),
    "cca_write_snapshot_torch": (c_int, [_P, c_int, _P]),
    "cca_check_invariants": (c_int, [_P]),
    "cca_trace_mark": (c_int, [_P, c_char_p]),
    "cca_domain_create": (c_int, [_P, c_char_p, _PP]),
    "cca_alloc_in": (c_int, [_P, _P, c_size_t, c_void_p, _PP]),
    "cca_domain_release": (c_int, [_P, _P, ctypes.c_uint, c_void_p]),
    "cca_domain_destroy": (c_int, [_P, _P, ctypes.c_uint, c_void_p]),
    "cca_domain_reserve": (c_int, [_P, _P, c_size_t]),
    "cca_get_domain_stats": (c_int, [_P, _P, c_void_p]),
    "cca_domain_sleep": (c_int, [_P, _P, ctypes.c_uint, c_void_p]),
    "cca_domain_wake": (c_int, [_P, _P, c_void_p]),
    "cca_sleep": (c_int, [_P, ctypes.c_uint, c_void_p]),
    "cca_wake": (c_int, [_P, c_void_p]),
    "cca_plug_alloc": (c_void_p, [c_size_t, c_int, c_void_p]),
    "cca_plug_free": (None, [c_void_p, c_size_t, c_int, c_void_p]),
    "cca_plug_configure": (c_int, [c_char_p, c_char_p]),
    "cca_plug_get_allocator": (c_int, [c_int, _PP]),
    "cca_plug_get_upstream": (c_int, [c_int, _PP]),
    "cca_plug_reset": (c_int, []),
    "cca_plug_set_domain": (c_int, [c_int, _P, _PP]),
    "cca_plug_get_domain": (c_int, [c_int, _PP]),
}

# libc, for the FILE * that cca_write_snapshot_json and cca_config_print take:
# a stream into host memory (open_memstream), so that reading a snapshot
# needs no descriptor and no disk
_libc = ctypes.CDLL(None)
open_memstream = _libc.open_memstream
open_memstream.restype = c_void_p
open_memstream.argtypes = [ctypes.POINTER(c_void_p), ctypes.POINTER(c_size_t)]
fclose = _libc.fclose
fclose.restype = c_int
fclose.argtypes = [c_void_p]
libc_free = _libc.free
libc_free.restype = None
libc_free.argtypes = [c_void_p]


class Library:
    """The loaded library: ``path`` and the declared C functions as attributes."""

    def __init__(self, path: str, dll: ctypes.CDLL) -> None:
        self.path = path
        self.dll = dll
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name, fn)


def _checkout_root() -> Optional[Path]:
    """The repository root when this package runs from the checkout, else None."""
    here = Path(__file__).resolve().parent  # <root>/allocator/python/ccalloc
    if len(here.parents) < 3:
        return None
    root = here.parents[2]
    if (root / "allocator" / "include" / "ccalloc.h").is_file():
        return root
    return None


def bundled_path() -> Path:
    """Where ``pip install`` puts the library: inside the package (``ccalloc/lib/libccalloc.so``)."""
    return Path(__file__).resolve().parent / "lib" / _NAMES[0]


def candidates() -> List[Tuple[str, str]]:
    """Every (origin, path) tried, in order (see the module docstring)."""
    env = os.environ.get("CCALLOC_LIBRARY")
    if env:
        return [("CCALLOC_LIBRARY", env)]
    out: List[Tuple[str, str]] = []
    root = _checkout_root()
    if root is not None:
        dirs = [root / "build" / "allocator"]
        dirs += [d / "allocator" for d in sorted(root.glob("build*")) if d.name != "build" and d.is_dir()]
        for d in dirs:
            for n in _NAMES:
                out.append(("checkout build", str(d / n)))
    out.append(("bundled with the package", str(bundled_path())))
    prefixes = [Path(sys.prefix) / "lib", Path(sys.prefix) / "lib64", Path("/usr/local/lib"),
                Path("/usr/local/lib64"), Path("/usr/lib"), Path("/usr/lib64")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        prefixes.append(Path("/usr/lib") / multiarch)
    for p in prefixes:
        for n in _NAMES:
            out.append(("install prefix", str(p / n)))
    found = ctypes.util.find_library("ccalloc")
    out.append(("ctypes.util.find_library('ccalloc')", found or ""))
    return out


_loaded: Optional[Library] = None
_load_lock = threading.Lock()


def _new_load_lock_in_child() -> None:
    # A child of fork() has only the forking thread: a lock another thread
    # held at the fork (a first load in progress) would never be released
    # there. _loaded is assigned whole, so the child sees None or a library.
    global _load_lock
    _load_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_load_lock_in_child)


def path_arg(value: Any, what: str) -> str:
    """A path argument as a str: a str, bytes (``os.fsdecode``) or an
    ``os.PathLike``. TypeError naming ``what`` for any other value: an int
    above all, which ``open()`` would take as a file descriptor to write
    into and close (``True`` is standard output). A NUL is left to the
    caller, which refuses it as the argument's other bad values."""
    try:
        path = os.fspath(value)  # TypeError for an int, a float, a list
    except TypeError:
        path = None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        raise TypeError(f"{what} is a str, bytes or os.PathLike, not {type(value).__name__}")
    return path


def load(path: Any = None) -> Library:
    """The library, loaded once per process (``path`` forces one file: a str,
    bytes or ``os.PathLike``, else TypeError; ``""`` names none and is
    refused, as is a path with a NUL: LibraryNotFoundError)."""
    global _loaded
    if path is not None:
        path = path_arg(path, "library")
        if "\0" in path:
            raise LibraryNotFoundError(f"libccalloc not loaded: the argument {path!r} contains a NUL character "
                                       "(no file has such a name)")
    with _load_lock:
        if _loaded is not None and (path is None or os.path.realpath(path) == _loaded.path):
            return _loaded
        if _loaded is not None and path and os.sep in path:  # refused before dlopen: no second copy's constructors
            raise LibraryNotFoundError(
                f"libccalloc is already loaded from {_loaded.path}; cannot switch to {os.path.realpath(path)}"
            )
        tried = [("argument", path)] if path is not None else candidates()
        reasons = []
        found = False  # a file was there: the headline says why none loaded, not "not found"
        for origin, p in tried:
            if not p:
                reasons.append(f"  {origin}: empty path" if origin == "argument" else f"  {origin}: not found")
                continue
            if os.sep in p and not os.path.exists(p):
                reasons.append(f"  {origin}: {p}: no such file")
                continue
            found = found or os.sep in p
            odd = _not_regular(p) if os.sep in p else None
            if odd:
                reasons.append(f"  {origin}: {p}: not a regular file ({odd}); skipped")
                continue
            short = _truncated(p) if os.sep in p else None
            if short:
                reasons.append(f"  {origin}: {p}: {short}; skipped")
                continue
            if origin in ("argument", "CCALLOC_LIBRARY") and os.sep in p and _asan_runtime_missing(p):
                reasons.append(f"  {origin}: {p}: built with AddressSanitizer, whose runtime this process has not "
                               "loaded (loading the library would end the process): run Python with "
                               "LD_PRELOAD=$(cc -print-file-name=libasan.so); skipped")
                continue
            if origin not in ("argument", "CCALLOC_LIBRARY") and os.sep in p and _sanitized(p):  # a name: no file yet
                reasons.append(f"  {origin}: {p}: built with a sanitizer (preload its runtime and name it "
                               "in CCALLOC_LIBRARY to use it); skipped")
                continue
            try:
                dll = ctypes.CDLL(p)
            except OSError as e:
                reasons.append(f"  {origin}: {p}: does not load ({e})")
                continue
            found = True
            real = os.path.realpath(p) if os.sep in p else _dll_path(dll, p)
            try:
                lib = Library(real, dll)
            except AttributeError as e:
                reasons.append(f"  {origin}: {p}: not this version of libccalloc ({e})")
                continue
            if _loaded is not None and lib.path != _loaded.path:
                raise LibraryNotFoundError(
                    f"libccalloc is already loaded from {_loaded.path}; cannot switch to {lib.path}"
                )
            _loaded = lib
            return lib
        if found:  # a file that would not load (not a library, another version, no descriptor left): why, below
            raise LibraryNotFoundError(
                "libccalloc was found but could not be loaded. Each place tried, and why:\n" + "\n".join(reasons)
            )
        raise LibraryNotFoundError(
            "libccalloc not found. Install the package with its library (pip install ./allocator/python from "
            "the repository), build it in the checkout (cmake -S . -B build && cmake --build build), install it "
            "(cmake --install build), or set CCALLOC_LIBRARY=/path/to/libccalloc.so. Looked in:\n"
            + "\n".join(reasons)
        )


def _not_regular(path: str) -> Optional[str]:
    """What ``path`` is when it is not a regular file (after symbolic links), else None.

    Everything below reads a candidate before ``dlopen`` does, and would
    never finish on some: a character device such as ``/dev/zero`` reads
    without end (its bytes searched for ASan's marker until memory runs
    out), a FIFO's open waits for a writer for ever. A library is a regular
    file; a directory is named here too, rather than by ``dlopen``.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # gone since, or unreadable: the next step says so
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a file"


def _sanitized(path: str) -> bool:
    """Whether a library was built with ASan/TSan/UBSan (it names their runtime's entry points)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return any(marker in data for marker in (b"__asan_init", b"__tsan_init", b"__ubsan_handle"))


def _asan_runtime_missing(path: str) -> bool:
    """Whether ``path`` is an AddressSanitizer build that cannot load here.

    ASan's runtime must be the first library of the process; loaded later
    by ``dlopen`` it prints "ASan runtime does not come first" and exits the
    process, so such a library is refused unless the runtime is already
    mapped (``LD_PRELOAD``) or ``ASAN_OPTIONS`` turns the check off.
    """
    if "verify_asan_link_order=0" in os.environ.get("ASAN_OPTIONS", ""):
        return False
    try:
        with open(path, "rb") as f:
            if b"__asan_init" not in f.read():
                return False
        with open("/proc/self/maps") as maps:
            return not any("libasan" in line or "clang_rt.asan" in line for line in maps)
    except OSError:
        return False  # not Linux, or unreadable: dlopen decides


def _truncated(path: str) -> Optional[str]:
    """Why an ELF file is shorter than its headers say, else None.

    Program headers (each ``PT_LOAD`` segment's file offset and size) are
    what ``dlopen`` maps; a file that ends before the last of them would be
    mapped anyway, and the loader's first read past the end raises SIGBUS.
    Anything that is not a readable ELF file is left to ``dlopen``, which
    refuses it with a message of its own.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
                return None
            order = "<" if head[5] == 1 else ">"
            if head[4] == 2:  # ELFCLASS64: e_phoff at 32, e_phentsize/e_phnum at 54; p_offset, p_filesz
                if len(head) < 64:
                    return None
                (phoff,), (entsize, count) = struct.unpack_from(order + "Q", head, 32), \
                    struct.unpack_from(order + "HH", head, 54)
                entry = struct.Struct(order + "I4xQ16xQ")
            else:  # ELFCLASS32: e_phoff at 28, e_phentsize/e_phnum at 42
                (phoff,), (entsize, count) = struct.unpack_from(order + "I", head, 28), \
                    struct.unpack_from(order + "HH", head, 42)
                entry = struct.Struct(order + "II8xI")
            if entsize < entry.size:
                return None
            need = phoff + entsize * count
            if need <= size:
                f.seek(phoff)
                table = f.read(entsize * count)
                for i in range(count):
                    kind, offset, filesz = entry.unpack_from(table, i * entsize)
                    if kind == 1:  # PT_LOAD
                        need = max(need, offset + filesz)
    except OSError:
        return None
    if need <= size:
        return None
    return f"truncated: {size} bytes, its ELF headers describe {need} (an interrupted build or copy?)"


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p), ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def _dll_path(dll: ctypes.CDLL, name: str) -> str:
    """The file a library found by name was loaded from: the loader's own
    answer (dladdr of one of its functions), resolved to the real file. Not
    a search of /proc/self/maps for the name, which another file whose name
    starts with it can match first, and which needs a descriptor. ``name``
    when the loader cannot say."""
    try:
        dladdr = _libc.dladdr
        dladdr.restype = c_int
        dladdr.argtypes = [c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        if dladdr(ctypes.cast(dll.cca_create, c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(os.fsdecode(info.dli_fname))
    except AttributeError:  # no dladdr in this libc, or no cca_create: Library() will say which
        pass
    return name
