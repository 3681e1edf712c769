"""PyTorch adapter: ccalloc as PyTorch's CUDA allocator, in one call.

    import ccalloc.torch
    ccalloc.torch.enable(conf="max_reserved:20G")   # before any CUDA tensor
    ...
    del model; ccalloc.torch.empty_cache()          # memory really back
    ccalloc.torch.stats()["reserved_bytes"]          # 0 when nothing is live

    with ccalloc.torch.domain("model-a") as a:       # this thread's tensors go into domain a
        model_a = load_a().cuda()
    ...
    del model_a; a.release()                         # a's memory back; other models' stay

``enable`` installs ``torch.cuda.memory.CUDAPluggableAllocator(libccalloc,
"cca_plug_alloc", "cca_plug_free")`` with ``change_current_allocator``.
PyTorch then calls ``cca_plug_alloc(size, device, stream)`` for every tensor
with its current stream, and ``cca_plug_free`` when the tensor dies.

What PyTorch itself refuses once a pluggable allocator is installed (its
CUDAPluggableAllocator raises "does not yet support ..."):
``torch.cuda.memory_stats`` / ``memory_allocated`` / ``memory_reserved``,
``reset_peak_memory_stats``, ``memory._snapshot`` and ``_record_memory_history``;
and ``torch.cuda.empty_cache()`` calls nothing. Use :func:`stats`,
:func:`empty_cache`, :func:`trim` and :func:`snapshot` here instead.

Limits of PyTorch's interface to know about: the alloc function's result is
not checked by PyTorch, so an out-of-memory NULL becomes a tensor at address
0 that fails in its first kernel, not a ``torch.cuda.OutOfMemoryError``
(ccalloc logs the failed request; ``max_reserved`` and :func:`stats` help
keep away from it); ``Tensor.record_stream`` is ignored (no record_stream
hook is installed by PyTorch's Python API), so a tensor used on a second
stream must be synchronized by the program before it is freed.

Checked against: PyTorch's ``torch/csrc/cuda/CUDAPluggableAllocator.{h,cpp}``
(main branch, 2025: ``alloc_fn_(size, device, stream)``, the 4-argument free,
``changeCurrentAllocator`` refusing an initialized allocator) and the 2.x
documentation of ``torch.cuda.memory.CUDAPluggableAllocator`` and
``change_current_allocator``; the GPU test (tests/python/test_gpu.py) runs
a model through it where torch and a GPU exist.
"""
from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Tuple

from . import plug
from .allocator import ReleaseReport
from .plug import PlugDomain

_INSTALL = "ccalloc.torch needs PyTorch with CUDA: pip install torch (a CUDA build, 2.1 or later)"

_installed: Any = None  # the CUDAPluggableAllocator, kept alive


def _import_torch() -> Any:
    try:
        import torch  # noqa: F401
        from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator  # noqa: F401
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    # A CPU-only build (the default wheel on many systems; torch.version.cuda
    # is None) has the class too, but constructing one fails with an
    # AttributeError on torch._C._cuda_customAllocator; a ROCm build has no
    # CUDA driver for ccalloc to call. Either way: what to install.
    if getattr(getattr(torch, "version", None), "cuda", None) is None:
        raise ImportError(f"{_INSTALL}; this PyTorch ({torch.__version__}) is built without CUDA")
    return torch


def enable(conf: Optional[str] = None, upstream: Optional[str] = None) -> None:
    """Make ccalloc PyTorch's CUDA allocator for the rest of the process.

    Call before the first CUDA allocation (PyTorch refuses to swap an
    allocator in use: ``RuntimeError``). ``conf``: ``"key:value,..."``
    (docs/allocator.md, Options). ``upstream``: ``"cuda"`` or ``"host:..."``
    (the simulated device, for tests of the plumbing; PyTorch's kernels
    cannot run on it). Either given: both are passed to
    :func:`ccalloc.plug.configure` (None there: the environment,
    ``CCALLOC_CONF`` / ``CCALLOC_PLUG_UPSTREAM``, else the defaults and
    "cuda"); both None: an earlier ``plug.configure`` stays in force, else
    the environment decides. Raises
    ImportError without PyTorch, or with a PyTorch built without CUDA
    (``torch.version.cuda`` None: a CPU-only wheel), saying what to install.
    """
    global _installed
    torch = _import_torch()
    from torch.cuda.memory import CUDAPluggableAllocator, change_current_allocator

    allocator = CUDAPluggableAllocator(plug.library().path, "cca_plug_alloc", "cca_plug_free")
    previous = plug.configuration()
    configuring = conf is not None or upstream is not None
    if configuring:
        plug.configure(upstream=upstream, conf=conf)
    try:
        change_current_allocator(allocator)
    except RuntimeError as e:
        if configuring:  # a refused enable leaves the configuration as it was (no device was made since)
            plug.configure(*previous)
        raise RuntimeError(
            "ccalloc.torch.enable() must run before the first CUDA allocation of the process "
            f"(PyTorch {torch.__version__} refused: {e})"
        ) from e
    _installed = allocator


