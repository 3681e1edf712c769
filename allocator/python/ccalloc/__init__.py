"""ccalloc: a GPU caching allocator that gives memory back, from Python.

A pure-Python package over libccalloc (ctypes; no compiled extension):

- :class:`Allocator` — one allocator over the simulated device
  (``Allocator(capacity="1G")``) or a CUDA device (``Allocator(device=0)``):
  ``alloc``/``free``, ``trim``/``empty_cache`` (a :class:`ReleaseReport`),
  ``stats()``, ``snapshot()``, memory domains (``with a.domain("m") as d``),
  ``sleep()``/``wake()`` (a :class:`SleepReport`).
- :mod:`ccalloc.plug` — the per-device allocators the framework adapters
  share (``cca_plug_*``).
- Adapters, each one call: ``ccalloc.torch.enable()``,
  ``ccalloc.cupy.enable()``, ``ccalloc.numba.enable()``; and a domain per
  model for their tensors: ``with ccalloc.torch.domain("model-a") as d:``,
  later ``d.release()``.

The library is found as :mod:`ccalloc._lib` describes (``CCALLOC_LIBRARY``
first); docs/python.md has the whole story.
"""
from __future__ import annotations

from ._errors import (
    AsleepError,
    ConfigError,
    Error,
    InvalidArgumentError,
    InvalidPointerError,
    InvariantError,
    LiveBlocksError,
    NoDeviceError,
    NotReadyError,
    OutOfMemoryError,
    UpstreamError,
    WriteError,
)
from ._lib import LibraryNotFoundError
from .allocator import Allocator, Domain, DomainReport, LiveBlock, ReleaseReport, SleepReport

__version__ = "0.1.0"

__all__ = [
    "Allocator",
    "AsleepError",
    "ConfigError",
    "Domain",
    "DomainReport",
    "Error",
    "InvalidArgumentError",
    "InvalidPointerError",
    "InvariantError",
    "LibraryNotFoundError",
    "LiveBlock",
    "LiveBlocksError",
    "NoDeviceError",
    "NotReadyError",
    "OutOfMemoryError",
    "ReleaseReport",
    "SleepReport",
    "UpstreamError",
    "WriteError",
    "library_path",
]


def library_path() -> str:
    """The path of the libccalloc this process uses (loading it if needed)."""
    from . import _lib

    return _lib.load().path
