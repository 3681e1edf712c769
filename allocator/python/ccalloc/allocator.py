"""``ccalloc.Allocator``: one libccalloc allocator, from Python.

Addresses are plain ints (``alloc`` returns one, ``free`` takes one), as
every framework exchanges device pointers (``tensor.data_ptr()``, CuPy's
``UnownedMemory(ptr, ...)``, ``__cuda_array_interface__``). A Block object
freed by the garbage collector would hide the one thing this library is
about, when memory goes back; here a block lives until ``free``, and the
cache until ``trim`` / ``empty_cache``, each an explicit call.

Streams are ``None`` (the default stream) or an int: a ``cudaStream_t``
(``torch.cuda.current_stream().cuda_stream``,
``cupy.cuda.get_current_stream().ptr``), or any token on the simulated
device.
"""
from __future__ import annotations

import errno
import itertools
import json
import numbers
import operator
import pickle
import os
import threading
import time
import weakref
import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

from . import _lib
from ._errors import (LiveBlocksError, OK, error_class, Error, ERR_LIVE_BLOCKS, ERR_INVALID_ARGUMENT,
                      ERR_INVALID_POINTER, ERR_CONFIG)

Size = Union[int, str]

DOMAIN_FORCE = 1  # CCA_DOMAIN_FORCE
SLEEP_DISCARD = 1  # CCA_SLEEP_DISCARD


