"""The per-device allocators behind the framework adapters (``cca_plug_*``).

PyTorch calls ``cca_plug_alloc`` / ``cca_plug_free`` in libccalloc directly;
the CuPy and Numba adapters call them through here. All three therefore
share one allocator per device in a process, and the functions below (stats,
trim, empty_cache, snapshot) see every framework's memory on that device.

Where memory comes from is chosen once, before the first allocation on any
device: :func:`configure`, else the environment (``CCALLOC_PLUG_UPSTREAM``,
``CCALLOC_CONF``), else the CUDA device with the defaults. With CUDA chosen
and no GPU, every allocation fails (``NoDeviceError``): there is no silent
fallback to the simulated device; choose it with
``configure(upstream="host:1G")``.

:func:`domain` makes a memory domain whose ``with`` block routes what the
frameworks allocate on the calling thread into it (``cca_plug_set_domain``):
``ccalloc.torch.domain`` and ``ccalloc.cupy.domain`` are this, with a check
that the adapter is enabled.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import _lib
from ._errors import ERR_CONFIG, ERR_INVALID_ARGUMENT, ERR_LIVE_BLOCKS, OK
from .allocator import (Allocator, Domain, DomainReport, ReleaseReport, _text, argument_error, c_string, device_arg,
                        parse_size, pointer_arg, raise_for, stream_arg)

MAX_DEVICES = 64  # CCA_PLUG_MAX_DEVICES

# Bumped by every reset that destroyed the allocators: a view from
# allocator() remembers the value it was made under and is closed once it
# changes (its allocator no longer exists).
_generation = 0

# What the last configure() since the last reset chose ((None, None): none,
# the environment's), so that an adapter whose framework refuses to be
# enabled can put it back: a refused enable changes nothing.
_configured: Tuple[Optional[str], Optional[str]] = (None, None)


def library() -> _lib.Library:
    """The loaded libccalloc (``.path`` is what PyTorch is given)."""
    return _lib.load()


def configure(upstream: Optional[str] = None, conf: Optional[str] = None) -> None:
    """Choose the upstream (``"cuda"`` or ``"host[:CAPACITY[:DEVICES]]"``) and the
    allocator config (``"key:value,..."``) before the first allocation.

    None leaves each to the environment. Raises :class:`ConfigError` for a bad
    text (one with a NUL included) and :class:`InvalidArgumentError` once a
    device is in use.
    """
    lib = library()
    up = c_string(lib, upstream, "upstream", ERR_CONFIG) if upstream is not None else None
    cf = c_string(lib, conf, "conf", ERR_CONFIG) if conf is not None else None
    lib.cca_clear_error()
    raise_for(lib, lib.cca_plug_configure(up, cf))
    global _configured
    _configured = (upstream, conf)


def configuration() -> Tuple[Optional[str], Optional[str]]:
    """``(upstream, conf)`` of the last :func:`configure` since the last
    :func:`reset` (``(None, None)`` if none): ``configure(*configuration())``
    puts it back."""
    return _configured


def allocator(device: int = 0) -> Allocator:
    """The allocator of ``device`` (created now if needed), as a borrowed
    :class:`Allocator`: stats, trim, empty_cache, snapshot, domains. Closing
    it only detaches the view (refused while a domain made through it is not
    destroyed); :func:`reset` closes it (``closed`` is then
    True and every method raises :class:`InvalidArgumentError`)."""
    lib = library()
    d = device_arg(lib, device)
    born = _generation  # read before the C calls: a reset between them makes the view stale, never the reverse
    a = ctypes.c_void_p()
    u = ctypes.c_void_p()
    raise_for(lib, lib.cca_plug_get_allocator(d, ctypes.byref(a)))
    raise_for(lib, lib.cca_plug_get_upstream(d, ctypes.byref(u)))
    return Allocator._borrow(lib, a.value, u.value, d, lambda: _generation == born)  # type: ignore[arg-type]


def alloc(size: int, device: int = 0, stream: Any = None) -> int:
    """An address from ``device``'s allocator, 0 for size 0.

    The same allocator and the same steps as ``cca_plug_alloc`` (the device's
    allocator, created on first use, then ``cca_alloc``, or ``cca_alloc_in``
    in the thread's current domain: :func:`domain`), taken one by one so
    that a failure raises the exception of its own status:
    :class:`NoDeviceError`, :class:`OutOfMemoryError`, ...; a size outside
    [0, 2**64) or a device outside [0, MAX_DEVICES): :class:`InvalidArgumentError`,
    for size 0 too (``cca_plug_alloc`` checks the device first, then returns
    NULL for size 0 without creating anything).
    """
    lib = library()
    n = parse_size(lib, size)
    d = device_arg(lib, device)
    s = stream_arg(lib, stream)
    if n == 0:
        if not 0 <= d < MAX_DEVICES:
            raise argument_error(lib, ERR_INVALID_ARGUMENT, f"plug.alloc: device {d} not in [0, {MAX_DEVICES})")
        return 0
    a = ctypes.c_void_p()
    lib.cca_clear_error()
    raise_for(lib, lib.cca_plug_get_allocator(d, ctypes.byref(a)))
    dom = ctypes.c_void_p()
    raise_for(lib, lib.cca_plug_get_domain(d, ctypes.byref(dom)))  # the thread's current domain (domain())
    out = ctypes.c_void_p()
    try:
        if dom.value:
            raise_for(lib, lib.cca_alloc_in(a, dom, n, s, ctypes.byref(out)))
        else:
            raise_for(lib, lib.cca_alloc(a, n, s, ctypes.byref(out)))
    except BaseException:
        # a signal handler's exception after the block was made: it never reaches the caller
        if out.value:
            lib.cca_free(a, out)
        raise
    return out.value or 0  # nothing between the try and here runs a handler


def free(ptr: int, size: int = 0, device: int = 0, stream: Any = None) -> None:
    """``cca_plug_free``: a pointer the library refuses is logged, never raised.

    Arguments no C parameter can hold are refused before the call: an
    address outside [0, 2**64) (:class:`InvalidPointerError`), a size or a
    stream outside [0, 2**64) or a device outside C's int
    (:class:`InvalidArgumentError`).
    """
    lib = library()
    address = pointer_arg(lib, ptr)
    n, d, s = parse_size(lib, size), device_arg(lib, device), stream_arg(lib, stream)
    if address:
        lib.cca_plug_free(address, n, d, s)


def reset() -> None:
    """``cca_plug_reset``: forget every device and the configuration (tests).
    :class:`LiveBlocksError` if any block is live, and nothing changes.

    Every view :func:`allocator` handed out before a reset that went through
    is closed: its allocator is destroyed.
    """
    global _generation, _configured
    lib = library()
    lib.cca_clear_error()
    st = lib.cca_plug_reset()
    message = _text(lib.cca_last_error())
    # Only the refusal before anything was destroyed keeps the allocators
    # and the configuration; any other status (a cca_destroy failing) comes
    # after they are gone.
    if not (st == ERR_LIVE_BLOCKS and "nothing was reset" in message):
        _generation += 1
        _configured = (None, None)
    raise_for(lib, st)


def stats(device: int = 0) -> Dict[str, Any]:
    """``cca_stats`` of ``device``'s allocator as a dict."""
    return allocator(device).stats()


def empty_cache(device: int = 0) -> ReleaseReport:
    """Give everything cached on ``device`` back to the driver."""
    return allocator(device).empty_cache()


def trim(keep: int = 0, device: int = 0) -> ReleaseReport:
    """Give cached memory on ``device`` back until at most ``keep`` bytes stay reserved."""
    return allocator(device).trim(keep)


def snapshot(device: int = 0) -> Dict[str, Any]:
    """``cca_write_snapshot_json`` of ``device``'s allocator, parsed."""
    return allocator(device).snapshot()


def snapshot_torch(path: Optional[str] = None, device: int = 0) -> Dict[str, Any]:
    """``device``'s allocator in PyTorch's snapshot structure (``Allocator.snapshot_torch``)."""
    return allocator(device).snapshot_torch(path, device)


def mem_info(device: int = 0) -> Tuple[int, int]:
    """``(free, total)`` bytes of ``device`` as its driver counts them."""
    return allocator(device).mem_info()


# ---- the thread's current domain -----------------------------------------------
#
# cca_plug_set_domain keeps, per thread and per device, the domain that
# cca_plug_alloc (PyTorch's entry point) and alloc() above allocate in.
# PlugDomain's ``with`` block sets it and puts the previous one back;
# each thread keeps its own stack of entries per device here, so blocks nest
# and a block left out of order (an ExitStack, a generator) still leaves the
# right domain current.
#
# Which block an __exit__ ends: Python passes nothing per block (the with
# statement calls the domain's own __exit__), so the block is found by the
# frame that calls __exit__, in this order:
#   1. the block that frame entered (a with statement enters and leaves
#      from one frame; a generator's block, from its frame, even when it
#      is closed inside a block of the same domain). A frame is known by
#      its id and its code object: an id alone is reused once the frame
#      is gone (an ExitStack's entering frame, enter_context's, is gone by
#      its exit, and its exiting frame often has that id); only a frame
#      of the same function at the same address could still be taken for
#      it;
#   2. else (an ExitStack's exit, a block entered by hand) the innermost
#      block of the domain whose entering frame neither still runs on this
#      thread (a with statement there leaves its own block) nor is a
#      generator's or coroutine's (it leaves its own when resumed or
#      closed);
#   3. else the innermost block of the domain.
# Two blocks of one domain, both entered by frames that have ended and
# left by others (two ExitStacks closed out of order), cannot be told
# apart: the inner one is taken for the one that ends.

_GENERATOR_CODE = 0x20 | 0x80 | 0x200  # inspect.CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


class _Entry:
    __slots__ = ("domain", "previous", "thread", "frame", "code")

    def __init__(self, domain: "PlugDomain", previous: Optional[int], frame: Any) -> None:
        self.domain, self.previous = domain, previous
        self.thread = threading.current_thread()  # the thread whose C slot the block set
        # the frame that entered, by id and code (kept: while it lives its id is never another code's)
        self.frame, self.code = id(frame), frame.f_code

    def entered_by(self, frame: Any) -> bool:
        """Did ``frame`` enter this block? (Its __exit__ comes from there.)"""
        return self.frame == id(frame) and self.code is frame.f_code

    def orphan(self, running: set) -> bool:
        """Was the block entered by a frame that leaves it to another (rule
        2 above)? ``running``: the (id, code) of every frame running on
        this thread."""
        return (self.frame, id(self.code)) not in running and not self.code.co_flags & _GENERATOR_CODE

    def ended(self) -> bool:
        """Has the block's thread ended (and its C slot with it)? The main
        thread is not is_alive() once the interpreter exits (atexit) but
        still runs: never ended."""
        return self.thread is not threading.main_thread() and not self.thread.is_alive()


_threads = threading.local()  # .stacks: {device: [_Entry, ...]} of this thread


def _stack(device: int) -> List[_Entry]:
    stacks = getattr(_threads, "stacks", None)
    if stacks is None:
        stacks = _threads.stacks = {}
    return stacks.setdefault(device, [])


# Every PlugDomain, for the fork handler below: a child of fork() has only
# the forking thread, and a lock another thread held (inside __enter__'s C
# call) would stay held there for ever: `with` and destroy() would hang.
_PLUG_DOMAINS: "weakref.WeakSet[PlugDomain]" = weakref.WeakSet()


def _locks_anew_in_child() -> None:
    for d in list(_PLUG_DOMAINS):
        d._entered_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_locks_anew_in_child)


