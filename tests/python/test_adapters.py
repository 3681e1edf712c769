"""The three adapters without their frameworks.

1. Absent framework: each adapter raises ImportError naming what to install.
   Absence is simulated by ``sys.modules[name] = None`` (``import name`` then
   raises ImportError), so the tests pass whether or not the framework is
   installed here.
2. Stand-ins: small fake ``torch`` / ``cupy`` / ``numba`` modules with the
   few names each adapter uses, shaped after the real APIs (see each
   adapter's docstring for the versions checked), drive the adapters end to
   end on the simulated device. The fake PyTorch calls the library through
   function pointers with PyTorch's exact C signatures, as the real
   CUDAPluggableAllocator does.
"""
from __future__ import annotations

import collections
import ctypes
import gc
import sys
import types
import weakref

import pytest

import ccalloc
import ccalloc.cupy
import ccalloc.numba
import ccalloc.torch
from ccalloc import plug

from conftest import MiB

# ---- 1. absent frameworks ------------------------------------------------------------


def test_torch_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="pip install torch"):
        ccalloc.torch.enable()


def test_cupy_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match="pip install cupy"):
        ccalloc.cupy.enable()
    with pytest.raises(ImportError, match="pip install cupy"):
        ccalloc.cupy.malloc(1024)


def test_numba_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setitem(sys.modules, "numba.cuda", None)
    monkeypatch.setattr(ccalloc.numba, "_manager_class", None)
    with pytest.raises(ImportError, match="pip install numba-cuda"):
        ccalloc.numba.enable()
    with pytest.raises(ImportError, match="pip install numba-cuda"):
        ccalloc.numba._numba_memory_manager  # what NUMBA_CUDA_MEMORY_MANAGER=ccalloc.numba reads
    with pytest.raises(AttributeError):
        ccalloc.numba.no_such_name


def test_adapters_import_without_their_frameworks(monkeypatch):
    for name in ("torch", "cupy", "numba"):
        monkeypatch.setitem(sys.modules, name, None)
    import importlib

    for mod in ("ccalloc.torch", "ccalloc.cupy", "ccalloc.numba"):
        importlib.reload(importlib.import_module(mod))


# ---- 2. a stand-in PyTorch --------------------------------------------------------------

ALLOC_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
FREE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


def fake_torch(monkeypatch):
    """torch.cuda.memory.{CUDAPluggableAllocator, change_current_allocator} as PyTorch 2.x has them."""
    state = {"installed": None, "initialized": False}

    class CUDAPluggableAllocator:
        def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
            dll = ctypes.CDLL(path_to_so_file)
            self.path = path_to_so_file
            self.alloc = ALLOC_T(ctypes.cast(getattr(dll, alloc_fn_name), ctypes.c_void_p).value)
            self.free = FREE_T(ctypes.cast(getattr(dll, free_fn_name), ctypes.c_void_p).value)

    def change_current_allocator(allocator):
        if state["initialized"]:
            raise RuntimeError("Can't swap an already initialized allocator")
        state["installed"] = allocator
        state["initialized"] = True

    torch = types.ModuleType("torch")
    torch.__version__ = "2.99.0+fake"
    torch.version = types.SimpleNamespace(cuda="12.4", hip=None)
    cuda = types.ModuleType("torch.cuda")
    memory = types.ModuleType("torch.cuda.memory")
    memory.CUDAPluggableAllocator = CUDAPluggableAllocator
    memory.change_current_allocator = change_current_allocator
    cuda.memory = memory
    cuda.is_initialized = lambda: state["initialized"]
    cuda.current_device = lambda: 0
    torch.cuda = cuda
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.cuda", cuda)
    monkeypatch.setitem(sys.modules, "torch.cuda.memory", memory)
    return state