def _text(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b else ""


def raise_for(lib: _lib.Library, status: int, what: str = "") -> None:
    """Raise the :class:`Error` subclass for ``status`` (nothing for CCA_OK).

    Call right after the failing C call, on the same thread: the message is
    the thread's ``cca_last_error()``.
    """
    if status == OK:
        return
    message = _text(lib.cca_last_error())
    if what and not message:
        message = what
    raise error_class(status)(status, _text(lib.cca_status_string(status)), message)


# ---- arguments, checked before they reach C ------------------------------------
#
# ctypes converts a Python int to a C integer or pointer by keeping its low
# bits (2**64 + 512 becomes 512, 2**32 becomes device 0) and a str to a C
# string that ends at its first NUL; a flag computed as ``x if flag else 0``
# takes any object's truth value ("False" is true). Every argument that
# crosses into C goes through one of the functions below, which refuse what
# C would not receive as given.

SIZE_LIMIT = 1 << 64  # sizes, counts and addresses: size_t / uintptr_t, [0, 2**64)
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1  # device numbers: C int


def argument_error(lib: _lib.Library, status: int, message: str) -> Error:
    """The :class:`Error` subclass of ``status`` for an argument refused before any C call."""
    return error_class(status)(status, _text(lib.cca_status_string(status)), message)


def integer(value: Any, what: str) -> int:
    """``value`` as an int: an int or anything with ``__index__`` (numpy
    integers), never a bool; TypeError otherwise (a float is not truncated).
    The one rule for every integer argument: sizes, counts, devices."""
    if isinstance(value, bool):
        raise TypeError(f"{what} is an int, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} is an int, not {type(value).__name__}") from None


def flag_arg(value: Any, what: str) -> bool:
    """A flag (``discard``, ``force``): True or False, the int 0 or 1
    (anything with ``__index__``), or a bool scalar of another library
    (``numpy.bool_``): a value that is not a number and equals exactly one
    of True and False, its own truth value. TypeError for anything else,
    naming its type. A truth value alone is never taken: a flag decides
    what is lost (``discard=True``: the blocks' bytes; ``force=True``:
    live blocks' memory), and ``"False"``, ``"no"``, ``2.5`` or a list
    are true; a float (``0.0``) is refused as a number that is not an
    int."""
    if isinstance(value, bool):
        return value
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number in (0, 1):
        return bool(number)
    if number is None and not isinstance(value, numbers.Number):
        try:
            truth = bool(value)
            # == may answer a scalar of its own (numpy.bool_) or raise;
            # equal to both (unittest.mock.ANY) is no flag
            if bool(value == truth) and not bool(value == (not truth)):
                return truth
        except Exception:
            pass
    raise TypeError(f"{what} is a bool (True or False, 0 or 1, or a bool scalar such as numpy.bool_), "
                    f"not {value!r} ({type(value).__name__})")


def count_arg(lib: _lib.Library, value: Any, what: str) -> int:
    """A count (``max_leaks``): an int in [0, 2**64); TypeError for a bool or a non-int,
    :class:`InvalidArgumentError` out of range."""
    value = integer(value, what)
    if value < 0 or value >= SIZE_LIMIT:
        raise argument_error(lib, ERR_INVALID_ARGUMENT, f"{what} {value} not in [0, 2**64)")
    return value


def pointer_arg(lib: _lib.Library, ptr: Any) -> int:
    """An address: an int in [0, 2**64) (anything with ``__index__``; None is
    NULL, as ctypes gives it), else :class:`InvalidPointerError`."""
    if ptr is None:
        return 0
    try:
        value = None if isinstance(ptr, bool) else operator.index(ptr)
    except TypeError:
        value = None
    if value is None:
        raise argument_error(lib, ERR_INVALID_POINTER, f"{ptr!r} is not an address (an int)")
    if value < 0 or value >= SIZE_LIMIT:
        raise argument_error(lib, ERR_INVALID_POINTER, f"address {value:#x} not in [0, 2**64)")
    return value


def device_arg(lib: _lib.Library, device: Any) -> int:
    """A device number: an int (TypeError for a bool or another type) that
    C's int holds, else :class:`InvalidArgumentError`; the library itself
    refuses the ints that name no device."""
    value = integer(device, "a device")
    if value < INT_MIN or value > INT_MAX:
        raise argument_error(lib, ERR_INVALID_ARGUMENT, f"device {value} not in C's int range")
    return value


def c_string(lib: _lib.Library, text: str, what: str, status: int = ERR_INVALID_ARGUMENT) -> bytes:
    """``text`` as the UTF-8 bytes of a C string; one with a NUL (where C
    would end it) or a lone surrogate (no UTF-8 for it: what os.fsdecode
    makes of a byte that is not UTF-8) raises the :class:`Error` of
    ``status``, the one the argument's other bad values get
    (:class:`ConfigError` for configuration texts)."""
    if not isinstance(text, str):
        raise TypeError(f"{what} is a str, not {type(text).__name__}")
    if "\0" in text:
        raise argument_error(lib, status, f"{what} {text!r} contains a NUL character")
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise argument_error(lib, status, f"{what} {text!r} is not UTF-8 text (a lone surrogate)") from None


VM_BACKINGS = {None: 0, "whole_maps": 0, "pages": 1}  # CCA_VM_WHOLE_MAPS, CCA_VM_PAGES


def backing_arg(lib: _lib.Library, vm_backing: Any) -> int:
    """``vm_backing`` as ``cca_*_options.vm_backing``: None or "whole_maps"
    0 (CCA_VM_WHOLE_MAPS), "pages" 1 (CCA_VM_PAGES); another str is
    :class:`InvalidArgumentError`, another type TypeError."""
    if vm_backing is not None and not isinstance(vm_backing, str):
        raise TypeError(f"vm_backing is None, 'pages' or 'whole_maps', not {type(vm_backing).__name__}")
    if vm_backing not in VM_BACKINGS:
        raise argument_error(lib, ERR_INVALID_ARGUMENT,
                             f"vm_backing {vm_backing!r} is neither 'pages' nor 'whole_maps'")
    return VM_BACKINGS[vm_backing]


HOST_MEMORIES = {None: 0, "pinned": 0, "registered": 1}  # CCA_HOST_MEMORY_PINNED, CCA_HOST_MEMORY_REGISTERED


def host_memory_arg(lib: _lib.Library, host_memory: Any, cuda: bool) -> int:
    """``host_memory`` as ``cca_cuda_options.host_memory``: None or "pinned"
    0 (CCA_HOST_MEMORY_PINNED), "registered" 1 (CCA_HOST_MEMORY_REGISTERED);
    another str, or any but None for the simulated device (its host memory
    is its own), is :class:`InvalidArgumentError`, another type TypeError."""
    if host_memory is not None and not isinstance(host_memory, str):
        raise TypeError(f"host_memory is None, 'pinned' or 'registered', not {type(host_memory).__name__}")
    if host_memory not in HOST_MEMORIES:
        raise argument_error(lib, ERR_INVALID_ARGUMENT,
                             f"host_memory {host_memory!r} is neither 'pinned' nor 'registered'")
    if host_memory is not None and not cuda:
        raise argument_error(lib, ERR_INVALID_ARGUMENT,
                             "host_memory is an option of a CUDA device (device=...), not of the simulated one")
    return HOST_MEMORIES[host_memory]


def parse_size(lib: _lib.Library, size: Size, what: str = "size", exact: bool = False) -> int:
    """An int as is (in [0, 2**64); numpy integers too), or a size text as
    ``cca_parse_size`` reads it ("64M", "1.5G"). ``what`` is the parameter's
    name, the first word of every refusal: "keep 18446744073709551616 not
    in [0, 2**64)", "vm_granularity '5x': bad size '5x' (expected ...)",
    "capacity is an int or a size text like '64M', not float". ``exact``: a
    text whose value is not a whole number of bytes is refused
    (``cca_parse_size_exact``: "4096.5" is no page) instead of rounded
    down."""
    if isinstance(size, str):
        out = ctypes.c_size_t()
        lib.cca_clear_error()
        parse = lib.cca_parse_size_exact if exact else lib.cca_parse_size
        status = parse(c_string(lib, size, what), ctypes.byref(out))
        if status != OK:
            message = _text(lib.cca_last_error()) or "not a size like 64M"
            raise argument_error(lib, status, f"{what} {size!r}: {message}")
        return out.value
    if isinstance(size, bool):
        raise TypeError(f"{what} is an int or a size text like '64M', not a bool")
    try:
        value = operator.index(size)
    except TypeError:
        raise TypeError(f"{what} is an int or a size text like '64M', not {type(size).__name__}") from None
    if value < 0 or value >= SIZE_LIMIT:
        raise argument_error(lib, ERR_INVALID_ARGUMENT, f"{what} {value} not in [0, 2**64)")
    return value


def stream_arg(lib: _lib.Library, stream: Any) -> Optional[int]:
    """None or a handle in [0, 2**64), else :class:`InvalidArgumentError`.

    A handle is an int (anything with ``__index__``: numpy integers), or an
    object that is not a number (no ``__float__``) and converts with
    ``__int__`` (cuda-python's ``CUstream`` has ``__int__`` only). Not
    ``int(stream)`` on anything: it
    truncates a float or a Fraction (1.5 would be stream 1) and parses a str
    ("12" would be stream 12), so those, bytes and a bool are a TypeError.
    """
    if stream is None:
        return None
    if isinstance(stream, bool):
        raise TypeError("a stream is None or an int handle, not a bool")
    try:
        value = operator.index(stream)
    except TypeError:
        kind = type(stream)
        # a number in disguise (a 0-d float array, a float tensor: __int__
        # would truncate it) has __float__; a handle object does not
        if isinstance(stream, numbers.Number) or not hasattr(kind, "__int__") or hasattr(kind, "__float__"):
            raise TypeError(f"a stream is None or an int handle, not {type(stream).__name__}") from None
        value = int(stream)
    if value < 0 or value >= SIZE_LIMIT:
        raise argument_error(lib, ERR_INVALID_ARGUMENT, f"stream handle {value:#x} not in [0, 2**64)")
    return value or None


def _write_via_memory(fn, binary: bool = False):
    """Call ``fn(FILE *)`` on a stream into host memory (``open_memstream``)
    and return what it wrote (``str``, or ``bytes`` when ``binary``).

    No descriptor and no disk: a value the caller asked for (``config()``,
    ``snapshot()``) does not fail for a file-size limit, a full temporary
    directory or descriptors run out. A stream that cannot grow (no host
    memory) fails the writer (``WriteError``) or its close (``MemoryError``).
    """
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    f = _lib.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        raise MemoryError("no host memory for the stream a snapshot is written into")
    try:
        try:
            fn(f)
        finally:
            closed = _lib.fclose(f) == 0  # sets buf and size, whatever fn did
        if not closed:
            raise MemoryError("no host memory for the stream a snapshot is written into")
        data = ctypes.string_at(buf.value, size.value) if size.value else b""
    finally:
        _lib.libc_free(buf)
    return data if binary else data.decode("utf-8")


def _open_nowait(path: str) -> Any:
    """``open(path, "wb")`` that never waits for a FIFO's reader (as
    common/ccai_open.h does for ``ccrun --snapshot``): opened with
    O_NONBLOCK, a FIFO nobody reads fails at once (ENXIO, said in words),
    then the descriptor blocks again, so a FIFO with a reader and a regular
    file are written as by ``open``."""
    fd = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        os.set_blocking(fd, True)
        w = os.fdopen(fd, "wb")
    except OSError as e:
        if fd is not None:
            os.close(fd)
        if e.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "a FIFO nobody reads (refused rather than waited for)", path) from None
        raise
    return w