class PlugDomain(Domain):
    """A domain of a device's plug allocator (the one PyTorch, CuPy and Numba
    allocate from), made by :func:`domain`.

    Everything a :class:`ccalloc.Domain` has (``name``, ``stats()``,
    ``release(force=False, max_leaks=16)``, ``destroy()``, ``destroyed``,
    ``alloc``, ``free``, ``reserve``), and ``device``. Its ``with`` block is
    a scope, not a lifetime: on entry the domain becomes the calling
    thread's current domain for ``device`` (``cca_plug_set_domain``), so
    everything the frameworks allocate on this thread and device goes into
    it; on exit the previous one is current again. The domain and its
    memory stay after the block (unlike ``Allocator.domain``'s, whose block
    destroys it): ``release()`` returns its memory when its blocks are
    freed, ``destroy()`` ends it. ``with`` may be entered again, on any
    thread, and nested.
    """

    def __init__(self, allocator: Allocator, handle: int, name: str, device: int) -> None:
        super().__init__(allocator, handle, name)
        self.device = device
        self._open: List[_Entry] = []  # with blocks in progress, every thread's
        self._entered_lock = threading.Lock()
        _PLUG_DOMAINS.add(self)

    def __repr__(self) -> str:
        state = " (destroyed)" if self.destroyed else ""
        return f"<ccalloc.plug.PlugDomain {self.name!r} on device {self.device}{state}>"

    def __enter__(self) -> "PlugDomain":
        lib = self.allocator._lib
        previous = ctypes.c_void_p()
        with self._entered_lock:  # a destroy() on another thread waits: never a destroyed current domain
            handle = self.handle  # InvalidArgumentError once destroyed (or after plug.reset())
            lib.cca_clear_error()
            raise_for(lib, lib.cca_plug_set_domain(self.device, handle, ctypes.byref(previous)))
            entry = _Entry(self, previous.value, sys._getframe(1))
            self._open.append(entry)
        _stack(self.device).append(entry)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Which block ends: see "Which block an __exit__ ends" above (a
        # generator closed here may hold a block of an ended thread while
        # this thread has one of its own).
        frame = sys._getframe(1)
        stack = _stack(self.device)
        mine = [i for i in range(len(stack) - 1, -1, -1) if stack[i].domain is self]
        at = next((i for i in mine if stack[i].entered_by(frame)), None)
        if at is None:
            with self._entered_lock:
                # a block whose thread has ended (nothing of it is current anywhere): this frame's, else any
                # when this thread has none open
                ended = [e for e in self._open if e.ended()]
                gone = next((e for e in ended if e.entered_by(frame)), None if mine else next(iter(ended), None))
                if gone is not None:
                    self._open.remove(gone)
                    return
                elsewhere = next((e for e in self._open if e.entered_by(frame)), next(iter(self._open), None))
                if not mine and elsewhere is not None and self.allocator.closed:
                    self._open.remove(elsewhere)  # plug.reset() since: every thread's domain is the default
                    return
            if not mine and elsewhere is not None:  # entered on another thread (a generator resumed here)
                raise RuntimeError(f"{self!r}: __exit__ on a thread other than its __enter__'s "
                                   f"({elsewhere.thread.name!r}, which still runs): the domain stays current there "
                                   "until that thread leaves a block of it or ends")
            if not mine:
                raise RuntimeError(f"{self!r}: __exit__ without its __enter__ on this thread")
            running = set()
            f = frame
            while f is not None:
                running.add((id(f), id(f.f_code)))
                f = f.f_back
            at = next((i for i in mine if stack[i].orphan(running)), mine[0])
        entry = stack.pop(at)
        with self._entered_lock:
            self._open.remove(entry)
        if at < len(stack):
            # left out of order: the block entered after it now restores what this one would have
            stack[at].previous = entry.previous
            return
        if self.allocator.closed:  # plug.reset() since: every thread's domain is the default already
            return
        lib = self.allocator._lib
        lib.cca_clear_error()
        st = lib.cca_plug_set_domain(self.device, entry.previous, None)
        if st != OK:  # the previous one was destroyed meanwhile (set from C): the default, and say so
            lib.cca_plug_set_domain(self.device, None, None)
            if exc_type is None:
                raise_for(lib, st)

    def destroy(self, force: bool = False, max_leaks: int = 16) -> DomainReport:
        """Release and free the domain; on failure it stays (see :meth:`release`).

        Refused with :class:`InvalidArgumentError` while a ``with`` block of
        it is in progress on any thread that still runs (allocations there
        would fail): leave the blocks first."""
        with self._entered_lock:
            live = sum(not e.ended() for e in self._open)  # an ended thread's block stays until its __exit__
            if live and not self.destroyed:
                raise argument_error(self.allocator._lib, ERR_INVALID_ARGUMENT,
                                     f"domain '{self.name}' is the current domain of {live} `with` "
                                     "block(s) in progress; leave them before destroy()")
            return super().destroy(force, max_leaks)


def domain(name: str, device: int = 0) -> PlugDomain:
    """A new domain of ``device``'s allocator (created now if needed), for
    ``with`` blocks that route the frameworks' allocations into it (see
    :class:`PlugDomain`). TypeError for a name that is not a str,
    :class:`InvalidArgumentError` for a name the library refuses (empty,
    over 63 characters, not printable ASCII, or with ``"``, ``\\`` or
    ``,``), a NUL in it, or a greedy allocator."""
    if not isinstance(name, str):
        raise TypeError(f"a domain name is a str, not {type(name).__name__}")
    view = allocator(device)
    return view._domain_create(name, lambda handle: PlugDomain(view, handle, name, view._device))


def current_domain(device: int = 0) -> Optional[PlugDomain]:
    """The domain whose ``with`` block is innermost on this thread for
    ``device``, or None (the default domain). A device the library refuses
    (outside ``[0, CCA_PLUG_MAX_DEVICES)``) raises
    :class:`InvalidArgumentError`, as :func:`allocator` does."""
    lib = library()
    d = device_arg(lib, device)
    dom = ctypes.c_void_p()
    raise_for(lib, lib.cca_plug_get_domain(d, ctypes.byref(dom)))  # the range check, no allocator made
    stack = _stack(d)
    if stack and not stack[-1].domain.destroyed:
        return stack[-1].domain
    return None