def test_torch_enable_installs_the_entry_points(monkeypatch):
    plug.reset()
    state = fake_torch(monkeypatch)
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    try:
        assert not ccalloc.torch.enabled()
        ccalloc.torch.enable(upstream="host:64M", conf="max_reserved:32M")
        assert ccalloc.torch.enabled()
        a = state["installed"]
        assert a.path == plug.library().path
        # what PyTorch does for a tensor: alloc on the current stream, free at death
        p = a.alloc(3 * MiB, 0, 0x7000)
        assert p
        s = ccalloc.torch.stats()
        assert (s["allocated_bytes"], s["reserved_bytes"]) == (3 * MiB, 20 * MiB)
        assert ccalloc.torch.snapshot()["config"]["max_reserved"] == 32 * MiB
        assert a.alloc(0, 0, None) is None
        a.free(p, 3 * MiB, 0, 0x7000)
        r = ccalloc.torch.empty_cache()
        assert (r.bytes_released, r.segments_released, r.bytes_still_reserved) == (20 * MiB, 1, 0)
        assert ccalloc.torch.mem_info() == (64 * MiB, 64 * MiB)
        # PyTorch refuses a second swap once its allocator was used
        with pytest.raises(RuntimeError, match="before the first CUDA allocation"):
            ccalloc.torch.enable()
        # and ccalloc refuses a new configuration once a device is in use
        with pytest.raises(ccalloc.InvalidArgumentError, match="already in use"):
            ccalloc.torch.enable(conf="max_reserved:1G")
    finally:
        plug.reset()



def test_torch_without_cuda_is_an_import_error(monkeypatch, host_plug):
    """A CPU-only PyTorch (the default pip wheel on many systems) has
    torch.cuda.memory.CUDAPluggableAllocator, but constructing one fails
    with an AttributeError on torch._C._cuda_customAllocator, which says
    nothing of the cause. enable() says what to install, before it touches
    the plug configuration."""
    fake_torch(monkeypatch)
    torch = sys.modules["torch"]
    monkeypatch.setattr(torch, "version", types.SimpleNamespace(cuda=None, hip=None))

    def cpu_build(self, path, alloc_fn_name, free_fn_name):
        raise AttributeError("module 'torch._C' has no attribute '_cuda_customAllocator'")

    monkeypatch.setattr(torch.cuda.memory.CUDAPluggableAllocator, "__init__", cpu_build)
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    with pytest.raises(ImportError, match=r"pip install torch .*2\.99\.0\+fake.* without CUDA"):
        ccalloc.torch.enable(upstream="host:8M")
    assert not ccalloc.torch.enabled()
    assert plug.mem_info(0)[1] == 64 * MiB  # host_plug's 64M device, not the 8M of the refused enable


@pytest.mark.parametrize("configured", [True, False])
def test_torch_enable_refused_after_pytorch_allocated_changes_nothing(monkeypatch, configured):
    """PyTorch refuses a new allocator once its own one was used: enable()
    raises RuntimeError, and the configuration it was given is not left
    behind for the other adapters (the plug's earlier one stays)."""
    plug.reset()
    state = fake_torch(monkeypatch)
    state["initialized"] = True  # a CUDA tensor from PyTorch's own allocator already
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    try:
        if configured:
            plug.configure(upstream="host:64M", conf="max_reserved:32M")
        with pytest.raises(RuntimeError, match="before the first CUDA allocation"):
            ccalloc.torch.enable(upstream="host:8M", conf="max_reserved:4M")
        assert not ccalloc.torch.enabled() and state["installed"] is None
        if configured:
            assert plug.mem_info(0)[1] == 64 * MiB
            assert plug.allocator(0).config()["max_reserved"] == "32M"
        else:  # as never configured: the environment's
            monkeypatch.setenv("CCALLOC_PLUG_UPSTREAM", "host:16M")
            monkeypatch.delenv("CCALLOC_CONF", raising=False)
            assert plug.mem_info(0)[1] == 16 * MiB
            assert plug.allocator(0).config()["max_reserved"] == "0"
    finally:
        plug.reset()


