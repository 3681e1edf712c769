"""Domains for framework users: ``ccalloc.torch.domain`` (and ``ccalloc.cupy.domain``)
over ``cca_plug_set_domain``, with the stand-in PyTorch and CuPy of
test_adapters.py on the simulated device.

The stand-in PyTorch calls ``cca_plug_alloc`` / ``cca_plug_free`` through
function pointers with PyTorch's C signatures, on the thread that makes the
tensor, as the real CUDAPluggableAllocator does; a ``Tensor`` here is a block
freed when the object dies, as a PyTorch tensor's storage is. Where a block
lives is read from the allocator's own snapshot (segment by segment), and
memory given back from the simulated device's ``mem_info``.
"""
from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import os
import subprocess
import sys
import threading

import pytest

import ccalloc
import ccalloc.cupy
import ccalloc.torch
from ccalloc import plug

from conftest import PACKAGE_DIR, MiB
from test_adapters import fake_cupy, fake_torch


class Tensor:
    """A stand-in CUDA tensor: its storage from the installed allocator, freed when it dies."""

    def __init__(self, allocator, nbytes: int, fill: int = 0, device: int = 0) -> None:
        self._free, self.nbytes, self.device = allocator.free, nbytes, device
        self.ptr = allocator.alloc(nbytes, device, None)
        assert self.ptr, "cca_plug_alloc returned NULL"
        ctypes.memset(self.ptr, fill, nbytes)

    def filled_with(self, fill: int) -> bool:
        return ctypes.string_at(self.ptr, self.nbytes) == bytes([fill]) * self.nbytes

    def __del__(self) -> None:
        self._free(self.ptr, self.nbytes, self.device, None)


@pytest.fixture
def torch_alloc(monkeypatch):
    """The stand-in PyTorch with ccalloc enabled on a simulated device of 256 MiB
    (two device numbers); yields the allocator PyTorch was given."""
    plug.reset()
    state = fake_torch(monkeypatch)
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    ccalloc.torch.enable(upstream="host:256M:2")
    yield state["installed"]
    gc.collect()
    plug.reset()


def domain_of(ptr: int, device: int = 0) -> str:
    """The name of the domain holding live block ``ptr``, from the snapshot."""
    for seg in plug.snapshot(device)["segments"]:
        base = int(seg["address"], 16)
        if base <= ptr < base + seg["size"]:
            for b in seg["blocks"]:
                if base + b["offset"] == ptr and b["state"] == "live":
                    return seg["domain"]
    raise AssertionError(f"{ptr:#x} is not a live block")


def test_tensors_in_the_block_land_in_the_domain(torch_alloc):
    before = Tensor(torch_alloc, MiB)
    with ccalloc.torch.domain("model-a") as a:
        assert ccalloc.torch.current_domain() is a
        weights = [Tensor(torch_alloc, n * MiB) for n in (1, 3, 5)]
    after = Tensor(torch_alloc, 2 * MiB)
    assert ccalloc.torch.current_domain() is None
    assert [domain_of(t.ptr) for t in weights] == ["model-a"] * 3
    assert (domain_of(before.ptr), domain_of(after.ptr)) == ("default", "default")
    assert a.name == "model-a" and a.device == 0 and not a.destroyed
    s = a.stats()
    assert (s["name"], s["allocated_bytes"], s["alloc_calls"], s["active_blocks"]) == ("model-a", 9 * MiB, 3, 3)
    default = plug.snapshot()["domains"][0]
    assert (default["name"], default["allocated_bytes"], default["alloc_calls"]) == ("default", 3 * MiB, 2)
    # the domain outlives its block: entered again, it takes more
    with a:
        more = Tensor(torch_alloc, MiB)
    assert domain_of(more.ptr) == "model-a" and a.stats()["allocated_bytes"] == 10 * MiB
    # a free needs no domain: a block freed inside another domain's block goes back to its own
    with ccalloc.torch.domain("other"):
        del weights[0]
    assert a.stats()["allocated_bytes"] == 9 * MiB
    plug.allocator(0).check()