def _refuse_copy(self, *args) -> None:
    """``__copy__``, ``__deepcopy__`` and ``__reduce_ex__`` of an object that
    owns C memory through a handle (an Allocator, its Domain): a copy would
    be a second owner of the same ``cca_allocator`` / ``cca_domain``, and
    closing one would leave the other using freed memory (a second
    ``cca_destroy`` when it is collected). The handle means nothing in
    another process either. Share the object itself."""
    raise TypeError(f"a ccalloc.{type(self).__name__} owns C memory and cannot be copied or pickled "
                    "(share the object itself)")


@dataclass(frozen=True)
class ReleaseReport:
    """What ``trim`` / ``empty_cache`` gave back (``cca_release_report``, same field names)."""

    bytes_released: int
    segments_released: int
    bytes_still_reserved: int
    segments_kept: int
    segments_pinned: int
    live_bytes_pinning: int
    free_bytes_pinned: int
    pages_unmapped: int
    bytes_unmapped: int
    free_bytes_trapped: int
    asleep_domains: int
    host_bytes: int


@dataclass(frozen=True)
class LiveBlock:
    """One block a domain release found live (``cca_live_block``)."""

    ptr: int
    size: int
    requested: int
    stream: Optional[int]
    age: int
    pending: bool


@dataclass(frozen=True)
class DomainReport:
    """What a domain release did (``cca_domain_report``); ``leaks`` lists the first live blocks found."""

    bytes_released: int
    segments_released: int
    bytes_still_reserved: int
    live_blocks: int
    live_bytes: int
    leaks: List[LiveBlock] = field(default_factory=list)


class SleepReport(NamedTuple):
    """What a sleep or a wake did (``cca_sleep_report``, same field names)."""

    blocks: int  # sleep: live blocks copied (or discarded) out; wake: those the sleep recorded, freed too
    bytes_copied: int  # live bytes copied out (sleep) or back (wake)
    bytes_unmapped: int  # device memory given back (sleep)
    bytes_mapped: int  # device memory mapped again (wake)
    host_bytes: int  # host memory holding the copies (sleep: taken; wake: given back)


def _sleep_call(allocator: "Allocator", fn, *args) -> SleepReport:
    """``fn(handle, *args, &report)`` through the allocator's guard; the
    report, or the call's error raised."""
    lib = allocator._lib
    r = _lib.out_struct(_lib.SleepReport)
    raise_for(lib, allocator._c(fn, *args, ctypes.byref(r)))
    return SleepReport(**_lib.as_dict(r))


# Every Allocator this process made, for the fork handler below.
_ALLOCATORS: "weakref.WeakSet[Allocator]" = weakref.WeakSet()


def _calls_anew_in_child() -> None:
    # A child of fork() has only the forking thread: another thread's calls
    # counted in flight never leave there (close would wait for ever), and
    # a thread switched out inside the guard's lock leaves it held. (The C
    # locks are the library's fork handler's: fork.c.)
    for a in list(_ALLOCATORS):
        a._init_calls()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_calls_anew_in_child)


