"""The PyTorch entry points called the way PyTorch calls them.

torch.cuda.memory.CUDAPluggableAllocator dlopens the library with ctypes,
takes the two symbols' addresses (``ctypes.cast(fn, c_void_p).value``) and
its C++ side calls them as ``void *(size_t, int, cudaStream_t)`` and
``void (void *, size_t, int, cudaStream_t)``. These tests do the same with
CFUNCTYPE prototypes of exactly those signatures, on the simulated device
(``cca_plug_configure("host:64M")`` through the conftest fixture).
"""
from __future__ import annotations

import ctypes

import pytest

import ccalloc
from ccalloc import plug

from conftest import HEADER, MiB, fork_children

ALLOC_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
FREE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
LOG_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


@pytest.fixture
def entry(lib, host_plug):
    """(alloc, free) as function pointers, as PyTorch holds them."""
    dll = ctypes.CDLL(lib.path)
    alloc = ALLOC_T(ctypes.cast(dll.cca_plug_alloc, ctypes.c_void_p).value)
    free = FREE_T(ctypes.cast(dll.cca_plug_free, ctypes.c_void_p).value)
    return alloc, free


@pytest.fixture
def log_lines(lib):
    """Every line the library logs during the test (cca_set_log_callback)."""
    lines = []

    def sink(_user, line):
        lines.append(line.decode())

    cb = LOG_T(sink)
    setter = lib.dll.cca_set_log_callback
    setter.restype = None
    setter.argtypes = [LOG_T, ctypes.c_void_p]
    setter(cb, None)
    yield lines
    setter(LOG_T(), None)


def test_alloc_free_round_trip(entry, log_lines):
    alloc, free = entry
    stream = 0x7000
    p = alloc(1 << 20, 0, stream)
    assert p and p % 256 == 0
    ctypes.memset(p, 0x5A, 1 << 20)  # real memory
    s = plug.stats(0)
    assert (s["allocated_bytes"], s["requested_bytes"], s["reserved_bytes"]) == (MiB, MiB, 2 * MiB)
    free(p, 1 << 20, 0, stream)
    assert plug.stats(0)["allocated_bytes"] == 0
    assert plug.stats(0)["free_calls"] == 1
    assert log_lines == []


def test_stream_reaches_the_allocator(entry):
    alloc, free = entry
    p = alloc(4096, 0, 0x7000)
    free(p, 4096, 0, 0x7000)
    q = alloc(4096, 0, None)
    assert q != p  # the default stream does not take stream 0x7000's block
    assert alloc(4096, 0, 0x7000) == p
    free(p, 4096, 0, 0x7000)
    free(q, 4096, 0, None)


def test_zero_size_is_null_and_free_null_is_a_no_op(entry, log_lines):
    alloc, free = entry
    assert alloc(0, 0, None) is None
    free(None, 0, 0, None)  # newer PyTorch frees the null pointer of an empty tensor
    free(None, 0, -5, None)
    assert log_lines == []
    s = plug.stats(0)
    assert (s["alloc_calls"], s["free_calls"]) == (0, 0)


def test_out_of_memory_is_null(entry, log_lines):
    alloc, free = entry
    keep = alloc(1000, 0, None)
    assert alloc(128 * MiB, 0, None) is None  # the device holds 64M
    assert len(log_lines) == 1 and "128.00 MiB" in log_lines[0]  # the allocator's one OOM line
    s = plug.stats(0)
    assert s["ooms"] == 1 and s["allocated_bytes"] == 1024
    p = alloc(8 * MiB, 0, None)
    assert p  # still serving
    free(p, 8 * MiB, 0, None)
    free(keep, 1000, 0, None)


def test_size_max_is_null(entry, log_lines):
    alloc, _ = entry
    assert alloc(2**64 - 1, 0, None) is None
    assert len(log_lines) == 1 and "CCA_ERR_INVALID_ARGUMENT" in log_lines[0]


@pytest.mark.parametrize("device", [-1, -2**31, 64, 65, 1000, 2**31 - 1])
def test_bad_device_numbers(entry, log_lines, device):
    alloc, free = entry
    assert alloc(4096, device, None) is None
    assert len(log_lines) == 1 and f"device {device} not in [0, 64)" in log_lines[0]
    free(0x1000, 4096, device, None)
    assert len(log_lines) == 2 and f"device {device} not in [0, 64)" in log_lines[1]
    with pytest.raises(ccalloc.InvalidArgumentError, match=f"device {device} not in"):
        plug.allocator(device)