def enabled() -> bool:
    """Whether :func:`enable` installed ccalloc in this process."""
    return _installed is not None


def _device(device: Optional[int]) -> int:
    """The device asked for, unconverted (ccalloc.plug checks it: TypeError
    for a float or a str, never truncated or parsed), else the current one."""
    if device is not None:
        return device
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    return 0


def stats(device: Optional[int] = None) -> Dict[str, Any]:
    """``cca_stats`` of the device's allocator (default: the current device)."""
    return plug.stats(_device(device))


def empty_cache(device: Optional[int] = None) -> ReleaseReport:
    """Every cached byte of the device back to the driver (what
    ``torch.cuda.empty_cache()`` cannot do with a pluggable allocator)."""
    return plug.empty_cache(_device(device))


def trim(keep: int, device: Optional[int] = None) -> ReleaseReport:
    """Give cached memory back until at most ``keep`` bytes stay reserved."""
    return plug.trim(keep, _device(device))


def snapshot(device: Optional[int] = None) -> Dict[str, Any]:
    """The allocator's JSON snapshot (segments, blocks, domains, stats), parsed."""
    return plug.snapshot(_device(device))


def snapshot_torch(path: Optional[str] = None, device: Optional[int] = None) -> Dict[str, Any]:
    """What ``torch.cuda.memory._snapshot()`` would return, for ccalloc's memory
    (PyTorch refuses its own with a pluggable allocator); ``path``: also
    written there as a pickle, as ``torch.cuda.memory._dump_snapshot`` does.
    Set ``history:N`` in ``enable(conf=...)`` for the events of the trace."""
    d = _device(device)
    return plug.snapshot_torch(path, d)


def mem_info(device: Optional[int] = None) -> Tuple[int, int]:
    """``(free, total)`` bytes of the device, as ``cudaMemGetInfo`` counts them."""
    return plug.mem_info(_device(device))


def domain(name: str, device: Optional[int] = None) -> PlugDomain:
    """A new memory domain for one model's tensors, on ``device`` (default: the
    current CUDA device).

    ``with ccalloc.torch.domain("model-a") as d:`` makes ``d`` the current
    domain of the calling thread for that device: every tensor PyTorch
    allocates on this thread and device inside the block lives in ``d``'s own
    memory; the previous domain is current again after the block (blocks
    nest). ``d`` outlives the block: ``d.release()`` gives all of its memory
    back to the driver once its tensors are gone (:class:`LiveBlocksError`
    listing the live blocks, and nothing released, while some are alive)
    while other domains' tensors stay; ``d.stats()``, ``d.destroy()``,
    ``d.name``; ``with d:`` again to add to it. See :class:`ccalloc.plug.PlugDomain`.

    Raises RuntimeError unless :func:`enable` made ccalloc PyTorch's allocator
    in this process (tensors would come from PyTorch's own allocator, in no
    domain), TypeError for a name that is not a str, and
    :class:`InvalidArgumentError` for a name the library refuses (1 to 63
    printable ASCII characters without ``"``, ``\\`` or ``,``).

    Per thread: tensors made by PyTorch on threads of its own (autograd's
    backward pass runs on a thread per device) go to those threads' domain,
    the default.
    """
    if not enabled():
        raise RuntimeError("ccalloc.torch.domain: ccalloc is not PyTorch's allocator in this process: call "
                           "ccalloc.torch.enable() first (tensors would come from PyTorch's own allocator, in no domain)")
    return plug.domain(name, _device(device))


def current_domain(device: Optional[int] = None) -> Optional[PlugDomain]:
    """The domain of the innermost :func:`domain` block on this thread for the
    device (default: the current one), or None: the default domain.
    :class:`InvalidArgumentError` for a device outside ``[0, 64)``."""
    return plug.current_domain(_device(device))