def test_two_threads_two_domains(torch_alloc):
    """Two threads allocating at once, each in its own domain: every tensor in
    its thread's domain; the main thread's stays the default."""
    go = threading.Barrier(2)
    made = {}
    errors = []

    def worker(name):
        try:
            with ccalloc.torch.domain(name) as d:
                go.wait()
                made[name] = (d, [Tensor(torch_alloc, (k % 5 + 1) * 256 * 1024) for k in range(40)])
                assert ccalloc.torch.current_domain() is d
        except BaseException as e:  # reported below, on the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert ccalloc.torch.current_domain() is None
    for name, (d, tensors) in made.items():
        assert {domain_of(t.ptr) for t in tensors} == {name}
        assert d.stats()["alloc_calls"] == 40
        assert d.stats()["allocated_bytes"] == sum(t.nbytes for t in tensors)
    assert plug.snapshot()["domains"][0]["alloc_calls"] == 0
    plug.allocator(0).check()


def test_release_returns_that_domains_memory_while_the_other_stays(torch_alloc):
    with ccalloc.torch.domain("model-a") as a:
        model_a = [Tensor(torch_alloc, n * MiB, fill=0xA0 + n) for n in (2, 7, 1)]
    with ccalloc.torch.domain("model-b") as b:
        model_b = [Tensor(torch_alloc, n * MiB, fill=0xB0 + n) for n in (3, 5)]
    reserved_a, reserved_b = a.stats()["reserved_bytes"], b.stats()["reserved_bytes"]
    assert reserved_a > 0 and reserved_b > 0
    free_before, total = ccalloc.torch.mem_info()
    assert free_before == total - reserved_a - reserved_b  # the simulated device counts exactly

    del model_a
    gc.collect()
    r = a.release()
    assert (r.bytes_released, r.bytes_still_reserved, r.live_blocks) == (reserved_a, 0, 0)
    assert ccalloc.torch.mem_info()[0] == free_before + reserved_a  # exactly a's bytes back to the device
    assert a.stats()["reserved_bytes"] == 0 and not a.destroyed  # empty, usable
    sb = b.stats()
    assert (sb["reserved_bytes"], sb["allocated_bytes"]) == (reserved_b, 8 * MiB)
    assert [t.filled_with(0xB0 + n) for t, n in zip(model_b, (3, 5))] == [True, True]
    # a is usable again after its release
    with a:
        again = Tensor(torch_alloc, MiB)
    assert domain_of(again.ptr) == "model-a"
    del again, model_b
    gc.collect()
    b.destroy()
    a.destroy()
    assert ccalloc.torch.stats()["reserved_bytes"] == 0
    assert ccalloc.torch.mem_info()[0] == total


def test_release_with_live_tensors_says_which_and_releases_nothing(torch_alloc):
    with ccalloc.torch.domain("model-a") as a:
        kept = Tensor(torch_alloc, 3 * MiB, fill=7)
        gone = Tensor(torch_alloc, MiB)
    del gone
    reserved, free_before = a.stats()["reserved_bytes"], ccalloc.torch.mem_info()[0]
    with pytest.raises(ccalloc.LiveBlocksError, match=r"1 live blocks \(3145728 bytes\); nothing released; "
                       rf"live: {kept.ptr:#x}: 3145728 bytes") as e:
        a.release()
    assert [(b.ptr, b.size, b.pending) for b in e.value.report.leaks] == [(kept.ptr, 3 * MiB, False)]
    assert (a.stats()["reserved_bytes"], ccalloc.torch.mem_info()[0]) == (reserved, free_before)
    assert kept.filled_with(7)
    with pytest.raises(ccalloc.LiveBlocksError):
        a.destroy()
    assert not a.destroyed
    del kept
    assert a.release().bytes_released == reserved


def test_blocks_nest_and_restore(torch_alloc):
    cur = ccalloc.torch.current_domain
    a, b = ccalloc.torch.domain("a"), ccalloc.torch.domain("b")
    assert cur() is None  # made, not entered
    with a:
        with b:
            assert cur() is b
            t_b = Tensor(torch_alloc, MiB)
            with a:  # the same domain twice on one stack
                t_a2 = Tensor(torch_alloc, MiB)
            assert cur() is b
        assert cur() is a
        t_a = Tensor(torch_alloc, MiB)
    assert cur() is None
    t_default = Tensor(torch_alloc, MiB)
    assert [domain_of(t.ptr) for t in (t_b, t_a2, t_a, t_default)] == ["b", "a", "a", "default"]
    # left out of order (an ExitStack closed by hand): the domain entered last stays current
    # until it is left, and then the one before both
    with ccalloc.torch.domain("c") as c:
        a.__enter__()
        b.__enter__()
        a.__exit__(None, None, None)
        assert cur() is b
        b.__exit__(None, None, None)
        assert cur() is c
        t_c = Tensor(torch_alloc, MiB)  # and c is the one PyTorch allocates in, not a
        assert domain_of(t_c.ptr) == "c"
    assert cur() is None
    with pytest.raises(RuntimeError, match="without its __enter__"):
        a.__exit__(None, None, None)
    # an exception in a block restores too
    with pytest.raises(KeyError):
        with a:
            raise KeyError("x")
    assert cur() is None