def test_device_past_the_simulated_count(entry, log_lines):
    alloc, _ = entry
    assert alloc(4096, 1, None) is None  # "host:64M" is one device
    assert len(log_lines) == 1 and "simulated device 1 not in [0, 1)" in log_lines[0]
    assert alloc(4096, 1, None) is None
    assert len(log_lines) == 1  # a failed device is logged once
    with pytest.raises(ccalloc.InvalidArgumentError, match="simulated device 1"):
        plug.stats(1)


def test_foreign_and_double_frees_change_nothing(entry, log_lines):
    alloc, free = entry
    p = alloc(4096, 0, None)
    q = alloc(4096, 0, None)
    free(p, 4096, 0, None)
    before = plug.stats(0)
    free(p, 4096, 0, None)
    buf = ctypes.create_string_buffer(64)
    free(ctypes.addressof(buf), 64, 0, None)
    free(q + 256, 4096, 0, None)
    free(q, 4096, 9, None)  # a device with no allocator
    assert len(log_lines) == 4
    assert "double free" in log_lines[0]
    assert all("CCA_ERR_INVALID_POINTER" in line for line in log_lines)
    assert plug.stats(0) == before
    free(q, 4096, 0, None)
    assert plug.stats(0)["allocated_bytes"] == 0


def test_a_sink_calling_the_library_keeps_the_failed_calls_message(entry, lib):
    """A log sink may call the library (ccalloc.h); a call of its own that
    fails sets the thread's message, which must not replace the message of
    the call that logged: that call's exception (or cca_last_error() after
    cca_plug_alloc) names its own failure."""
    alloc, _ = entry
    other = ccalloc.Allocator(capacity="4M")
    seen = []

    def sink(_user, line):
        seen.append(line.decode())
        with pytest.raises(ccalloc.InvalidPointerError):
            other.free(0x3E7)  # fails inside the sink
        lib.cca_clear_error()

    cb = LOG_T(sink)
    setter = lib.dll.cca_set_log_callback
    setter.restype = None
    setter.argtypes = [LOG_T, ctypes.c_void_p]
    setter(cb, None)
    try:
        with ccalloc.Allocator(capacity="4M") as a:
            with pytest.raises(ccalloc.OutOfMemoryError, match=r"^cca_alloc: 67108864 bytes need"):
                a.alloc(64 * MiB)  # logs its OOM line
        assert alloc(128 * MiB, 0, None) is None  # the allocator's OOM line
        assert lib.cca_last_error().decode().startswith("cca_alloc: 134217728 bytes need")
        assert alloc(4096, 64, None) is None  # the plug's own line
        assert lib.cca_last_error().decode() == "cca_plug_alloc: device 64 not in [0, 64)"
        with pytest.raises(ccalloc.InvalidArgumentError, match=r"^cca_plug_get_allocator: device 64 not in"):
            plug.alloc(4096, 64)  # logs nothing: raises with its own message
        assert len(seen) == 3
    finally:
        setter(LOG_T(), None)
        other.close()


def test_cuda_requested_without_gpu_is_null_with_the_reason(lib, log_lines):
    plug.reset()
    try:
        plug.configure(upstream="cuda", conf="")
        try:
            plug.allocator(0)
        except ccalloc.NoDeviceError as e:
            assert "cuda" in e.message
        else:
            pytest.skip("a GPU is present")
        assert lib.cca_plug_alloc(4096, 0, None) is None
        assert "cuda" in lib.cca_last_error().decode()
        assert len(log_lines) == 1 and "CCA_ERR_NO_DEVICE" in log_lines[0]
    finally:
        plug.reset()


def test_configure_errors(lib):
    plug.reset()
    try:
        with pytest.raises(ccalloc.ConfigError, match="upstream 'gpu'"):
            plug.configure(upstream="gpu")
        with pytest.raises(ccalloc.ConfigError, match="devices '0'"):
            plug.configure(upstream="host:1G:0")
        with pytest.raises(ccalloc.ConfigError, match="policy"):
            plug.configure(upstream="host:8M", conf="policy:bogus")
        plug.configure(upstream="host:8M", conf="max_reserved:4M")
        assert plug.allocator(0).config()["max_reserved"] == "4M"
        with pytest.raises(ccalloc.InvalidArgumentError, match="already in use"):
            plug.configure(upstream="host:16M")
    finally:
        plug.reset()