class Allocator:
    """A libccalloc allocator over the simulated device or a CUDA device.

    ``Allocator(capacity="1G")``: a simulated device of that many bytes
    (host memory behaving like a GPU; every allocator path works without
    one), at least the host page (4 KiB on x86-64): a smaller one could
    hold nothing and raises ``InvalidArgumentError``, naming the page. ``Allocator(device=0)``: CUDA device 0 (``NoDeviceError`` without a
    GPU or in a build without CUDA). ``conf``: ``"key:value,..."`` as
    ``CCALLOC_CONF`` (docs/allocator.md, Options); None = defaults plus
    ``CCALLOC_CONF``. ``vm_granularity``: the page of expandable segments
    (``expandable:1``, the default wherever the device has virtual memory:
    always on the simulated device; ``expandable:0`` for classic
    segments), each map a whole number of pages: the simulated
    device's ``cca_host_options.vm_granularity`` or the CUDA upstream's
    ``cca_cuda_options.vm_granularity`` (a power of two; None or 0 = 2 MiB
    on the simulated device, the driver's minimum on a GPU; larger pages
    map in fewer driver calls and give memory back in larger steps,
    docs/tuning.md). A value the C library refuses raises
    ``InvalidArgumentError``. ``vm_backing``: how the memory behind each
    virtual-memory map is kept, ``cca_host_options.vm_backing`` or
    ``cca_cuda_options.vm_backing``: None or ``"whole_maps"`` (the
    default, ``CCA_VM_WHOLE_MAPS``: one physical allocation per map, given
    back whole), ``"pages"`` (``CCA_VM_PAGES``: one physical allocation per
    page, any run of pages can be given back);
    another str raises ``InvalidArgumentError``, another type ``TypeError``,
    before anything is made. ``host_memory`` (a CUDA device only): where a
    sleeping domain's copy is kept, ``cca_cuda_options.host_memory``: None
    or ``"pinned"`` (the default, ``cudaMallocHost``), ``"registered"``
    (huge pages pinned by ``cudaHostRegister``); another str, or a value
    with ``capacity``, raises ``InvalidArgumentError``, another type
    ``TypeError``, before anything is made.

    Not copyable nor picklable (``TypeError``): it owns the C allocator.

    Use as a context manager, or call :meth:`close`. All methods may be
    called from several threads at once (the C allocator has its own lock),
    ``close`` included: it waits for the calls in flight on other threads
    to leave, and every call after it raises :class:`InvalidArgumentError`.
    """

    def __init__(self, capacity: Optional[Size] = None, *, device: Optional[int] = None,
                 conf: Optional[str] = None, library: Optional[str] = None,
                 vm_granularity: Optional[Size] = None, vm_backing: Optional[str] = None,
                 host_memory: Optional[str] = None) -> None:
        self._lib = _lib.load(library)
        self._handle: Optional[int] = None
        self._init_calls()
        self._upstream: Optional[int] = None
        self._owned = True
        self._valid: Optional[Callable[[], bool]] = None
        self._device = 0  # the device number its PyTorch-format snapshot names by default
        if (capacity is None) == (device is None):
            raise TypeError("give exactly one of capacity (simulated device) or device (CUDA)")
        lib = self._lib
        up, a = ctypes.c_void_p(), ctypes.c_void_p()
        lib.cca_clear_error()
        page = 0 if vm_granularity is None else parse_size(lib, vm_granularity, "vm_granularity", exact=True)
        backing = backing_arg(lib, vm_backing)
        host = host_memory_arg(lib, host_memory, capacity is None)
        # What the C calls made is undone if anything fails or is cut short
        # (a signal handler's exception can come at any point a handler
        # runs: just after a C call returned, too): the allocator first,
        # then its device. Once _handle is set, __del__ owns them.
        try:
            if capacity is not None:
                ho = _lib.HostOptions(capacity=parse_size(lib, capacity, "capacity"), vm_granularity=page,
                                      vm_backing=backing)
                raise_for(lib, lib.cca_upstream_host_create_with(ctypes.byref(ho), ctypes.byref(up)))
            else:
                self._device = device_arg(lib, device)
                co = _lib.CudaOptions(device=self._device, vm_granularity=page, vm_backing=backing,
                                      host_memory=host)
                raise_for(lib, lib.cca_upstream_cuda_create_with(ctypes.byref(co), ctypes.byref(up)))
            cfg = None
            if conf is not None:
                cfg = (ctypes.c_char * _lib.CONFIG_BYTES)()
                lib.cca_config_default(cfg)
                raise_for(lib, lib.cca_config_parse(cfg, c_string(lib, conf, "conf", ERR_CONFIG)))
                raise_for(lib, lib.cca_config_validate(cfg))
            raise_for(lib, lib.cca_create(cfg, up, ctypes.byref(a)))
        except BaseException:
            if a.value:
                lib.cca_destroy(a)
            if up.value:
                lib.cca_upstream_destroy(up)
            raise
        self._upstream, self._handle = up.value, a.value  # no handler runs between these two
        _ALLOCATORS.add(self)

    @classmethod
    def _borrow(cls, lib: _lib.Library, handle: int, upstream: int, device: int,
                valid: Optional[Callable[[], bool]] = None) -> "Allocator":
        """A view of an allocator owned elsewhere (the plug table): close() does not destroy it.

        ``device``: the device number it serves. ``valid``: False once the
        owner has destroyed the allocator (``ccalloc.plug.reset``); the view
        is closed from then on.
        """
        self = cls.__new__(cls)
        self._lib = lib
        self._handle = handle
        self._upstream = upstream
        self._owned = False
        self._valid = valid
        self._device = device
        self._made: "weakref.WeakSet[Any]" = weakref.WeakSet()  # domains made through this view (close refuses)
        self._init_calls()
        _ALLOCATORS.add(self)  # a child of fork() forgets its calls in flight, as an owned one's
        return self

    # ---- lifetime ---------------------------------------------------------

    def _live_handle(self) -> Optional[int]:
        """The handle, or None when closed (a view whose owner destroyed the allocator is closed here)."""
        if self._handle is not None and self._valid is not None and not self._valid():
            self._handle = None
            self._upstream = None
        return self._handle

    # Calls in flight. ctypes releases the GIL for every C call, so another
    # thread's close() could destroy the allocator under a call (a
    # use-after-free in C). Every call therefore goes through _c / _cu: the
    # handle is taken, and the call entered in _inflight (a token of its
    # own -> its thread), under _lock; close() takes the handle away under
    # the same lock (new calls raise "closed"), then waits until _inflight
    # is empty before cca_destroy. A thread that closes from inside one of
    # its own calls (a log callback) is refused: it would wait for itself.
    # The lock is never held across a C call.
    #
    # Signals. A Python signal handler runs at the next check of the
    # interpreter's loop (a function's entry, a C function's return) and its
    # exception (KeyboardInterrupt) comes out of whatever ran there. So the
    # entry is made inside the try whose finally removes it, and the removal
    # is one C call (dict.pop: the exception can come only after it), made
    # without the lock (Lock.acquire runs handlers while it waits): a call
    # interrupted anywhere is never left counted, which would make close()
    # wait for ever. close() polls for the end of the calls in flight
    # rather than waiting on a condition that such an exception could keep
    # from being notified. Nothing is called while _lock is held (no
    # function, no method: attribute and dict operations only), so no
    # handler runs there: one that closes the
    # allocator (a SIGTERM handler's clean-up) would wait for ever for a
    # lock its own thread holds. A view's validity is asked before it.

    def _init_calls(self) -> None:
        self._lock = threading.Lock()
        self._inflight: Dict[object, int] = {}  # one token per call in flight -> its thread's ident
        # A view's domains being made (token -> the making thread's ident,
        # from before the C call until the domain is in _made) and how many
        # were made (counted under _lock): close() refuses by _made, so it
        # waits for the first (refused on the making thread itself) and
        # sees the second change under its lock (see close()).
        self._creating: Dict[object, int] = {}
        self._made_count = getattr(self, "_made_count", 0)

    def _closed_error(self) -> Error:
        return argument_error(self._lib, ERR_INVALID_ARGUMENT, "the allocator is closed")

    def _c(self, fn, *args, upstream: bool = False, into: Optional[List[Any]] = None):
        """``fn(handle, *args)`` (``upstream``: ``fn(upstream handle, *args)``),
        the allocator kept open until it returns. ``into``: a list that
        gets fn's result appended before any handler can run (see _making)."""
        me = threading.get_ident()
        inflight = self._inflight
        token = object()
        try:
            live = self._valid is None or self._valid()  # a view: before the lock (a Python call)
            with self._lock:  # no call in here: no handler runs with it held
                if not live:
                    self._handle = self._upstream = None
                handle = self._handle
                if handle is not None:
                    inflight[token] = me
                    if upstream:
                        handle = self._upstream
            if handle is None:
                raise self._closed_error()
            if into is not None:
                # list.extend calls fn from C and stores its result before
                # returning: no bytecode, so no handler, runs in between
                into.extend(itertools.starmap(fn, ((handle,) + args,)))
                return into[-1]
            return fn(handle, *args)
        finally:
            inflight.pop(token, None)  # one C call: nothing runs between the finally and it

    def _cu(self, fn, *args):
        """``fn(upstream, *args)`` for the allocator's device, the same way."""
        return self._c(fn, *args, upstream=True)

    @property
    def handle(self) -> int:
        """The ``cca_allocator *`` as an int (for ctypes/cffi callers; a call
        made with it is not waited for by :meth:`close`)."""
        handle = self._live_handle()
        if handle is None:
            raise self._closed_error()
        return handle

    @property
    def closed(self) -> bool:
        """True after :meth:`close`, and for a view of ``ccalloc.plug.allocator`` after ``plug.reset()``."""
        return self._live_handle() is None

    def close(self) -> None:
        """Destroy the allocator and its device (every segment back to it).

        Blocks still live are released too, and :class:`LiveBlocksError` is
        raised afterwards: the allocator is closed either way. A borrowed
        allocator (``ccalloc.plug.allocator``) is only detached, and
        refused (:class:`InvalidArgumentError`, nothing changes) while a
        domain made through it is not destroyed: the domain would be
        unusable with its memory still in the device's allocator (a
        domain another thread is making through it is waited for, then
        counted). Closing twice does nothing. Calls in flight on other
        threads are waited for; from inside a call on this allocator (a
        log callback), or on a thread making a domain through the view (a
        signal handler's clean-up), it raises
        :class:`InvalidArgumentError` and changes nothing.
        """
        view = not getattr(self, "_owned", True)
        me = threading.get_ident()
        handle = upstream = None
        try:
            busy = True
            while busy:
                # A view: refused while a domain made through it lives. The
                # list is read before the lock (its reads are calls); a
                # domain being made, or made since (the count moved), is
                # seen under the lock, and the view waits and asks again.
                # A domain asked for once the handle is taken raises "closed".
                made = self._made_count
                if view and self._live_handle() is not None:
                    # of a copy (set.copy is one C call): another thread's
                    # add or a domain's end changes the set under a loop
                    domains = (ref() for ref in self._made.data.copy())
                    alive = [d.name for d in domains if d is not None and not d.destroyed]
                    if alive:
                        raise argument_error(self._lib, ERR_INVALID_ARGUMENT,
                                             f"close() of a plug view with {len(alive)} domain(s) made through it "
                                             f"not destroyed ({', '.join(repr(n) for n in alive[:4])}): destroy "
                                             "them first (ccalloc.plug.reset() closes both)")
                # Inside a call of its own? Only this thread adds or removes
                # its tokens, so the answer holds until the lock; asked
                # before it (a call) and of a copy: other threads' tokens
                # come and go without the lock, and iterating the dict
                # itself could meet a change of size on a free-threaded
                # build (dict.copy is atomic).
                inside = me in self._inflight.copy().values() or me in self._creating.copy().values()
                with self._lock:  # no call in here: no handler runs with it held
                    refused = self._handle is not None and inside
                    busy = view and not refused and (bool(self._creating) or self._made_count != made)
                    if self._handle is not None and not refused and not busy:
                        handle, upstream = self._handle, self._upstream
                        self._handle = None  # from here every new call raises "closed"
                if busy:
                    time.sleep(0.0002)  # polled, as the calls in flight below
            if refused:
                raise argument_error(self._lib, ERR_INVALID_ARGUMENT,
                                     "close() from inside a call on this allocator (a log callback? a handler "
                                     "run while this thread makes a domain through it?) is refused: the call "
                                     "would go on with a destroyed allocator")
            if handle is None:
                return
            while self._inflight:  # the calls already in C finish first (polled: see "Signals" above)
                time.sleep(0.0002)
        except BaseException:  # interrupted (KeyboardInterrupt) before the destroy: not closed
            if handle is not None:
                self._handle = handle
            raise
        self._upstream = None
        if not self._owned:
            return
        lib = self._lib
        try:
            st = lib.cca_destroy(handle)
            message = _text(lib.cca_last_error())
        finally:  # cut short after the destroy (a handler runs at its return): the device goes too
            lib.cca_upstream_destroy(upstream)
        if st != OK:
            raise error_class(st)(st, _text(lib.cca_status_string(st)), message)

    __copy__ = __deepcopy__ = __reduce_ex__ = _refuse_copy

    def __enter__(self) -> "Allocator":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            try:
                self.close()
            except Error:
                pass  # the exception in flight says more

    def __del__(self) -> None:
        # never raise from a finalizer; live blocks die with the allocator
        try:
            if getattr(self, "_handle", None) is not None and self._owned:
                self._lib.cca_destroy(self._handle)
                self._lib.cca_upstream_destroy(self._upstream)
                self._handle = None
        except Exception:
            pass

    # ---- allocation ---------------------------------------------------------

    def alloc(self, size: Size, stream: Any = None) -> int:
        """A block of at least ``size`` bytes, its address as an int.

        Rounded up to 512 bytes, 256-byte aligned. ``size`` 0 returns 0 (no
        block). Raises :class:`OutOfMemoryError` when the device (or
        ``max_reserved``) cannot hold it, after the allocator's one retry.
        """
        return self._alloc_in(None, size, stream)

    def _alloc_in(self, domain: Optional[int], size: Size, stream: Any) -> int:
        lib = self._lib
        n = parse_size(lib, size)
        s = stream_arg(lib, stream)
        out = ctypes.c_void_p()

        def alloc() -> None:
            if domain is None:
                st = self._c(lib.cca_alloc, n, s, ctypes.byref(out))
            else:
                st = self._c(lib.cca_alloc_in, domain, n, s, ctypes.byref(out))
            raise_for(lib, st)

        self._making(out, alloc, lib.cca_free)  # cut short after the block was made: freed again
        return out.value or 0  # nothing between _making's return and here runs a handler

    def _making(self, out: ctypes.c_void_p, body: Callable[[], Any], undo, *undo_args) -> Any:
        """``body()``, whose C call makes something (a block, a domain) and
        sets ``out`` to it; when anything cuts it short after that (a signal
        handler's exception, KeyboardInterrupt, before it returned),
        ``undo(handle, out, *undo_args)`` gives it back before the exception
        goes on, so that nothing is left that no one can give back. The
        undo's failure is dropped (the exception in flight says more).

        A second handler's exception (two signals in a row) can come before
        undo ran or just after it returned: ``ran`` tells them apart, as it
        holds undo's status as soon as undo returned (_c's ``into``).
        Before undo ran it is tried again; never twice, since a second free
        of an address another thread has since been given would free that
        block. The undo loop sits in this except clause itself: a handler
        can run at any function's entry, so a loop inside a function called
        from here could be cut short before it began. The last such
        exception is raised once undo has run (Python's way: it replaces
        the one in flight, chained to it). Limits: the loop's back edge is
        itself a point where a handler runs, so a third exception arriving
        exactly there still leaves the block; and after 100 tries cut short
        (an exception that comes every time, MemoryError) it gives up
        rather than loop for ever."""
        try:
            return body()
        except BaseException:
            ran: List[int] = []
            later: Optional[BaseException] = None
            tries = 0
            while not ran and out.value and tries < 100:
                tries += 1
                try:
                    self._c(undo, out.value, *undo_args, into=ran)
                except Error:
                    break  # refused before undo ran: the allocator is closed, and what was made went with it
                except BaseException as e:
                    later = e
            if later is not None:
                raise later
            raise

    def free(self, ptr: int) -> None:
        """Give a block back to the cache (not to the device). 0 does nothing.

        A double free, an address that is not a live block's start, or one
        that is not an int in [0, 2**64): :class:`InvalidPointerError`, and
        nothing changes.
        """
        address = pointer_arg(self._lib, ptr)
        if not address:
            return
        raise_for(self._lib, self._c(self._lib.cca_free, address))

    def block_size(self, ptr: int) -> int:
        """Bytes actually held for a live block (rounded; maybe unsplit slack)."""
        out = ctypes.c_size_t()
        raise_for(self._lib, self._c(self._lib.cca_block_size, pointer_arg(self._lib, ptr), ctypes.byref(out)))
        return out.value

    def record_stream(self, ptr: int, stream: Any) -> None:
        """Mark a live block as used on ``stream`` too (reused after that stream's work completes)."""
        raise_for(self._lib, self._c(self._lib.cca_record_stream, pointer_arg(self._lib, ptr),
                                          stream_arg(self._lib, stream)))

    # ---- giving memory back ---------------------------------------------------

    def trim(self, keep: Size = 0) -> ReleaseReport:
        """Give cached memory back until at most ``keep`` bytes stay reserved.

        Raises on the errors ``cca_trim`` reports (an upstream refusing a
        segment, a failed synchronize); what it released stays released.
        """
        lib = self._lib
        r = _lib.out_struct(_lib.ReleaseReport)
        raise_for(lib, self._c(lib.cca_trim, parse_size(lib, keep, "keep"), ctypes.byref(r)))
        return ReleaseReport(**_lib.as_dict(r))

    def empty_cache(self) -> ReleaseReport:
        """Everything cached back to the device: ``trim(0)``.

        With no live blocks, ``stats()["reserved_bytes"]`` is 0 afterwards.
        """
        lib = self._lib
        r = _lib.out_struct(_lib.ReleaseReport)
        raise_for(lib, self._c(lib.cca_empty_cache, ctypes.byref(r)))
        return ReleaseReport(**_lib.as_dict(r))

    # ---- sleep and wake ------------------------------------------------------

    def sleep(self, discard: bool = False) -> SleepReport:
        """Every domain to sleep (``cca_sleep``): the default first, then in
        creation order; the device gets all of their mapped memory back, the
        live blocks' bytes go to host memory (``discard=True``: nothing is
        copied, contents undefined after the wake), every address is kept.
        ``discard`` is a flag (True, False, 0, 1 or a ``numpy.bool_``):
        another value raises TypeError before any call, never read as its
        truth value.

        All or nothing: a domain that refuses wakes again the ones this call
        put to sleep and its error is raised (:class:`UpstreamError` for
        classic segments, ``conf="expandable:0"``); with ``discard=True``
        every domain's waits come first, so a refused wait discards nothing
        (only a host-memory refusal after them wakes discarded domains with
        undefined contents, as the message says). Domains asleep already
        stay so. See :meth:`Domain.sleep` for one domain.
        """
        return _sleep_call(self, self._lib.cca_sleep, SLEEP_DISCARD if flag_arg(discard, "discard") else 0)

    def wake(self) -> SleepReport:
        """Wake every sleeping domain (``cca_wake``), same order.

        The pages of all of them are counted first: the device (or
        ``max_reserved``) short raises :class:`OutOfMemoryError` and nothing
        is woken. A refusal after that stops there: the domains woken before
        it stay awake, the rest asleep with their copies; call again once
        the cause is gone. No domain asleep: a report of zeros.
        """
        return _sleep_call(self, self._lib.cca_wake)

    # ---- statistics --------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """``cca_stats`` as a dict with the C field names (docs/allocator.md)."""
        s = _lib.out_struct(_lib.Stats)
        self._c(self._lib.cca_get_stats, ctypes.byref(s))
        return _lib.as_dict(s)

    def reset_peak_stats(self) -> None:
        """Every ``*_peak`` to its current value."""
        self._c(self._lib.cca_reset_peak_stats)

    def upstream_stats(self) -> Dict[str, Any]:
        """The device's own accounting (``cca_upstream_stats``), shared by its tenants."""
        s = _lib.out_struct(_lib.UpstreamStats)
        raise_for(self._lib, self._cu(self._lib.cca_upstream_get_stats, ctypes.byref(s)))
        return _lib.as_dict(s)

    def mem_info(self) -> Tuple[int, int]:
        """``(free, total)`` bytes of the device, as the driver counts them (cudaMemGetInfo)."""
        free_b, total = ctypes.c_size_t(), ctypes.c_size_t()
        raise_for(self._lib, self._cu(self._lib.cca_upstream_mem_info, ctypes.byref(free_b), ctypes.byref(total)))
        return free_b.value, total.value

    @property
    def device_name(self) -> str:
        """The upstream's name: ``"host-simulated"`` or ``"cuda:N"``."""
        return _text(self._cu(self._lib.cca_upstream_name))

    def config(self) -> Dict[str, str]:
        """The configuration in force, ``{option: value}`` as ``cca_config_print`` writes it."""
        cfg = (ctypes.c_char * _lib.CONFIG_BYTES)()
        raise_for(self._lib, self._c(self._lib.cca_get_config, cfg))
        text = _write_via_memory(lambda f: raise_for(self._lib, self._lib.cca_config_print(cfg, f, 0)))
        out: Dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                out[key.strip()] = value.strip()
        return out

    def snapshot(self) -> Dict[str, Any]:
        """The whole allocator (``cca_write_snapshot_json``) parsed: config, stats, domains,
        and every segment with its blocks in address order."""
        text = _write_via_memory(lambda f: raise_for(self._lib, self._c(self._lib.cca_write_snapshot_json, f)))
        return json.loads(text)

    def snapshot_torch(self, path: Optional[str] = None, device: Optional[int] = None) -> Dict[str, Any]:
        """The allocator in the structure ``torch.cuda.memory._snapshot()`` returns
        (``cca_write_snapshot_torch``: segments with their blocks, the history
        ring's events as ``device_traces`` (empty unless the config has
        ``history:N``), ``allocator_settings``), unpickled; written to ``path``
        as well when given, for ``python -m torch.cuda._memory_viz`` and
        pytorch.org/memory_viz. ``device`` names the device in the file
        (0..1023); None: the allocator's own (``Allocator(device=N)``'s N,
        ``ccalloc.plug.allocator(N)``'s N, 0 for a simulated device).
        ``path`` is a str, bytes or ``os.PathLike``, checked before anything
        is written: another type raises TypeError (an int is not taken as a
        file descriptor, as ``open()`` would, writing into it and closing
        it), a NUL in it ValueError; the file's own failures raise
        ``OSError``, a FIFO nobody reads among them (ENXIO, at once: never
        waited for)."""
        if path is not None:
            path = _lib.path_arg(path, "path")
            if "\0" in path:
                raise ValueError(f"path {path!r} contains a NUL character")
        d = device_arg(self._lib, self._device if device is None else device)
        data = _write_via_memory(
            lambda f: raise_for(self._lib, self._c(self._lib.cca_write_snapshot_torch, d, f)),
            binary=True)
        if path is not None:
            with _open_nowait(path) as w:
                w.write(data)
        return pickle.loads(data)

    def check(self) -> None:
        """Walk every internal invariant (``cca_check_invariants``: O(blocks + segments + pages / 64) under
        the allocator's lock, for tests); :class:`InvariantError` if one is broken."""
        raise_for(self._lib, self._c(self._lib.cca_check_invariants))

    def mark(self, name: str) -> None:
        """A phase mark in the ``CCALLOC_TRACE`` trace (no-op when not tracing,
        but a bad name, not 1..63 printable ASCII characters without ``,`` or
        ``"``, raises :class:`InvalidArgumentError` all the same, as
        ``cca_trace_mark`` refuses it)."""
        raise_for(self._lib, self._c(self._lib.cca_trace_mark, c_string(self._lib, name, "mark")))

    # ---- domains -----------------------------------------------------------

    def domain(self, name: str) -> "Domain":
        """A new memory domain (needs ``policy:growth``, the default).

        ``with a.domain("resnet50") as d: p = d.alloc(n)`` releases all of
        the domain's memory when the block ends, and raises
        :class:`LiveBlocksError` (with the leak report) if blocks are still
        live then; the domain then stays, with its blocks valid. When the
        block ends with an exception, that exception is the one raised: a
        failure of the domain's destroy is dropped (the domain stays).
        """
        return self._domain_create(name, lambda handle: Domain(self, handle, name))

    def _domain_create(self, name: str, make: Callable[[int], Any]) -> Any:
        """``cca_domain_create``, then ``make(handle)``: the object that owns
        the new domain (TypeError for a name that is not a str,
        :class:`InvalidArgumentError` for one the C library refuses). Cut
        short before that object is made and returned (a signal handler's
        exception), the domain is destroyed again."""
        out = ctypes.c_void_p()

        def create() -> Any:
            raise_for(self._lib, self._c(self._lib.cca_domain_create, c_string(self._lib, name, "domain name"),
                                         ctypes.byref(out)))
            made = make(out.value)
            if not self._owned:
                self._made.add(made)
                with self._lock:  # close() compares the count under it
                    self._made_count += 1
            return made

        if self._owned:
            return self._making(out, create, self._lib.cca_domain_destroy, 0, None)
        token = object()
        creating = self._creating
        try:
            creating[token] = threading.get_ident()  # before the C call: a close() from here on waits for it
            return self._making(out, create, self._lib.cca_domain_destroy, 0, None)
        finally:
            creating.pop(token, None)  # one C call, as _c's