def test_adapter_device_arguments_are_ints_never_truncated_or_parsed(monkeypatch, host_plug):
    """ccalloc.torch and ccalloc.cupy took int(device): torch.stats(1.5)
    read device 1 and empty_cache("1") emptied it. A device is checked as
    every other one (docs/python.md): an int, else TypeError; one outside
    C's int is an InvalidArgumentError; the default is still the current one."""
    fake_torch(monkeypatch)
    fake_cupy(monkeypatch)
    fns = [ccalloc.torch.stats, ccalloc.torch.empty_cache, ccalloc.torch.snapshot, ccalloc.torch.mem_info,
           ccalloc.torch.snapshot_torch, lambda device: ccalloc.torch.trim(0, device), ccalloc.cupy.stats,
           ccalloc.cupy.empty_cache]
    for fn in fns:
        for bad in (0.0, 1.5, "0", "cuda:0", True):
            with pytest.raises(TypeError, match="device"):
                fn(device=bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            fn(device=1 << 32)
        fn(device=0)
        fn(device=None)
    assert ccalloc.torch.stats()["alloc_calls"] == 0


def test_current_domain_refuses_a_device_the_library_refuses(monkeypatch, host_plug):
    """plug.current_domain(-1) answered None (no domain entered there)
    while plug.allocator(-1), plug.domain and the C call behind it
    (cca_plug_get_domain) refuse a device outside [0, CCA_PLUG_MAX_DEVICES).
    The same refusal now, for the torch view too; a device in range that no
    block entered is still None, and nothing is created for it."""
    fake_torch(monkeypatch)
    for bad in (-1, 64, (1 << 31) - 1):
        for fn in (plug.allocator, plug.current_domain, ccalloc.torch.current_domain):
            with pytest.raises(ccalloc.InvalidArgumentError, match=r"device -?\d+ not in \[0, 64\)"):
                fn(bad)
    assert plug.current_domain(63) is None and ccalloc.torch.current_domain(63) is None
    assert plug.current_domain(0) is None


# ---- a stand-in CuPy ------------------------------------------------------------------


def fake_cupy(monkeypatch):
    """cupy.cuda.{UnownedMemory, MemoryPointer, set_allocator, runtime.getDevice, get_current_stream}."""
    state = {"allocator": None}

    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id=-1):
            if device_id < 0 and ptr == 0:
                raise RuntimeError("UnownedMemory requires explicit device ID for a null pointer.")
            self.ptr, self.size, self._owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr = mem, mem.ptr + offset

    class Stream:
        ptr = 0x6000

    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    cuda.UnownedMemory = UnownedMemory
    cuda.MemoryPointer = MemoryPointer
    cuda.runtime = types.SimpleNamespace(getDevice=lambda: 0)
    cuda.get_current_stream = lambda: Stream()
    cuda.set_allocator = lambda fn: state.__setitem__("allocator", fn)
    cupy.cuda = cuda
    cupy.get_default_memory_pool = lambda: types.SimpleNamespace(malloc="default-pool")
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return state


def test_cupy_enable_and_malloc(monkeypatch):
    plug.reset()
    state = fake_cupy(monkeypatch)
    try:
        ccalloc.cupy.enable(upstream="host:64M", conf="")
        fn = state["allocator"]
        assert fn is ccalloc.cupy.malloc
        mp = fn(MiB + 1)
        assert mp.ptr == mp.mem.ptr and mp.ptr % 256 == 0
        assert (mp.mem.size, mp.mem.device_id) == (MiB + 1, 0)
        s = ccalloc.cupy.stats()
        assert (s["allocated_bytes"], s["requested_bytes"]) == (MiB + 512, MiB + 1)
        snap = plug.snapshot(0)
        assert snap["segments"][0]["stream"] == hex(0x6000)  # the current stream reached the allocator
        owner = weakref.ref(mp.mem._owner)
        del mp
        gc.collect()
        assert owner() is None
        assert ccalloc.cupy.stats()["allocated_bytes"] == 0  # CuPy let go: back in ccalloc's cache
        empty = fn(0)
        assert (empty.ptr, empty.mem.size, empty.mem.device_id, empty.mem._owner) == (0, 0, 0, None)
        with pytest.raises(ccalloc.OutOfMemoryError):
            fn(128 * MiB)
        assert ccalloc.cupy.empty_cache().bytes_released == 20 * MiB
        ccalloc.cupy.disable()
        assert state["allocator"] == "default-pool"
    finally:
        plug.reset()


# ---- a stand-in Numba --------------------------------------------------------------