def test_python_plug_alloc_raises_the_right_error(host_plug):
    p = plug.alloc(4096, 0, None)
    assert plug.stats(0)["allocated_bytes"] == 4096
    with pytest.raises(ccalloc.OutOfMemoryError):
        plug.alloc(128 * MiB, 0)
    with pytest.raises(ccalloc.InvalidArgumentError):
        plug.alloc(4096, 64)
    assert plug.alloc(0) == 0
    with pytest.raises(ccalloc.LiveBlocksError, match="device 0 has 1 live blocks"):
        plug.reset()
    plug.free(p, 4096, 0)
    plug.free(p, 4096, 0)  # a double free through plug.free is logged, never raised
    r = plug.empty_cache(0)
    assert (r.bytes_released, r.bytes_still_reserved) == (2 * MiB, 0)
    assert plug.mem_info(0) == (64 * MiB, 64 * MiB)
    snap = plug.snapshot(0)
    # the default's small range: one unmap, then the range released
    assert snap["segments"] == [] and snap["stats"]["upstream_frees"] == 2
    assert (snap["stats"]["vm_unmaps"], snap["stats"]["address_space_bytes"]) == (1, 0)


def test_python_plug_alloc_of_zero_bytes_refuses_a_bad_device(host_plug, entry, log_lines):
    """plug.alloc takes cca_plug_alloc's steps: the device is checked before
    size 0 returns 0. plug.alloc(0, -1) and plug.alloc(0, 64) once returned 0
    where cca_plug_alloc(0, -1) refuses the device; a good device still gets
    0 with nothing created."""
    alloc, _ = entry
    assert f"#define CCA_PLUG_MAX_DEVICES {plug.MAX_DEVICES}\n" in HEADER.read_text()
    for device in (-1, 64, -(1 << 31), (1 << 31) - 1):
        assert alloc(0, device, None) is None
        with pytest.raises(ccalloc.InvalidArgumentError, match=f"device {device} not in \\[0, 64\\)"):
            plug.alloc(0, device)
    assert plug.alloc(0, 5) == 0  # past the simulated count: no creation, so no failure either
    assert plug.alloc(0, 0) == 0
    assert plug.stats(0)["alloc_calls"] == 0