def test_a_generators_block_closed_inside_a_block_of_the_same_domain(torch_alloc):
    """A generator holding a block of d, closed inside the caller's own block
    of d (itself inside e): the generator's block is the one that ends (its
    frame's), not the innermost of d, so the caller's block keeps d current
    until it ends, then e, then the default."""
    d, e = ccalloc.torch.domain("d"), ccalloc.torch.domain("e")

    def holder():
        with d:
            yield

    g = holder()
    next(g)
    with e:
        with d:
            g.close()
            t_d = Tensor(torch_alloc, MiB)
        t_e = Tensor(torch_alloc, MiB)
    t_default = Tensor(torch_alloc, MiB)
    assert [domain_of(t.ptr) for t in (t_d, t_e, t_default)] == ["d", "e", "default"]
    assert ccalloc.torch.current_domain() is None


def test_an_exit_stacks_block_closed_inside_a_with_block_of_the_same_domain(torch_alloc):
    """An ExitStack holding a block of d, closed inside a with block of d
    (inside f, inside e): the ExitStack's block is the one that ends, so
    the with block keeps d current. Its exit comes from the ExitStack's
    frames, which entered nothing; the innermost block of d was taken
    instead, the with statement's, whose end made f current inside
    `with d` (PyTorch allocated there in f). A block is matched by the
    frame that entered it (its id and its code: an id alone is reused
    once that frame is gone); otherwise the innermost of d whose
    entering frame neither still runs on this thread nor is a
    generator's."""
    d, e, f = (ccalloc.torch.domain(n) for n in "def")
    cur = ccalloc.torch.current_domain
    stack = contextlib.ExitStack()

    def inner():
        with f:
            with d:
                stack.close()  # ends the ExitStack's block of d, entered before all of these
                assert cur() is d
                t_d = Tensor(torch_alloc, MiB)
            assert cur() is f
            t_f = Tensor(torch_alloc, MiB)
        return t_d, t_f

    with e:
        stack.enter_context(d)
        t_d, t_f = inner()
        assert cur() is e
        t_e = Tensor(torch_alloc, MiB)
    assert cur() is None
    assert [domain_of(t.ptr) for t in (t_d, t_f, t_e)] == ["d", "f", "e"]


def test_domain_of_another_device(torch_alloc):
    with ccalloc.torch.domain("on-1", device=1) as d:
        assert ccalloc.torch.current_domain(1) is d and ccalloc.torch.current_domain(0) is None
        t0 = Tensor(torch_alloc, MiB, device=0)
        t1 = Tensor(torch_alloc, MiB, device=1)
    assert (domain_of(t0.ptr, 0), domain_of(t1.ptr, 1)) == ("default", "on-1")
    assert d.device == 1


def test_not_enabled_is_a_runtime_error(monkeypatch, host_plug):
    fake_torch(monkeypatch)
    monkeypatch.setattr(ccalloc.torch, "_installed", None)
    with pytest.raises(RuntimeError, match=r"ccalloc.torch.enable\(\) first"):
        ccalloc.torch.domain("a")
    monkeypatch.setattr(ccalloc.cupy, "_enabled", False)
    with pytest.raises(RuntimeError, match=r"ccalloc.cupy.enable\(\) first"):
        ccalloc.cupy.domain("a")
    assert plug.snapshot()["domains"] == [plug.snapshot()["domains"][0]]  # nothing created


@pytest.mark.parametrize("name", ["", "a,b", 'say "hi"', "back\\slash", "x" * 64, "caf\u00e9", "tab\there",
                                  "nul\0"])
def test_bad_names_are_refused(torch_alloc, name):
    with pytest.raises(ccalloc.InvalidArgumentError):
        ccalloc.torch.domain(name)
    assert len(plug.snapshot()["domains"]) == 1


