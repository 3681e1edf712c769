"""Numba adapter: ccalloc as an External Memory Management (EMM) plugin.

    import ccalloc.numba
    ccalloc.numba.enable()           # before Numba creates its CUDA context
    d = numba.cuda.device_array(1 << 20)
    del d; ccalloc.numba.empty_cache()

or, without code changes: ``NUMBA_CUDA_MEMORY_MANAGER=ccalloc.numba``.

The plugin (:class:`CcallocNumbaManager`, built on first use so that this
module imports without Numba) derives from ``HostOnlyCUDAMemoryManager``
(Numba keeps managing pinned and mapped host memory) and
``GetIpcHandleMixin`` (IPC handles from the driver's base address of the
allocation, with the block's offset into its segment; classic segments
only: memory of expandable segments, the default on a GPU with virtual
memory management, is mapped with the VMM API, which cudaIpc does not
export, so IPC needs ``conf="expandable:0"``). It implements:

- ``initialize``: creates the device's plug allocator (raising
  :class:`ccalloc.NoDeviceError` and the like at once, not at the first
  array);
- ``memalloc(size)``: a block from the context's device on the default
  stream (the EMM interface has no stream), as a ``MemoryPointer`` whose
  finalizer frees it to ccalloc's cache;
- ``get_memory_info``: ``MemoryInfo(free, total)`` from the driver
  (``cudaMemGetInfo``: ccalloc's cached bytes count as used, as they are);
- ``interface_version``: 1.

``defer_cleanup`` is the host-only manager's: device frees go to ccalloc's
cache at once whether or not it is active; only ccalloc's own
:func:`empty_cache` / :func:`trim` give device memory back.

Checked against: numba-cuda's ``docs/source/user/external-memory.rst`` and
``numba/cuda/cudadrv/driver.py`` (``MemoryPointer(context, pointer, size,
finalizer=...)``, the NVIDIA binding's ``CUdeviceptr`` vs the ctypes
binding's pointer, ``USE_NV_BINDING``, gone in numba-cuda 0.2x: 0.30.4 on
a GPU machine read our ctypes pointer's bytes as digits), and RAPIDS RMM's
``RMMNumbaManager``.
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional

from . import plug
from .allocator import ReleaseReport

_INSTALL = "ccalloc.numba needs Numba's CUDA target: pip install numba-cuda (or numba with CUDA support)"

_manager_class: Any = None


def _import_numba_cuda() -> Any:
    try:
        from numba import cuda  # noqa: F401
        from numba.cuda import HostOnlyCUDAMemoryManager, MemoryPointer  # noqa: F401
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    return cuda


def _device_pointer(ptr: int) -> Any:
    """The pointer type Numba's driver binding expects: the NVIDIA binding's
    ``CUdeviceptr`` where the driver module uses that binding (an older
    Numba with ``USE_NV_BINDING`` true, or numba-cuda 0.2x and later, which
    dropped the switch and always uses it: there ``int(pointer)`` must be
    the address, and a ctypes pointer fails with ValueError), else the
    ctypes binding's pointer."""
    from numba.cuda.cudadrv import driver as drv

    binding = getattr(drv, "binding", None)
    if getattr(drv, "USE_NV_BINDING", binding is not None) and binding is not None:
        return binding.CUdeviceptr(ptr)
    try:
        from numba.cuda.cudadrv import drvapi

        return drvapi.cu_device_ptr(ptr)
    except (ImportError, AttributeError):
        return ctypes.c_size_t(ptr)


def _make_manager_class() -> Any:
    cuda = _import_numba_cuda()
    from numba.cuda import HostOnlyCUDAMemoryManager, MemoryPointer

    try:
        from numba.cuda import GetIpcHandleMixin, MemoryInfo
    except ImportError:
        from numba.cuda.cudadrv.driver import GetIpcHandleMixin, MemoryInfo

    class CcallocNumbaManager(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
        """Numba EMM plugin over ccalloc's per-device allocators."""

        def _device(self) -> int:
            return int(self.context.device.id)

        def initialize(self) -> None:
            plug.allocator(self._device())

        def memalloc(self, size: int) -> Any:
            device = self._device()
            ptr = plug.alloc(size, device, None)
            finalizer = None
            if ptr:
                def finalizer(ptr: int = ptr, size: int = size, device: int = device) -> None:
                    plug.free(ptr, size, device, None)
            return MemoryPointer(self.context, _device_pointer(ptr), size, finalizer=finalizer)

        def get_memory_info(self) -> Any:
            free, total = plug.mem_info(self._device())
            return MemoryInfo(free=free, total=total)

        @property
        def interface_version(self) -> int:
            return 1

    del cuda
    return CcallocNumbaManager


def manager_class() -> Any:
    """The EMM plugin class (built once; ImportError without Numba)."""
    global _manager_class
    if _manager_class is None:
        _manager_class = _make_manager_class()
    return _manager_class


def __getattr__(name: str) -> Any:
    # NUMBA_CUDA_MEMORY_MANAGER=ccalloc.numba reads _numba_memory_manager
    if name in ("CcallocNumbaManager", "_numba_memory_manager"):
        return manager_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def enable(conf: Optional[str] = None, upstream: Optional[str] = None) -> None:
    """``numba.cuda.set_memory_manager(CcallocNumbaManager)``; call before
    Numba creates a context (contexts keep the manager they were made with).
    ``conf`` / ``upstream`` as :func:`ccalloc.plug.configure`. ImportError
    without Numba."""
    cuda = _import_numba_cuda()
    cls = manager_class()
    if conf is not None or upstream is not None:
        plug.configure(upstream=upstream, conf=conf)
    cuda.set_memory_manager(cls)


def stats(device: int = 0) -> Dict[str, Any]:
    """``cca_stats`` of the device's allocator."""
    return plug.stats(device)


def empty_cache(device: int = 0) -> ReleaseReport:
    """Every cached byte of the device back to the driver."""
    return plug.empty_cache(device)


def trim(keep: int, device: int = 0) -> ReleaseReport:
    """Give cached memory of the device back until at most ``keep`` bytes stay reserved."""
    return plug.trim(keep, device)
