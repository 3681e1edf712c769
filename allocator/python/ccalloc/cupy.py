"""CuPy adapter: ccalloc as CuPy's device allocator, in one call.

    import ccalloc.cupy
    ccalloc.cupy.enable()
    x = cupy.ones((1024, 1024))      # from ccalloc, on the current stream
    del x; ccalloc.cupy.empty_cache()

``enable`` calls ``cupy.cuda.set_allocator(ccalloc.cupy.malloc)``. CuPy calls
the allocator with a byte count only; :func:`malloc` takes the current
device (``cupy.cuda.runtime.getDevice()``) and the current stream
(``cupy.cuda.get_current_stream().ptr``), allocates from that device's plug
allocator (shared with PyTorch and Numba in the same process), and returns
``cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(ptr, size, owner,
device_id), 0)``; ``owner`` frees the block when CuPy drops the memory. The
device id is always given: ``UnownedMemory`` cannot look one up for the
null pointer of a 0-byte request. Out of memory raises
:class:`ccalloc.OutOfMemoryError` (a ``MemoryError``).

Checked against: CuPy's ``cupy/cuda/memory.pyx`` (``UnownedMemory(ptr, size,
owner, device_id=-1)``, the null-pointer rule), the ``set_allocator``
documentation (v7-v13: a function of the size returning a MemoryPointer),
and RAPIDS RMM's ``rmm_cupy_allocator``, which does the same.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from . import plug
from .allocator import ReleaseReport
from .plug import PlugDomain

_INSTALL = "ccalloc.cupy needs CuPy: pip install cupy-cuda12x (or the wheel for your CUDA version)"

_enabled = False  # enable() ran and disable() did not since


def _import_cupy() -> Any:
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    return cupy


class _Block:
    """Owner of one block: frees it when CuPy lets go of the memory."""

    __slots__ = ("ptr", "size", "device", "stream", "__weakref__")

    def __init__(self, ptr: int, size: int, device: int, stream: int) -> None:
        self.ptr, self.size, self.device, self.stream = ptr, size, device, stream

    def __del__(self) -> None:
        try:
            plug.free(self.ptr, self.size, self.device, self.stream)
        except Exception:  # never raise from a finalizer (interpreter shutdown)
            pass


def malloc(nbytes: int) -> Any:
    """The allocator function given to ``cupy.cuda.set_allocator``."""
    cupy = _import_cupy()
    device = int(cupy.cuda.runtime.getDevice())
    stream = int(cupy.cuda.get_current_stream().ptr)
    ptr = plug.alloc(nbytes, device, stream)
    owner = _Block(ptr, nbytes, device, stream) if ptr else None
    mem = cupy.cuda.UnownedMemory(ptr, nbytes, owner, device)
    return cupy.cuda.MemoryPointer(mem, 0)


def enable(conf: Optional[str] = None, upstream: Optional[str] = None) -> None:
    """Make ccalloc CuPy's device allocator (``cupy.cuda.set_allocator``).

    ``conf`` / ``upstream`` as :func:`ccalloc.plug.configure` (None: the
    environment). Raises ImportError without CuPy.
    """
    global _enabled
    cupy = _import_cupy()
    if conf is not None or upstream is not None:
        plug.configure(upstream=upstream, conf=conf)
    cupy.cuda.set_allocator(malloc)
    _enabled = True


def disable() -> None:
    """Give CuPy its default memory pool back (blocks from ccalloc stay valid until freed)."""
    global _enabled
    cupy = _import_cupy()
    cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    _enabled = False


def _device(device: Optional[int]) -> int:
    """The device asked for, unconverted (ccalloc.plug checks it), else the current one."""
    if device is not None:
        return device
    return int(_import_cupy().cuda.runtime.getDevice())


def stats(device: Optional[int] = None) -> Dict[str, Any]:
    """``cca_stats`` of the device's allocator (default: the current device)."""
    return plug.stats(_device(device))


def empty_cache(device: Optional[int] = None) -> ReleaseReport:
    """Every cached byte of the device back to the driver."""
    return plug.empty_cache(_device(device))


def enabled() -> bool:
    """Whether :func:`enable` made ccalloc CuPy's allocator (and :func:`disable` did not undo it)."""
    return _enabled


def domain(name: str, device: Optional[int] = None) -> PlugDomain:
    """A new memory domain on ``device`` (default: the current one): arrays
    CuPy allocates on this thread inside ``with ccalloc.cupy.domain("a") as d:``
    live in ``d``; ``d.release()`` returns their memory once they are gone.
    The same object as ``ccalloc.torch.domain`` (:class:`ccalloc.plug.PlugDomain`:
    the allocator per device is shared). RuntimeError unless :func:`enable`
    made ccalloc CuPy's allocator."""
    if not _enabled:
        raise RuntimeError("ccalloc.cupy.domain: ccalloc is not CuPy's allocator: call ccalloc.cupy.enable() first")
    return plug.domain(name, _device(device))