def fake_numba(monkeypatch, nv_binding):
    """numba.cuda's EMM names (HostOnlyCUDAMemoryManager, GetIpcHandleMixin,
    MemoryPointer, MemoryInfo, set_memory_manager) and the driver's pointer types.
    ``nv_binding``: True or False, an older Numba whose driver module has
    ``USE_NV_BINDING`` (the NVIDIA binding's ``CUdeviceptr`` or a ctypes
    pointer); None, numba-cuda 0.2x-0.30 (seen on a GPU machine, 0.30.4):
    no ``USE_NV_BINDING``, always the NVIDIA binding, and
    ``MemoryPointer.device_pointer_value`` is ``int(self.device_pointer)``
    (which on a ctypes pointer reads its bytes as digits: ValueError)."""
    state = {"manager": None}

    class BaseCUDAMemoryManager:
        def __init__(self, *args, **kwargs):
            if "context" not in kwargs:
                raise RuntimeError("Memory manager requires a context")
            self.context = kwargs.pop("context")

    class HostOnlyCUDAMemoryManager(BaseCUDAMemoryManager):
        pass

    class GetIpcHandleMixin:
        def get_ipc_handle(self, memory):
            return ("ipc", memory)

    class MemoryPointer:
        def __init__(self, context, pointer, size, owner=None, finalizer=None):
            self.context, self.device_pointer, self.size = context, pointer, size
            if finalizer is not None:
                self._finalizer = weakref.finalize(self, finalizer)

        @property
        def device_pointer_value(self):  # as numba's driver.py reads it
            if nv_binding is False:
                return self.device_pointer.value or None
            return int(self.device_pointer) or None

    class CUdeviceptr:
        def __init__(self, v):
            self.v = v

        def __int__(self):
            return self.v

    numba = types.ModuleType("numba")
    cuda = types.ModuleType("numba.cuda")
    cudadrv = types.ModuleType("numba.cuda.cudadrv")
    driver = types.ModuleType("numba.cuda.cudadrv.driver")
    drvapi = types.ModuleType("numba.cuda.cudadrv.drvapi")
    if nv_binding is not None:
        driver.USE_NV_BINDING = nv_binding
    driver.binding = types.SimpleNamespace(CUdeviceptr=CUdeviceptr)
    drvapi.cu_device_ptr = ctypes.c_size_t
    cuda.HostOnlyCUDAMemoryManager = HostOnlyCUDAMemoryManager
    cuda.GetIpcHandleMixin = GetIpcHandleMixin
    cuda.MemoryPointer = MemoryPointer
    cuda.MemoryInfo = collections.namedtuple("MemoryInfo", "free total")
    cuda.set_memory_manager = lambda cls: state.__setitem__("manager", cls)
    cuda.cudadrv = cudadrv
    cudadrv.driver = driver
    cudadrv.drvapi = drvapi
    numba.cuda = cuda
    for name, mod in (("numba", numba), ("numba.cuda", cuda), ("numba.cuda.cudadrv", cudadrv),
                      ("numba.cuda.cudadrv.driver", driver), ("numba.cuda.cudadrv.drvapi", drvapi)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(ccalloc.numba, "_manager_class", None)
    return state


@pytest.mark.parametrize("nv_binding", [False, True, None])
def test_numba_plugin(monkeypatch, nv_binding):
    plug.reset()
    state = fake_numba(monkeypatch, nv_binding)
    try:
        ccalloc.numba.enable(upstream="host:64M", conf="")
        cls = state["manager"]
        assert cls is ccalloc.numba.CcallocNumbaManager is ccalloc.numba._numba_memory_manager
        context = types.SimpleNamespace(device=types.SimpleNamespace(id=0))
        m = cls(context=context)
        assert m.interface_version == 1
        m.initialize()
        mp = m.memalloc(4096)
        address = mp.device_pointer.value if nv_binding is False else int(mp.device_pointer)
        assert address and address % 256 == 0
        assert mp.device_pointer_value == address
        assert type(mp.device_pointer).__name__ == ("c_ulong" if nv_binding is False else "CUdeviceptr")
        assert ccalloc.numba.stats()["allocated_bytes"] == 4096
        info = m.get_memory_info()
        assert (info.free, info.total) == plug.mem_info(0) == (62 * MiB, 64 * MiB)
        assert m.get_ipc_handle(mp) == ("ipc", mp)  # the driver-based mixin
        del mp
        gc.collect()
        assert ccalloc.numba.stats()["allocated_bytes"] == 0
        zero = m.memalloc(0)
        assert zero.size == 0 and not hasattr(zero, "_finalizer")
        with pytest.raises(ccalloc.OutOfMemoryError):
            m.memalloc(128 * MiB)
        assert ccalloc.numba.empty_cache().bytes_still_reserved == 0
    finally:
        plug.reset()


def test_numba_plugin_on_numbas_older_module_layout(monkeypatch):
    """A Numba whose numba.cuda does not export GetIpcHandleMixin and
    MemoryInfo (they are in numba.cuda.cudadrv.driver), with the ctypes
    binding and a drvapi without cu_device_ptr: the plugin takes both names
    from the driver module and hands Numba a c_size_t holding the address."""
    plug.reset()
    state = fake_numba(monkeypatch, False)
    cuda, driver = sys.modules["numba.cuda"], sys.modules["numba.cuda.cudadrv.driver"]
    driver.GetIpcHandleMixin, driver.MemoryInfo = cuda.GetIpcHandleMixin, cuda.MemoryInfo
    del cuda.GetIpcHandleMixin, cuda.MemoryInfo
    del sys.modules["numba.cuda.cudadrv.drvapi"].cu_device_ptr
    try:
        ccalloc.numba.enable(upstream="host:64M", conf="")
        m = state["manager"](context=types.SimpleNamespace(device=types.SimpleNamespace(id=0)))
        m.initialize()
        mp = m.memalloc(4096)
        assert type(mp.device_pointer) is ctypes.c_size_t
        assert mp.device_pointer.value == mp.device_pointer_value
        assert plug.allocator(0).block_size(mp.device_pointer.value) == 4096
        assert m.get_ipc_handle(mp) == ("ipc", mp)
        info = m.get_memory_info()
        assert type(info) is driver.MemoryInfo and tuple(info) == plug.mem_info(0)
        del mp
        gc.collect()
        assert ccalloc.numba.stats()["allocated_bytes"] == 0
    finally:
        plug.reset()


@pytest.mark.parametrize("framework", ["cupy", "numba"])
def test_enable_with_no_arguments_keeps_the_configuration_in_force(monkeypatch, host_plug, framework):
    """enable() with neither conf nor upstream configures nothing: an
    earlier plug.configure stays in force, as for ccalloc.torch.enable.
    Configuring again (None: the environment's) would be refused once a
    device has a block, and would drop the simulated device of 64 MiB."""
    if framework == "cupy":
        state, installed, want = fake_cupy(monkeypatch), "allocator", ccalloc.cupy.malloc
    else:
        state, installed = fake_numba(monkeypatch, False), "manager"
        want = ccalloc.numba.manager_class()
    p = plug.alloc(4096)
    try:
        getattr(ccalloc, framework).enable()
        assert state[installed] is want
        assert plug.allocator(0).block_size(p) == 4096 and plug.mem_info(0) == (62 * MiB, 64 * MiB)
    finally:
        if framework == "cupy":
            ccalloc.cupy.disable()
        plug.free(p)


def test_numba_trim_gives_cached_memory_back(monkeypatch):
    """The Numba adapter's docstring and docs/python.md name its own
    ``empty_cache`` / ``trim`` as what gives device memory back: both exist
    and release the device's cache (a 4 KiB block's small range, 2 MiB
    mapped, under the default expandable segments)."""
    plug.reset()
    fake_numba(monkeypatch, False)
    try:
        ccalloc.numba.enable(upstream="host:64M", conf="")
        p = plug.alloc(4096)
        plug.free(p)
        assert ccalloc.numba.trim(2 * MiB).bytes_released == 0
        r = ccalloc.numba.trim(0)
        assert (r.bytes_released, r.segments_released, r.bytes_still_reserved) == (2 * MiB, 1, 0)
        assert ccalloc.numba.stats()["reserved_bytes"] == 0
    finally:
        plug.reset()


def test_torch_functions_follow_the_current_device_without_initializing_cuda(monkeypatch, tmp_path):
    """ccalloc.torch's functions default to PyTorch's current device once
    CUDA is initialized, and to device 0 before, without asking PyTorch
    (torch.cuda.current_device() initializes CUDA, after which PyTorch
    refuses enable()). trim keeps what it is asked to keep; snapshot_torch
    writes the file it is given."""
    import pickle

    plug.reset()
    state = fake_torch(monkeypatch)

    def current_device():
        state["initialized"] = True  # PyTorch initializes CUDA lazily, here too
        return 1

    monkeypatch.setattr(sys.modules["torch.cuda"], "current_device", current_device)
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    try:
        plug.configure(upstream="host:64M:2")
        p = plug.alloc(4096, device=1)
        assert ccalloc.torch.stats()["allocated_bytes"] == 0  # device 0
        assert not state["initialized"]
        ccalloc.torch.enable()  # not refused: CUDA was left alone
        assert ccalloc.torch.stats()["allocated_bytes"] == 4096  # the current device, 1
        path = tmp_path / "snap.pickle"
        snap = ccalloc.torch.snapshot_torch(str(path))
        assert [s["device"] for s in snap["segments"]] == [1]
        assert pickle.loads(path.read_bytes()) == snap
        plug.free(p, device=1)
        assert ccalloc.torch.trim(2 * MiB).bytes_released == 0
        r = ccalloc.torch.trim(0)
        assert (r.bytes_released, r.segments_released, r.bytes_still_reserved) == (2 * MiB, 1, 0)
        assert plug.stats(0)["alloc_calls"] == 0 and plug.stats(1)["reserved_bytes"] == 0
    finally:
        plug.reset()


def test_cupy_follows_the_current_device_and_takes_a_conf_alone(monkeypatch):
    """malloc allocates on CuPy's current device (runtime.getDevice()) and
    names it to CuPy (UnownedMemory's device_id); enable(conf=...) without
    an upstream configures with the environment's upstream."""
    plug.reset()
    state = fake_cupy(monkeypatch)
    monkeypatch.setattr(sys.modules["cupy"].cuda.runtime, "getDevice", lambda: 1)
    monkeypatch.setenv("CCALLOC_PLUG_UPSTREAM", "host:64M:2")
    monkeypatch.delenv("CCALLOC_CONF", raising=False)
    try:
        ccalloc.cupy.enable(conf="max_reserved:32M")
        mp = state["allocator"](4096)
        assert mp.mem.device_id == 1
        assert ccalloc.cupy.stats()["allocated_bytes"] == plug.stats(1)["allocated_bytes"] == 4096
        assert plug.stats(0)["alloc_calls"] == 0
        assert plug.allocator(1).config()["max_reserved"] == "32M"
        del mp
        gc.collect()
        assert ccalloc.cupy.stats()["allocated_bytes"] == 0
        assert ccalloc.cupy.empty_cache().bytes_still_reserved == 0
    finally:
        plug.reset()


def test_numba_plugin_serves_its_contexts_device_and_takes_a_conf_alone(monkeypatch):
    """The plugin allocates on its context's device; initialize() creates
    that device's allocator, so a device the upstream lacks fails there, at
    once (docstring); enable(conf=...) without an upstream configures with
    the environment's."""
    plug.reset()
    state = fake_numba(monkeypatch, False)
    monkeypatch.setenv("CCALLOC_PLUG_UPSTREAM", "host:64M:2")
    monkeypatch.delenv("CCALLOC_CONF", raising=False)
    try:
        ccalloc.numba.enable(conf="max_reserved:32M")
        m = state["manager"](context=types.SimpleNamespace(device=types.SimpleNamespace(id=1)))
        m.initialize()
        mp = m.memalloc(4096)
        assert plug.stats(1)["allocated_bytes"] == 4096 and plug.stats(0)["alloc_calls"] == 0
        assert plug.allocator(1).config()["max_reserved"] == "32M"
        assert tuple(m.get_memory_info()) == plug.mem_info(1)
        del mp
        gc.collect()
        assert plug.stats(1)["allocated_bytes"] == 0
        far = state["manager"](context=types.SimpleNamespace(device=types.SimpleNamespace(id=2)))
        with pytest.raises(ccalloc.InvalidArgumentError, match="simulated device 2 not in"):
            far.initialize()
    finally:
        plug.reset()