@pytest.mark.parametrize("name", [None, 5, b"bytes"])
def test_names_of_another_type_are_a_type_error(torch_alloc, name):
    with pytest.raises(TypeError, match="str"):
        ccalloc.torch.domain(name)


def test_destroy_inside_its_block_is_refused_and_a_destroyed_domain_cannot_be_entered(torch_alloc):
    d = ccalloc.torch.domain("a")
    with d:
        with pytest.raises(ccalloc.InvalidArgumentError, match="leave them before destroy"):
            d.destroy()
        t = Tensor(torch_alloc, MiB)  # still allocating in d
    assert domain_of(t.ptr) == "a"
    del t
    d.destroy()
    assert d.destroyed and "destroyed" in repr(d)
    with pytest.raises(ccalloc.InvalidArgumentError, match="destroyed"):
        with d:
            pass
    assert ccalloc.torch.current_domain() is None
    # entered on another thread: refused here too
    e = ccalloc.torch.domain("e")
    block = contextlib.ExitStack()
    with waiting_thread(lambda: block.enter_context(e), block.close):
        with pytest.raises(ccalloc.InvalidArgumentError, match="1 `with` block"):
            e.destroy()
    e.destroy()


@contextlib.contextmanager
def waiting_thread(first, then=None, name=None):
    """A thread that runs first(), then waits until the with block ends,
    then runs then(), and is joined."""
    entered, leave = threading.Event(), threading.Event()

    def run():
        first()
        entered.set()
        leave.wait(10)
        if then:
            then()

    t = threading.Thread(target=run, name=name)
    t.start()
    entered.wait(10)
    try:
        yield t
    finally:
        leave.set()
        t.join()


def test_a_block_left_on_another_thread(torch_alloc):
    """A generator whose ``with`` block is entered on one thread and resumed
    on another: the block's domain stays current on the thread that entered
    it (its C slot), so destroy() is refused while that thread runs and
    allowed once it has ended; an __exit__ elsewhere says which thread."""
    d = ccalloc.torch.domain("gen")

    def gen():
        with d:
            yield Tensor(torch_alloc, MiB)
            yield None

    # entered on a thread that then ends with the generator suspended inside the block
    g = gen()
    box = []
    t = threading.Thread(target=lambda: box.append(next(g)), name="loader")
    t.start()
    t.join()
    assert domain_of(box[0].ptr) == "gen"
    del box[:]
    assert ccalloc.torch.current_domain() is None  # this thread's domain never changed
    g.close()  # GeneratorExit: __exit__ here, for a block whose thread has ended: no error
    gc.collect()
    d.destroy()  # refused before: the ended thread's block counted for ever
    assert d.destroyed

    # entered on a thread that still runs: refused, and that thread keeps the domain
    e = ccalloc.torch.domain("gen-e")

    def gen_e():
        with e:
            yield
            yield

    g = gen_e()
    seen = []

    def allocate():
        t = Tensor(torch_alloc, MiB)
        seen.append(domain_of(t.ptr))  # still e here

    with waiting_thread(lambda: next(g), allocate, name="runner"):
        with pytest.raises(RuntimeError, match="other than its __enter__'s \\('runner', which still runs\\)"):
            g.close()
        with pytest.raises(ccalloc.InvalidArgumentError, match="1 `with` block"):
            e.destroy()
    gc.collect()
    assert seen == ["gen-e"]
    e.destroy()
    assert ccalloc.torch.current_domain() is None


def test_blocks_of_ended_threads_end_one_by_one(torch_alloc):
    """Each block whose thread has ended ends quietly at its own __exit__:
    the second of two such generators too, and one closed after destroy();
    one closed inside this thread's own block of the domain leaves that
    block's domain current here."""
    d = ccalloc.torch.domain("ended")

    def gen():
        with d:
            yield
            yield

    def suspended_on_a_thread_that_ends():
        g = gen()
        t = threading.Thread(target=lambda: next(g))
        t.start()
        t.join()
        return g

    first, second = suspended_on_a_thread_that_ends(), suspended_on_a_thread_that_ends()
    first.close()
    second.close()  # raised "without its __enter__": the first close had forgotten both blocks
    late = suspended_on_a_thread_that_ends()
    d.destroy()  # the ended thread's block does not count
    late.close()  # raised: destroy() had forgotten the block
    e = ccalloc.torch.domain("ended-e")
    held = [None]

    def gen_e():
        with e:
            yield
            yield

    held[0] = gen_e()
    t = threading.Thread(target=lambda: next(held[0]))
    t.start()
    t.join()
    with e:
        del held[0]  # its generator closes here, on this thread: its block, not this one, ends
        assert ccalloc.torch.current_domain() is e
        t = Tensor(torch_alloc, MiB)
        assert domain_of(t.ptr) == "ended-e"  # was the default: the close had ended this thread's block
    assert ccalloc.torch.current_domain() is None
    del t
    e.destroy()