def test_python_plug_refuses_what_c_cannot_hold(host_plug):
    """ccalloc.plug checks its arguments before the C call: a size outside
    [0, 2**64) (2**64 + 512 was a 512-byte block), a device outside C's int
    (2**32 was device 0), an address outside [0, 2**64) (p + 2**64 was p)."""
    for bad in ((1 << 64) + 512, 1 << 64, -1):
        with pytest.raises(ccalloc.InvalidArgumentError, match="size"):
            plug.alloc(bad)
    with pytest.raises(TypeError):
        plug.alloc(True)
    for bad in (1 << 32, (1 << 32) + 5, 1 << 31, -(1 << 31) - 1):
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            plug.alloc(4096, device=bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            plug.allocator(bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            plug.snapshot_torch(device=bad)
    assert plug.stats(0)["alloc_calls"] == 0
    p = plug.alloc(4096)
    with pytest.raises(ccalloc.InvalidPointerError):
        plug.free(p + (1 << 64), 4096, 0)
    with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
        plug.free(p, 4096, 1 << 32)
    with pytest.raises(ccalloc.InvalidArgumentError, match="size"):
        plug.free(p, 1 << 64, 0)
    with pytest.raises(ccalloc.InvalidArgumentError, match="stream"):
        plug.free(p, 4096, 0, 1 << 64)
    assert plug.stats(0)["allocated_bytes"] == 4096  # p is still live
    plug.free(p, 4096, 0)
    assert plug.stats(0)["allocated_bytes"] == 0


def test_configure_refuses_a_nul(lib):
    """'host:64M\\0junk' was read as 'host:64M': a NUL is a ConfigError."""
    plug.reset()
    try:
        with pytest.raises(ccalloc.ConfigError, match="NUL"):
            plug.configure(upstream="host:64M\x00junk")
        with pytest.raises(ccalloc.ConfigError, match="NUL"):
            plug.configure(upstream="host:64M", conf="max_reserved:8M\x00,bogus:1")
        plug.configure(upstream="host:8M", conf="max_reserved:4M")  # nothing was configured before
        assert plug.allocator(0).config()["max_reserved"] == "4M"
    finally:
        plug.reset()


def test_a_devices_view_writes_its_own_device_in_the_torch_snapshot(lib):
    """plug.allocator(d) is device d's allocator: its snapshot_torch() names
    device d (segments' "device", the trace at device_traces[d]), as
    plug.snapshot_torch(device=d) does, unless told another number."""
    plug.reset()
    plug.configure(upstream="host:16M:4", conf="history:16")
    p = plug.alloc(4096, device=2)
    try:
        for snap in (plug.allocator(2).snapshot_torch(), plug.snapshot_torch(device=2)):
            assert [seg["device"] for seg in snap["segments"]] == [2]
            assert [len(t) > 0 for t in snap["device_traces"]] == [False, False, True]
        snap = plug.allocator(2).snapshot_torch(device=0)  # an explicit number wins
        assert [seg["device"] for seg in snap["segments"]] == [0] and len(snap["device_traces"]) == 1
        with ccalloc.Allocator(capacity="8M") as a:  # a simulated device of its own: device 0
            assert len(a.snapshot_torch()["device_traces"]) == 1
    finally:
        plug.free(p, 4096, 2)
        plug.reset()


def test_borrowed_allocator_close_only_detaches(host_plug):
    a = plug.allocator(0)
    p = a.alloc(4096)
    a.close()  # a view: the device's allocator lives on
    b = plug.allocator(0)
    assert b.handle != 0 and b.stats()["allocated_bytes"] == 4096
    b.free(p)


def test_reset_closes_every_view_handed_out_before(host_plug):
    """plug.reset() destroys the devices' allocators: every view taken before
    is closed (a view once went on calling the destroyed allocator), every
    method raises the closed error, and a view taken after works. A reset
    refused for live blocks changes nothing, views included."""
    a = plug.allocator(0)
    d = a.domain("m")
    p = a.alloc(4096)
    with pytest.raises(ccalloc.LiveBlocksError):
        plug.reset()
    assert not a.closed and a.block_size(p) == 4096  # nothing changed
    a.free(p)
    d.destroy()
    d = a.domain("m2")
    b = plug.allocator(0)
    plug.reset()
    assert a.closed and b.closed
    calls = [
        lambda v: v.handle, lambda v: v.stats(), lambda v: v.alloc(4096), lambda v: v.free(p),
        lambda v: v.block_size(p), lambda v: v.record_stream(p, 5), lambda v: v.trim(),
        lambda v: v.empty_cache(), lambda v: v.reset_peak_stats(), lambda v: v.upstream_stats(),
        lambda v: v.mem_info(), lambda v: v.device_name, lambda v: v.config(), lambda v: v.snapshot(),
        lambda v: v.snapshot_torch(), lambda v: v.check(), lambda v: v.mark("x"), lambda v: v.domain("n"),
    ]
    for view in (a, b):
        for call in calls:
            with pytest.raises(ccalloc.InvalidArgumentError, match="closed"):
                call(view)
    with pytest.raises(ccalloc.InvalidArgumentError, match="closed"):
        d.stats()
    a.close()  # closing a closed view does nothing
    plug.configure(upstream="host:64M", conf=None)
    c = plug.allocator(0)
    assert not c.closed and c.stats()["alloc_calls"] == 0
    assert a.closed


def test_fork_while_threads_allocate_and_log(entry, log_lines):
    """os.fork() while other threads are inside cca_plug_alloc / cca_plug_free
    (ctypes lets go of the GIL there) and inside the log sink (a double free,
    logged through a Python sink that waits for the GIL the forking thread
    holds): every child allocates, frees, logs and exits, none waits for
    ever on a lock the parent's threads held at the fork (fork.c). A child
    that hangs ends by its alarm: exit by signal, a failure."""
    import threading

    alloc, free = entry
    stop = threading.Event()

    def allocate(stream):
        while not stop.is_set():
            free(alloc(4096, 0, stream), 4096, 0, stream)

    def double_free():
        p = alloc(4096, 0, None)
        free(p, 4096, 0, None)
        while not stop.is_set():
            free(p, 4096, 0, None)  # refused: logged, through the sink

    threads = [threading.Thread(target=allocate, args=(s,)) for s in (None, 0x100)]
    threads.append(threading.Thread(target=double_free))
    for t in threads:
        t.start()

    def child():
        held = plug.stats(0)["allocated_bytes"]  # a parent thread's block between its alloc and free
        p = alloc(4096, 0, None)
        grew = plug.stats(0)["allocated_bytes"] - held
        free(p, 4096, 0, None)
        free(p, 4096, 0, None)  # logged in the child
        return p and grew == 4096 and plug.stats(0)["allocated_bytes"] == held

    try:
        failed = fork_children(child, 100)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert failed is None, f"a child failed (fork number, wait status): {failed}"
    s = plug.stats(0)
    assert (s["allocated_bytes"], s["active_blocks"]) == (0, 0)
    assert s["alloc_calls"] == s["free_calls"]
    plug.allocator(0).check()
    assert log_lines and all("double free" in line for line in log_lines)