def _leak_list(report: DomainReport, most: int = 4) -> str:
    """The first live blocks of a refused release, for the exception's
    message: ``0x7f00...: 4194304 bytes (requested 4000000), ...``."""
    shown = [f"{b.ptr:#x}: {b.size} bytes (requested {b.requested}{', pending' if b.pending else ''})"
             for b in report.leaks[:most]]
    more = report.live_blocks - len(shown)
    return ", ".join(shown) + (f" and {more} more (DomainReport.leaks in .report)" if more > 0 else "")


class Domain:
    """A named owner of segments inside one allocator (``cca_domain``), released whole."""

    def __init__(self, allocator: Allocator, handle: int, name: str) -> None:
        self.allocator = allocator
        self.name = name
        self._handle: Optional[int] = handle
        self._unsure = False  # a destroy() was cut short: whether the domain went is C's to say

    def _live_handle(self) -> Optional[int]:
        """The handle, or None once destroyed: by :meth:`destroy`, or with its
        allocator (``cca_destroy`` destroys every domain)."""
        if self._handle is not None and self.allocator.closed:
            self._handle = None
        if self._handle is not None and self._unsure:
            self._settle()
        return self._handle

    def _settle(self) -> None:
        """After a destroy cut short by a signal handler's exception (which
        may come before cca_domain_destroy ran or just after it returned):
        ask C whether the handle is still one of its domains. A handle is
        never given twice (domain.c), so a refusal means this domain went.
        Cut short again, it stays unsure and the next look asks again."""
        lib = self.allocator._lib
        s = _lib.out_struct(_lib.DomainStats)
        try:
            st = self.allocator._c(lib.cca_get_domain_stats, self._handle, ctypes.byref(s))
        except Error:
            return  # closed meanwhile: the domain went with it (_live_handle says so)
        if st == ERR_INVALID_ARGUMENT:
            self._handle = None
        if st in (OK, ERR_INVALID_ARGUMENT):
            self._unsure = False

    @property
    def handle(self) -> int:
        if self._live_handle() is None:
            lib = self.allocator._lib
            why = "the allocator is closed" if self.allocator.closed else "it was destroyed"
            raise error_class(ERR_INVALID_ARGUMENT)(ERR_INVALID_ARGUMENT,
                                                     _text(lib.cca_status_string(ERR_INVALID_ARGUMENT)),
                                                     f"domain '{self.name}' is destroyed: {why}")
        return self._handle

    @property
    def destroyed(self) -> bool:
        """True after :meth:`destroy`, and once its allocator is closed."""
        return self._live_handle() is None

    def __repr__(self) -> str:
        return f"<ccalloc.{type(self).__name__} {self.name!r}{' (destroyed)' if self.destroyed else ''}>"

    def alloc(self, size: Size, stream: Any = None) -> int:
        """``cca_alloc_in``: a block in this domain's own segments."""
        return self.allocator._alloc_in(self.handle, size, stream)

    def free(self, ptr: int) -> None:
        """Free a block (the same as ``Allocator.free``; the block knows its domain)."""
        self.allocator.free(ptr)

    def reserve(self, nbytes: Size) -> None:
        """Reserve a footprint arena of ``nbytes`` up front (``cca_domain_reserve``)."""
        lib = self.allocator._lib
        raise_for(lib, self.allocator._c(lib.cca_domain_reserve, self.handle, parse_size(lib, nbytes, "nbytes")))

    def stats(self) -> Dict[str, Any]:
        """``cca_domain_stats`` as a dict (``name`` as a str)."""
        lib = self.allocator._lib
        s = _lib.out_struct(_lib.DomainStats)
        raise_for(lib, self.allocator._c(lib.cca_get_domain_stats, self.handle, ctypes.byref(s)))
        d = _lib.as_dict(s)
        d["name"] = d["name"].decode("ascii", "replace")
        return d

    def sleep(self, discard: bool = False) -> SleepReport:
        """Give the domain's device memory back while its blocks stay live
        (``cca_domain_sleep``): its live blocks' bytes (each requested size
        rounded up to 512 bytes) are copied into host memory, then every
        mapped page of the domain is unmapped; the address ranges stay
        reserved, so every address is valid again after :meth:`wake`.
        ``discard=True`` copies nothing (contents undefined after the wake);
        ``discard`` is a flag (True, False, 0, 1 or a ``numpy.bool_``),
        TypeError for another value.

        While asleep: ``alloc`` raises :class:`AsleepError`, ``free``
        works (the block's copy is dropped, its host chunk given back with the
        chunk's last block), ``reserve`` raises
        :class:`AsleepError`, ``release`` / ``destroy`` work as when awake.
        Asleep already: nothing copied, a report of zeros (or the pages a
        refused unmap left, unmapped now). Classic segments
        (``conf="expandable:0"``) raise :class:`UpstreamError`, nothing
        changed.
        """
        a = self.allocator
        flags = SLEEP_DISCARD if flag_arg(discard, "discard") else 0
        return _sleep_call(a, a._lib.cca_domain_sleep, self.handle, flags)

    def wake(self) -> SleepReport:
        """Map the pages under the domain's live blocks again and copy their
        bytes back (``cca_domain_wake``), all or nothing: the device short
        raises :class:`OutOfMemoryError` and the domain stays asleep, its
        copy intact. Awake already: a report of zeros."""
        a = self.allocator
        return _sleep_call(a, a._lib.cca_domain_wake, self.handle)

    def _call(self, fn, force: bool, max_leaks: int) -> DomainReport:
        lib = self.allocator._lib
        flags = DOMAIN_FORCE if flag_arg(force, "force") else 0
        # max_leaks bounds the list; the buffer is only as long as the list
        # can be: every block of the allocator that is live or pending now
        # (active_blocks counts both). A huge max_leaks once meant a buffer
        # of that many entries: MemoryError or OverflowError. A block
        # allocated by another thread between this count and the call is
        # counted in live_blocks but may be left off the list.
        cap = count_arg(lib, max_leaks, "max_leaks")
        if cap:
            cap = min(cap, self.allocator.stats()["active_blocks"])
        leaks = (_lib.LiveBlock * max(cap, 1))()  # the C side writes at most leaks_cap entries
        r = _lib.out_struct(_lib.DomainReport)
        r.leaks = ctypes.cast(leaks, ctypes.POINTER(_lib.LiveBlock))
        r.leaks_cap = cap
        st = self.allocator._c(fn(lib), self.handle, flags, ctypes.byref(r))
        message = _text(lib.cca_last_error())
        report = DomainReport(
            bytes_released=r.bytes_released, segments_released=r.segments_released,
            bytes_still_reserved=r.bytes_still_reserved, live_blocks=r.live_blocks, live_bytes=r.live_bytes,
            leaks=[LiveBlock(ptr=leaks[i].ptr or 0, size=leaks[i].size, requested=leaks[i].requested,
                             stream=leaks[i].stream, age=leaks[i].age, pending=bool(leaks[i].pending))
                   for i in range(min(r.leaks_written, cap))],
        )
        if st != OK:
            if st == ERR_LIVE_BLOCKS and report.leaks:
                message += "; live: " + _leak_list(report)
            err = error_class(st)(st, _text(lib.cca_status_string(st)), message)
            if st == ERR_LIVE_BLOCKS:
                err.report = report  # type: ignore[attr-defined]
            raise err
        return report

    def release(self, force: bool = False, max_leaks: int = 16) -> DomainReport:
        """Give every segment of the domain back; the domain stays usable.

        Live blocks: nothing is released and :class:`LiveBlocksError` is
        raised with ``.report`` listing up to ``max_leaks`` of them
        (an int in [0, 2**64), any size: a bound, not a buffer to allocate;
        TypeError for another type, :class:`InvalidArgumentError` for a
        negative one, checked before anything is released).
        ``force=True`` releases them anyway: DANGEROUS, their memory goes
        back to the device while their pointers may still be in use
        (``cca_domain_release``, ccalloc.h). ``force`` is a flag (True,
        False, 0, 1 or a ``numpy.bool_``): TypeError for another value,
        before anything is released.
        """
        return self._call(lambda lib: lib.cca_domain_release, force, max_leaks)

    def destroy(self, force: bool = False, max_leaks: int = 16) -> DomainReport:
        """Release and free the domain; on failure it stays (see :meth:`release`).

        Cut short by a signal handler's exception (KeyboardInterrupt), the
        domain may have gone or not: ``destroyed`` then asks the library,
        and a domain that stayed is destroyed by the next call."""
        try:
            report = self._call(lambda lib: lib.cca_domain_destroy, force, max_leaks)
        except Error:
            raise  # the library's answer (or an argument refused before it): the domain stays
        except BaseException:
            self._unsure = True
            raise
        self._handle = None  # no handler runs between the return above and here
        return report

    __copy__ = __deepcopy__ = __reduce_ex__ = _refuse_copy

    def __enter__(self) -> "Domain":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.destroyed:  # by destroy(), or with its allocator
            return
        if exc_type is None:
            self.destroy()
        else:
            try:
                self.destroy()
            except Error:
                pass  # the exception in flight says more; a domain that failed to go stays, its blocks valid