_MAIN_AT_EXIT = r"""
import atexit
from ccalloc import plug
plug.configure(upstream="host:64M")
d = plug.domain("main")

def gen():
    with d:
        yield
        yield

g = gen()
next(g)  # the main thread's block stays open into the interpreter's exit


def at_exit():  # threading.main_thread().is_alive() is False here
    try:
        d.destroy()
        print("destroyed")
    except Exception as e:
        print(type(e).__name__)
    print(hex(plug.alloc(1 << 20)) != "0x0")
    g.close()
    print("closed")


atexit.register(at_exit)
"""


def test_the_main_threads_block_counts_at_exit():
    """At the interpreter's exit (atexit) the main thread is no longer
    is_alive() but still runs: its open block still refuses destroy(), its
    allocations stay in the domain and its __exit__ ends it."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), CCALLOC_LIBRARY=ccalloc.library_path())
    r = subprocess.run([sys.executable, "-c", _MAIN_AT_EXIT], capture_output=True, text=True, env=env, timeout=60)
    # was: "destroyed", the allocation refused (a destroyed domain), then ValueError from list.remove
    assert r.stdout.split() == ["InvalidArgumentError", "True", "closed"], r.stdout + r.stderr


def test_reset_ends_another_threads_block(torch_alloc):
    """plug.reset() while a generator's block is open on a thread that still
    runs: the block is over (every thread's domain is the default), so its
    __exit__ on this thread raises nothing."""
    d = ccalloc.torch.domain("gone")

    def gen():
        with d:
            yield

    g = gen()
    with waiting_thread(lambda: next(g)):
        gc.collect()
        plug.reset()
        plug.configure(upstream="host:64M")
        assert d.destroyed
        g.close()  # raised RuntimeError ("the domain stays current there") before


def test_reset_inside_a_block(torch_alloc, monkeypatch):
    """plug.reset() (tests) while a block is open: the domain goes with its
    allocator, leaving the block raises nothing, and allocations are the
    default domain's again."""
    with ccalloc.torch.domain("a") as d:
        gc.collect()
        plug.reset()
        plug.configure(upstream="host:64M")
        assert d.destroyed and ccalloc.torch.current_domain() is None
        t = Tensor(torch_alloc, MiB)
    assert domain_of(t.ptr) == "default" and ccalloc.torch.current_domain() is None
    # nested: the inner block's previous domain went with the reset too; neither block sets it again
    with ccalloc.torch.domain("outer"):
        with ccalloc.torch.domain("inner"):
            del t
            gc.collect()
            plug.reset()
            plug.configure(upstream="host:64M")
            t = Tensor(torch_alloc, MiB)
        assert ccalloc.torch.current_domain() is None
        u = Tensor(torch_alloc, MiB)
    assert (domain_of(t.ptr), domain_of(u.ptr)) == ("default", "default")


def test_plug_alloc_follows_the_current_domain(host_plug):
    """ccalloc.plug.alloc (what the CuPy and Numba adapters call) takes the
    thread's current domain as cca_plug_alloc does."""
    with plug.domain("p") as d:
        p = plug.alloc(MiB)
    q = plug.alloc(MiB)
    assert (domain_of(p), domain_of(q)) == ("p", "default")
    assert d.stats()["allocated_bytes"] == MiB
    plug.free(p)
    plug.free(q)


def test_a_view_with_live_domains_is_not_closed(host_plug):
    """Closing a plug view only detaches it: while a domain made through it
    lives it is refused and changes nothing. It closed, and the domain
    became `destroyed` with its C domain and memory still in the device's
    allocator, unreachable (release, destroy and wake raised "closed"), and
    a `with` block it was in left it current: the next framework
    allocation landed in it. Once the domains are destroyed the view
    closes."""
    d = plug.domain("model-a")
    with d:
        with pytest.raises(ccalloc.InvalidArgumentError, match="'model-a'"):
            d.allocator.close()
        assert not d.allocator.closed and not d.destroyed
    p = plug.alloc(MiB)
    assert domain_of(p) == "default", "the block's end made the default current again"
    plug.free(p)
    v = plug.allocator(0)
    raw = v.domain("raw")
    with pytest.raises(ccalloc.InvalidArgumentError, match="'raw'"):
        v.close()
    q = plug.alloc(MiB)
    with d:
        r = plug.alloc(MiB)
    assert (domain_of(q), domain_of(r)) == ("default", "model-a")
    plug.free(r)
    plug.free(q)
    assert d.release().bytes_released > 0
    raw.destroy()
    v.close()
    assert v.closed
    d.destroy()
    d.allocator.close()
    assert d.allocator.closed and d.destroyed


def test_a_view_closed_while_a_domain_is_made_through_it_waits_and_refuses(host_plug, monkeypatch):
    """A close() on one thread while another thread makes a domain through
    the same plug view: the domain made in C before the close took the
    view's handle, and entered in the view's list only after close() had
    found it empty, ended up behind a closed view (destroyed to Python,
    its memory in the device's allocator). Now close() waits for a domain
    being made, then refuses because it lives; a domain asked for after
    the close took the handle raises "closed" and makes nothing."""
    import threading

    import ccalloc.allocator as ca

    v = plug.allocator(0)
    made, go = threading.Event(), threading.Event()

    class Slow(ca.Domain):  # the Python object comes after the C domain: hold it there
        def __init__(self, *args):
            made.set()
            assert go.wait(10)
            super().__init__(*args)

    monkeypatch.setattr(ca, "Domain", Slow)
    out = {}
    maker = threading.Thread(target=lambda: out.setdefault("d", v.domain("late")))
    maker.start()
    assert made.wait(10), "the C domain was made"
    closer = threading.Thread(target=lambda: out.setdefault("close", _outcome(v.close)))
    closer.start()
    closer.join(0.3)
    waited = closer.is_alive()
    go.set()
    assert waited, "close() waits while a domain is being made through the view"
    maker.join(10)
    closer.join(10)
    assert isinstance(out["close"], ccalloc.InvalidArgumentError) and "'late'" in str(out["close"])
    d = out["d"]
    assert not v.closed and not d.destroyed
    p = d.alloc(MiB)
    d.free(p)
    d.destroy()
    v.close()
    assert v.closed
    monkeypatch.undo()
    with pytest.raises(ccalloc.InvalidArgumentError, match="closed"):
        v.domain("after")


def test_a_view_closed_by_the_thread_making_a_domain_is_refused(host_plug, monkeypatch):
    """close() from the thread that is making a domain through the view (a
    signal handler's clean-up, a finalizer) would wait for its own thread
    for ever: it is refused as a close from inside one of the view's own
    calls is, and the domain is made."""
    import ccalloc.allocator as ca

    v = plug.allocator(0)
    seen = []

    class Closing(ca.Domain):
        def __init__(self, *args):
            seen.append(_outcome(v.close))  # as a handler would, between the C domain and its object
            super().__init__(*args)

    monkeypatch.setattr(ca, "Domain", Closing)
    d = v.domain("own")
    monkeypatch.undo()
    assert isinstance(seen[0], ccalloc.InvalidArgumentError) and "from inside a call" in str(seen[0]), seen
    assert not v.closed and not d.destroyed
    d.destroy()
    v.close()
    assert v.closed


def test_a_views_close_meets_domains_made_and_destroyed_meanwhile(host_plug):
    """close() reads the view's domains while other threads make and destroy
    domains through it: it raises only InvalidArgumentError (domains
    alive), never RuntimeError from a set that changed size under it."""
    import sys
    import threading

    v = plug.allocator(0)
    keep = [v.domain(f"k{i}") for i in range(200)]
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            v.domain("m").destroy()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    t = threading.Thread(target=churn)
    t.start()
    try:
        others = []
        for _ in range(3000):
            e = _outcome(v.close)
            if not isinstance(e, ccalloc.InvalidArgumentError):
                others.append(e)
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert others == [], others[:3]
    for d in keep:
        d.destroy()
    v.close()
    assert v.closed


def _outcome(fn):
    try:
        return fn()
    except Exception as e:  # the test reads which
        return e


def test_a_block_whose_previous_domain_is_gone_leaves_the_default(host_plug):
    """The domain current before a block (set from C, cca_plug_set_domain, or
    an Allocator.domain of the plug allocator) destroyed during the block:
    leaving it makes the default domain current and says so
    (InvalidArgumentError), unless the block ends with an exception of its
    own, which is the one raised."""
    lib = plug.library()
    d = plug.domain("d")
    for exc in (None, KeyError("the real problem")):
        raw = plug.allocator(0).domain("raw")
        assert lib.cca_plug_set_domain(0, raw.handle, None) == 0
        with pytest.raises(type(exc) if exc else ccalloc.InvalidArgumentError,
                           match="the real problem" if exc else "is not one of this allocator's"):
            with d:
                raw.destroy()
                if exc:
                    raise exc
        p = plug.alloc(MiB)
        assert domain_of(p) == "default" and d.stats()["allocated_bytes"] == 0
        plug.free(p)
    d.destroy()


def test_cupy_domain(monkeypatch):
    plug.reset()
    state = fake_cupy(monkeypatch)
    try:
        ccalloc.cupy.enable(upstream="host:64M", conf="")
        assert ccalloc.cupy.enabled()
        with ccalloc.cupy.domain("arrays") as d:
            mp = state["allocator"](3 * MiB)
        other = state["allocator"](MiB)
        assert (domain_of(mp.ptr), domain_of(other.ptr)) == ("arrays", "default")
        del mp
        gc.collect()
        assert d.release().bytes_released == 20 * MiB
        del other
        ccalloc.cupy.disable()
        assert not ccalloc.cupy.enabled()
        with pytest.raises(RuntimeError, match="enable"):
            ccalloc.cupy.domain("b")
    finally:
        gc.collect()
        plug.reset()


def test_the_domain_object_matches_allocators_domain(torch_alloc):
    """A framework domain is a ccalloc.Domain: the same methods and fields."""
    d = ccalloc.torch.domain("a")
    assert isinstance(d, ccalloc.Domain)
    for attr in ("name", "stats", "release", "destroy", "destroyed", "alloc", "free", "reserve"):
        assert hasattr(d, attr), attr
    with pytest.raises(TypeError, match="cannot be copied"):
        copy.copy(d)


def test_sleep_gives_the_device_the_domains_memory_and_wake_restores_the_tensors(torch_alloc):
    """A PlugDomain sleeps as a ccalloc.Domain: the device gets exactly its
    reserved bytes back while the other domain's tensors stay; the tensors'
    bytes come back at the same addresses; allocating into it while asleep
    raises AsleepError (through plug.alloc; PyTorch's cca_plug_alloc gets
    NULL)."""
    with ccalloc.torch.domain("model-a") as a:
        model_a = [Tensor(torch_alloc, n * MiB, fill=0xA0 + n) for n in (2, 7, 1)]
    model_b = [Tensor(torch_alloc, 3 * MiB, fill=0xB3)]
    ptrs = [t.ptr for t in model_a]
    reserved_a = a.stats()["reserved_bytes"]
    free_awake, total = ccalloc.torch.mem_info()
    r = a.sleep()
    assert (r.blocks, r.bytes_copied, r.bytes_unmapped) == (3, 10 * MiB, reserved_a)
    assert ccalloc.torch.mem_info() == (free_awake + reserved_a, total)
    assert (a.stats()["asleep"], a.stats()["host_bytes"]) == (1, 10 * MiB)
    assert model_b[0].filled_with(0xB3)
    with a:
        with pytest.raises(ccalloc.AsleepError):
            plug.alloc(MiB)
        assert plug.library().cca_plug_alloc(MiB, a.device, None) is None  # PyTorch's entry point: NULL
    r = a.wake()
    assert (r.blocks, r.bytes_copied, r.host_bytes) == (3, 10 * MiB, 10 * MiB)
    assert [t.ptr for t in model_a] == ptrs
    assert [t.filled_with(0xA0 + n) for t, n in zip(model_a, (2, 7, 1))] == [True, True, True]
    assert a.stats()["asleep"] == 0
    del model_a, model_b
    gc.collect()
    a.destroy()
