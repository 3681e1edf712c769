"""Exceptions: one class per ``cca_status``, all subclasses of :class:`Error`.

Every failing C call becomes an exception carrying the status code
(``status``), its name from ``cca_status_string`` (``status_string``) and the
calling thread's ``cca_last_error()`` message (``message``), which names the
key, pointer or size that was wrong.
"""
from __future__ import annotations

from typing import Dict, Optional, Type

# cca_status values (ccalloc.h); tests/python/test_api.py checks them
# against the header.
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_OUT_OF_MEMORY = 2
ERR_INVALID_POINTER = 3
ERR_UPSTREAM = 4
ERR_NO_DEVICE = 5
ERR_CONFIG = 6
ERR_NOT_READY = 7
ERR_LIVE_BLOCKS = 8
ERR_IO = 9
ERR_INVARIANT = 10
ERR_ASLEEP = 11


class Error(Exception):
    """A ccalloc call failed.

    Attributes:
        status: the ``cca_status`` code (an int, never 0).
        status_string: ``cca_status_string(status)``, e.g.
            ``"CCA_ERR_OUT_OF_MEMORY: out of device memory"``.
        message: ``cca_last_error()`` at the failure (may be empty).
    """

    def __init__(self, status: int, status_string: str, message: str) -> None:
        self.status = status
        self.status_string = status_string
        self.message = message
        super().__init__(f"{message} ({status_string})" if message else status_string)

    def __reduce__(self):
        # Exception's own reduce rebuilds from self.args (the one formatted
        # text), which this __init__ cannot take: pickle (multiprocessing,
        # concurrent.futures) and copy need the three fields, and the
        # instance's attributes (a LiveBlocksError's report) as its state.
        return (type(self), (self.status, self.status_string, self.message), self.__dict__)


class InvalidArgumentError(Error, ValueError):
    """CCA_ERR_INVALID_ARGUMENT: NULL handle, bad size, bad option value."""


class OutOfMemoryError(Error, MemoryError):
    """CCA_ERR_OUT_OF_MEMORY: the device (or max_reserved, or the arena) is full."""


class InvalidPointerError(Error, ValueError):
    """CCA_ERR_INVALID_POINTER: double free, unknown or interior pointer."""


class UpstreamError(Error):
    """CCA_ERR_UPSTREAM: the device failed in a way other than OOM."""


class NoDeviceError(Error):
    """CCA_ERR_NO_DEVICE: no GPU, or the library was built without CUDA."""


class ConfigError(Error, ValueError):
    """CCA_ERR_CONFIG: unknown key or bad value in a config string."""


class NotReadyError(Error):
    """CCA_ERR_NOT_READY: a stream event has not completed."""


class LiveBlocksError(Error):
    """CCA_ERR_LIVE_BLOCKS: blocks were still live (destroy, domain release).

    ``report`` is the :class:`ccalloc.DomainReport` listing them when the
    failure came from a domain release, else None.
    """

    report: Optional[object] = None


class WriteError(Error, OSError):
    """CCA_ERR_IO: writing a snapshot or trace failed."""


class InvariantError(Error):
    """CCA_ERR_INVARIANT: cca_check_invariants found a broken invariant (a bug)."""


class AsleepError(Error):
    """CCA_ERR_ASLEEP: the domain is asleep (cca_domain_sleep); wake it first."""


_BY_STATUS: Dict[int, Type[Error]] = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_OUT_OF_MEMORY: OutOfMemoryError,
    ERR_INVALID_POINTER: InvalidPointerError,
    ERR_UPSTREAM: UpstreamError,
    ERR_NO_DEVICE: NoDeviceError,
    ERR_CONFIG: ConfigError,
    ERR_NOT_READY: NotReadyError,
    ERR_LIVE_BLOCKS: LiveBlocksError,
    ERR_IO: WriteError,
    ERR_INVARIANT: InvariantError,
    ERR_ASLEEP: AsleepError,
}


def error_class(status: int) -> Type[Error]:
    """The exception class for a status code (:class:`Error` for an unknown one)."""
    return _BY_STATUS.get(status, Error)
