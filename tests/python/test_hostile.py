"""The package and the plug ABI attacked: lifetimes, values, threads,
configuration, snapshot output.

Each test here was written against a defect found by attacking a class of
inputs (the class is in the test's docstring), so it fails without its fix.
What could kill the process (a use-after-free, a read that never ends)
runs in a subprocess, so a regression fails the one test, not the suite.
"""
from __future__ import annotations

import contextlib
import gc
import inspect
import os
import subprocess
import sys

import pytest

import ccalloc
from ccalloc import plug

from conftest import PACKAGE_DIR, no_access_bytes


def _run(code: str, *args: str, env_extra=None, timeout: float = 60, limit_as: int = 0):
    """Run ``code`` in a fresh python with the package importable and the
    same library; ``limit_as``: an address-space limit (bytes) for it."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), CCALLOC_LIBRARY=ccalloc.library_path())
    env.update(env_extra or {})

    def limit():
        # ASan (a preloaded runtime, the sanitizer runs by hand) reserves
        # terabytes of shadow address space: no limit under it
        if limit_as and "asan" not in os.environ.get("LD_PRELOAD", ""):
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, preexec_fn=limit)


# ---- lifetime: an object that owns C memory is not copied --------------------

_COPY = r"""
import copy, pickle, sys
import ccalloc
from ccalloc import plug
a = ccalloc.Allocator("64M")
d = a.domain("m")
plug.configure(upstream="host:64M")
v = plug.allocator(0)
for name, obj in (("Allocator", a), ("Domain", d), ("view", v)):
    for how, fn in (("copy", copy.copy), ("deepcopy", copy.deepcopy), ("pickle", pickle.dumps)):
        try:
            fn(obj)
        except TypeError as e:
            print(name, how, "refused:", e)
        else:
            print(name, how, "COPIED")
d.destroy()
a.close()
print("done")
"""


def test_allocators_domains_and_views_refuse_copy_and_pickle():
    """Lifetime. copy.copy(Allocator) made a second owner of the same
    cca_allocator: closing one, then using or collecting the other, was a
    use-after-free (cca_destroy twice). deepcopy and pickle failed with
    errors about ctypes internals. Each of the three is refused with a
    TypeError that says why, for an Allocator, a Domain and a plug view."""
    r = _run(_COPY)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[-1] == "done", r.stdout
    refused = [line for line in lines[:-1] if "refused:" in line]
    assert len(refused) == 9, r.stdout
    assert all("cannot be copied or pickled" in line for line in refused), r.stdout


# ---- configuration: CCALLOC_LIBRARY naming something that is not a file -----

_LOAD = r"""
import ccalloc
try:
    ccalloc.Allocator("1M")
except ccalloc.LibraryNotFoundError as e:
    print("refused:", e)
"""


@pytest.mark.parametrize("kind", ["char-device", "fifo"])
def test_a_library_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    """Configuration. CCALLOC_LIBRARY=/dev/zero read the device to the end
    (every byte of it, looking for ASan's marker: MemoryError after eating
    the machine's memory), and a FIFO blocked the import for ever (its open
    waits for a writer). Either is refused at once, saying what it is."""
    if kind == "char-device":
        path = "/dev/zero"
        if not os.path.exists(path):
            pytest.skip("no /dev/zero")
    else:
        path = str(tmp_path / "libccalloc.so")
        os.mkfifo(path)
    try:
        r = _run(_LOAD, env_extra={"CCALLOC_LIBRARY": path}, timeout=20, limit_as=1 << 30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading CCALLOC_LIBRARY={path} ({kind}) hung")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "refused:" in r.stdout and f"{path}: not a regular file" in r.stdout, r.stdout


# ---- configuration and snapshot output: a locale with a decimal comma -------

_COMMA_LOCALES = ("de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8", "nl_NL.UTF-8",
                  "es_ES.UTF-8", "it_IT.UTF-8", "pt_BR.UTF-8")

_FIND_COMMA = r"""
import locale, sys
for name in sys.argv[1:]:
    try:
        locale.setlocale(locale.LC_ALL, name)
    except locale.Error:
        continue
    if locale.localeconv()["decimal_point"] == ",":
        print(name)
        break
"""


def _comma_locale(tmp_path):
    """(name, extra environment) of a locale whose decimal point is a comma:
    an installed one, else de_DE built with localedef into ``tmp_path``
    (LOCPATH); skips when neither can be had."""
    r = _run(_FIND_COMMA, *_COMMA_LOCALES)
    if r.stdout.strip():
        return r.stdout.strip(), {}
    locdir = tmp_path / "locales"
    locdir.mkdir()
    try:
        subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", str(locdir / "de_DE.UTF-8")],
                       capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        pass
    extra = {"LOCPATH": str(locdir)}
    r = _run(_FIND_COMMA, "de_DE.UTF-8", env_extra=extra)
    if r.stdout.strip():
        return r.stdout.strip(), extra
    pytest.skip("no locale with a decimal comma installed, and localedef could not build de_DE.UTF-8")


_IN_LOCALE = r"""
import json, locale, sys
locale.setlocale(locale.LC_ALL, sys.argv[1])   # as a program does with setlocale(LC_ALL, "")
assert locale.localeconv()["decimal_point"] == ","
import ccalloc
from ccalloc import plug
a = ccalloc.Allocator("64M", conf="greedy_fraction:0.5,expandable_ahead:0.125")
c = a.config()
print("config", c["greedy_fraction"], c["expandable_ahead"])
p = a.alloc("1.5M")
q = a.alloc(1000)
a.free(q)
snap = json.loads(json.dumps(a.snapshot()))
print("fragmentation", type(snap["stats"]["fragmentation"]).__name__, snap["stats"]["fragmentation"] > 0)
settings = a.snapshot_torch()["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"]
print("settings", [kv for kv in settings.split(",") if kv.startswith(("greedy_fraction", "expandable_ahead:"))])
a.free(p)
a.close()
plug.configure(upstream="host:64M")            # CCALLOC_CONF (set by the test) read at the lazy creation
print("plug", plug.allocator(0).config()["expandable_ahead"])
"""


def test_numbers_in_configs_and_snapshots_do_not_depend_on_the_locale(tmp_path):
    """Configuration and snapshot output. A program that sets a locale whose
    decimal point is a comma (``locale.setlocale(LC_ALL, "")`` under
    LANG=de_DE.UTF-8) changed what the C library's strtod and printf read and
    write: ``conf="greedy_fraction:0.5"`` was refused, a CCALLOC_CONF with a
    fraction was dropped at the plug's lazy creation, ``config()`` read
    "0,9", the JSON snapshot wrote ``"fragmentation":0,5`` (not JSON) and the
    PyTorch snapshot's config string ``greedy_fraction:0,9,...`` split into
    wrong keys. Numbers are read and written in the C locale's format
    whatever the program's locale is."""
    name, extra = _comma_locale(tmp_path)
    r = _run(_IN_LOCALE, name, env_extra=dict(extra, CCALLOC_CONF="expandable_ahead:0.25"))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        "config 0.5 0.125",
        "fragmentation float True",
        "settings ['greedy_fraction:0.5', 'expandable_ahead:0.125']",
        "plug 0.25",
    ], r.stdout + r.stderr


# ---- threads: close() while other threads are in calls ------------------------

_CLOSE_RACE = r"""
import threading, time
import ccalloc
seen = set()
for _ in range(40):
    a = ccalloc.Allocator("64M")
    d = a.domain("m")
    go = threading.Event()
    def hammer():
        go.wait()
        try:
            while True:
                a.free(a.alloc(1000)); a.stats(); a.trim(0); a.snapshot()
                d.free(d.alloc(10)); d.stats()
        except ccalloc.InvalidArgumentError as e:
            seen.add(e.message)
    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    go.set()
    time.sleep(0.005)
    try:
        a.close()
    except ccalloc.LiveBlocksError:
        pass    # a thread was between an alloc and its free: closed anyway
    for t in threads:
        t.join()
    assert a.closed and d.destroyed
print(sorted(seen))
"""


def test_close_while_other_threads_are_in_calls():
    """Threads and lifetime. close() destroyed the C allocator while other
    threads were inside calls on it (ctypes releases the GIL): a
    use-after-free (AddressSanitizer: heap-use-after-free in
    ccai_mutex_lock), in a Release build a hang on the freed lock. close()
    now waits for the calls in flight to leave, and every later call raises
    InvalidArgumentError ("the allocator is closed" / the domain's own)."""
    try:
        r = _run(_CLOSE_RACE, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("close() racing calls on other threads hung")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    seen = eval(r.stdout.splitlines()[-1])
    assert seen and all("the allocator is closed" in m for m in seen), seen


_CLOSE_IN_CALLBACK = r"""
import ctypes
import ccalloc
from ccalloc import plug
lib = plug.library()
LOG_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
a = ccalloc.Allocator("4M")
outcome = []
def sink(_user, line):
    try:
        a.close()                  # from inside a.alloc: the allocator's lock is held below
        outcome.append("closed")
    except ccalloc.Error as e:
        outcome.append(type(e).__name__ + ": " + e.message)
cb = LOG_T(sink)
setter = lib.dll.cca_set_log_callback
setter.restype, setter.argtypes = None, [LOG_T, ctypes.c_void_p]
setter(cb, None)
try:
    a.alloc("64M")                 # out of memory: logged (log_oom) from inside the call
except ccalloc.OutOfMemoryError:
    pass
setter(LOG_T(), None)
print(outcome)
print(a.closed, a.stats()["ooms"])
a.close()
print(a.closed)
"""


def test_close_from_inside_a_call_on_the_same_allocator_is_refused():
    """Lifetime. A log callback that closes the allocator whose call is
    logging (an OOM line comes from inside cca_alloc) would destroy it under
    the call; close() from a thread with a call in flight on that allocator
    raises InvalidArgumentError instead, and the allocator stays usable."""
    try:
        r = _run(_CLOSE_IN_CALLBACK, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("close() from a log callback hung")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("['InvalidArgumentError: close() from inside a call"), r.stdout
    assert lines[1] == "False 1" and lines[2] == "True", r.stdout


# A thread parked inside an allocation of `a` (the log callback of its OOM
# line: the allocator's own lock released), and a forked child waited for:
# its status, or -1 when it was still running after 10 s (killed).
_PARKED = r"""
import ctypes, os, signal, threading, time
import ccalloc
from ccalloc import plug
lib = plug.library()
LOG_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
inside, release = threading.Event(), threading.Event()
def sink(_user, line):
    inside.set()
    release.wait()
cb = LOG_T(sink)
setter = lib.dll.cca_set_log_callback
setter.restype, setter.argtypes = None, [LOG_T, ctypes.c_void_p]
def park(a):
    setter(cb, None)
    def parked():
        try:
            a.alloc("64M")
        except ccalloc.OutOfMemoryError:
            pass
    t = threading.Thread(target=parked)
    t.start()
    inside.wait()
    return t
def waited(pid):
    for _ in range(200):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1
"""

_FORK_IN_CALL = _PARKED + r"""
a = ccalloc.Allocator("4M")
t = park(a)
pid = os.fork()
if pid == 0:                       # the child: that thread does not exist here; nothing logs
    a.free(a.alloc(1000))
    a.close()
    os._exit(0 if a.closed else 1)
status = waited(pid)
release.set()
t.join()
setter(LOG_T(), None)
a.close()
print("child", status)
"""


def test_a_child_forked_while_a_thread_is_in_a_call_can_close():
    """Fork and lifetime. close() waits for the calls other threads have in
    flight; in a child forked while a thread was inside a call (here parked
    in the log callback of its OOM, the allocator's own lock already
    released), that thread does not exist and its call never returns, so
    the child's close() waited for ever. The child forgets the other
    threads' calls (and makes the guard's lock anew: a thread switched out
    while holding it leaves it held in the child). The child does not log:
    the parked thread holds the log's lock, and a fork during a call on an
    allocator of one's own is outside the C library's promise (ccalloc.h)."""
    r = _run(_FORK_IN_CALL, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[-1] == "child 0", r.stdout + r.stderr[-3000:]


_FORK_IN_PLUG = _PARKED + r"""
plug.configure(upstream="host:4M")
v = plug.allocator(0)
pd = plug.domain("pd")
t = park(v)
holder_in, holder_out = threading.Event(), threading.Event()
def holder():                      # a thread inside a `with pd:` entry, its lock held
    with pd._entered_lock:
        holder_in.set()
        holder_out.wait()
h = threading.Thread(target=holder)
h.start()
holder_in.wait()
pid = os.fork()
if pid == 0:                       # the child: neither thread exists here; nothing logs
    with pd:
        pass
    pd.destroy()
    v.close()
    os._exit(0 if v.closed and pd.destroyed else 1)
status = waited(pid)
holder_out.set()
release.set()
t.join()
h.join()
setter(LOG_T(), None)
pd.destroy()
v.close()
plug.reset()
print("child", status)
"""


def test_a_child_forked_during_plug_calls_can_use_its_views_and_domains():
    """Fork and the plug's objects. A plug view (``plug.allocator``) was not
    among the allocators whose calls in flight the child forgets, so a
    child forked while another thread was inside a call on it waited for
    ever in ``close()``; a ``PlugDomain``'s lock, held by a thread entering
    a ``with`` block at the fork, stayed held in the child, so ``with`` and
    ``destroy()`` hung there (docs/python.md, ``os.fork()``)."""
    r = _run(_FORK_IN_PLUG, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines()[-1] == "child 0", r.stdout + r.stderr[-3000:]


@pytest.mark.parametrize("device", [None, 0])
def test_vm_backing_refuses_what_is_not_a_backing(device):
    """``vm_backing``: None, "pages" or "whole_maps"; another str is an
    InvalidArgumentError (a ValueError) before any device is made, another type a
    TypeError, on the simulated device and on CUDA alike."""
    kind = {"capacity": "64M"} if device is None else {"device": device}
    for bad in ("", "whole-maps", "WHOLE_MAPS", "page", "pages ", "whole_maps\0", "1"):
        with pytest.raises(ccalloc.InvalidArgumentError, match="vm_backing"):
            ccalloc.Allocator(**kind, vm_backing=bad)
    for bad in (0, 1, True, b"pages", 1.0, ["pages"]):
        with pytest.raises(TypeError, match="vm_backing"):
            ccalloc.Allocator(**kind, vm_backing=bad)


# ---- signals: a handler's exception (KeyboardInterrupt) inside a call --------
#
# CPython runs a Python signal handler on the main thread at the next point
# its loop checks: a Python function's entry, a C function's return (and a
# loop's back edge, a blocking wait). An exception the handler raises
# (SIGINT's KeyboardInterrupt) comes out of whatever was running there. A
# profile hook sees the same points ("call", "c_return") and may raise at
# any one of them: _interrupted raises KeyboardInterrupt at the k-th point
# inside the package, so a test can try every point of a call in turn.

# What the subprocesses below share, and this process too (_interrupted):
# interrupted(op, k) (at_point: any act there), the address space of no
# access mapped (a simulated device), a loop over the points of a call.
_SUBPROCESS_HELPERS = r"""
import gc, os, sys
import ccalloc
PACKAGE = os.path.dirname(ccalloc.__file__)

def at_point(op, k, act):
    # op(), with act() run at its k-th point inside the package where a
    # signal handler can run (a function's entry, a C function's return)
    seen = 0
    def hook(frame, event, arg):
        nonlocal seen
        if event in ("call", "c_return") and frame.f_code.co_filename.startswith(PACKAGE):
            seen += 1
            if seen == k:
                sys.setprofile(None)
                act()
    sys.setprofile(hook)
    try:
        return op()
    finally:
        sys.setprofile(None)

def interrupted(op, k):
    # (True, op()), or (False, None) when KeyboardInterrupt was raised at
    # its k-th point
    def interrupt():
        raise KeyboardInterrupt
    try:
        return True, at_point(op, k, interrupt)
    except KeyboardInterrupt:
        return False, None

def twice(op, k, j):
    # (whether op() completed, how many KeyboardInterrupts were raised):
    # one at op's k-th point, a second at the j-th point after it, as two
    # signals in a row. CPython drops a profile hook that raises, so a
    # trace function puts it back at the next function entry: the second
    # point is counted from there
    state = {"seen": 0, "target": k, "fired": 0}
    def hook(frame, event, arg):
        if event in ("call", "c_return") and frame.f_code.co_filename.startswith(PACKAGE):
            state["seen"] += 1
            if state["seen"] == state["target"]:
                state["fired"] += 1
                state["seen"], state["target"] = 0, (j if state["fired"] == 1 else 0)
                raise KeyboardInterrupt
    def rearm(frame, event, arg):
        if state["fired"] == 1 and sys.getprofile() is None:
            sys.setprofile(hook)
    sys.settrace(rearm)
    sys.setprofile(hook)
    try:
        op()
        return True, state["fired"]
    except KeyboardInterrupt:
        return False, state["fired"]
    finally:
        sys.setprofile(None)
        sys.settrace(None)

""" + inspect.getsource(no_access_bytes) + r"""
reserved = no_access_bytes

def closed_leaving_nothing(what, make, attempt):
    # for k = 1, 2, ...: an allocator from make(), attempt(a, k) (True
    # while k was a point of it), a.close() again; exits 1 naming the
    # point after which it is not closed or its simulated device (1 GiB
    # and more) is left behind; the number of points tried
    for k in range(1, 1000):
        before = reserved()
        a = make()
        print(what, "at point", k, flush=True)
        more = attempt(a, k)
        a.close()  # the program's next try
        if not a.closed:
            print(f"{what}: point {k}: not closed")
            sys.exit(1)
        a = None
        gc.collect()
        if reserved() - before >= 1 << 29:
            print(f"{what}: point {k}: its simulated device was left behind")
            sys.exit(1)
        if not more:
            return k
    raise AssertionError(f"{what}: never completed")

"""

_HELPERS: dict = {}
exec(_SUBPROCESS_HELPERS, _HELPERS)  # defines functions only
_interrupted = _HELPERS["interrupted"]
_twice = _HELPERS["twice"]


def _every_point(make, call):
    """For k = 1, 2, ...: a fresh allocator from ``make()``, ``call(a)``
    interrupted at its k-th point, until a k the call outlives. Yields (k,
    allocator, whether the call completed); the caller closes it."""
    for k in range(1, 1000):
        a = make()
        done, _ = _interrupted(lambda: call(a), k)
        yield k, a, done
        if done:
            return
    raise AssertionError("the call never completed")


_CALLS = {
    "alloc": lambda a: a.alloc(4096),
    "free": lambda a: a.free(a._kept),
    "stats": lambda a: a.stats(),
    "empty_cache": lambda a: a.empty_cache(),
    "snapshot": lambda a: a.snapshot(),
    "domain": lambda a: a.domain("m"),
    "sleep": lambda a: a.sleep(),
}


def _allocator_with_a_block():
    a = ccalloc.Allocator("64M")
    a._kept = a.alloc(4096)
    return a


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_a_call_a_signal_handler_interrupts_can_still_be_closed(name):
    """Signals. A KeyboardInterrupt raised as the guard of a call (_c)
    left the lock it counted the call under, before the try that uncounts
    it, left the call counted in flight for ever: close() on that thread
    was then refused ("from inside a call on this allocator"), on any other
    it waited for ever. Seen with a real handler too: alloc/free in a loop
    under a 100 us ITIMER_REAL whose handler raises, 2 runs of 9 left a
    count. Every point of each call is tried: close() must then work."""
    points = 0
    for k, a, done in _every_point(_allocator_with_a_block, _CALLS[name]):
        points += 1
        try:
            a.close()
        except ccalloc.LiveBlocksError:
            pass  # the block kept, or one the interrupted call made: closed all the same
        except ccalloc.Error as e:
            pytest.fail(f"{name} interrupted at point {k}: close() refused: {e}")
        assert a.closed
    assert points > 3, f"{name}: only {points} points tried"


_MAKERS = {
    "alloc": (lambda a: a.alloc(4096), lambda a: a.stats()["active_blocks"]),
    "domain": (lambda a: a.domain("m"), lambda a: len(a.snapshot()["domains"]) - 1),  # less the default
}


@pytest.mark.parametrize("name", sorted(_MAKERS))
def test_a_call_a_signal_handler_interrupts_makes_nothing_it_does_not_return(name):
    """Signals. alloc and domain, interrupted by a handler's exception
    after the C call had made the block (the domain) but before it was
    returned, lost it: a block live for ever that no one can free (its
    address never reached the caller), a domain no one can destroy. At
    every point of each call: made and returned, or interrupted and made
    nothing."""
    make, count = _MAKERS[name]
    for k, a, done in _every_point(lambda: ccalloc.Allocator("64M"), make):
        made = count(a)
        try:
            a.close()
        except ccalloc.LiveBlocksError:
            pass  # the block made
        assert made == int(done), f"{name} interrupted at point {k}: {made} made, {int(done)} returned"


def test_an_interrupted_plug_alloc_makes_nothing_it_does_not_return(host_plug):
    """Signals. ccalloc.plug.alloc, the frameworks' entry point, interrupted
    by a handler's exception after cca_alloc made the block but before the
    address was returned, lost it: a block live for ever that no one can
    free (plug.reset() then refused with LiveBlocksError). At every point,
    in the default domain and in a domain of the plug's: made and returned,
    or interrupted and made nothing."""
    for in_domain in (False, True):
        points = 0
        for k in range(1, 1000):
            d = plug.domain("m") if in_domain else None
            with d if d is not None else contextlib.nullcontext():
                done, ptr = _interrupted(lambda: plug.alloc(4096), k)
            points += 1
            live = plug.stats()["active_blocks"]
            assert live == int(done), f"plug.alloc interrupted at point {k}: {live} made, {int(done)} returned"
            if done:
                plug.free(ptr, 4096)
            if d is not None:
                d.destroy()
            if done:
                break
        assert points > 3, f"only {points} points tried"




@pytest.mark.parametrize("name", sorted(_MAKERS))
def test_two_signals_in_a_row_leave_nothing_made(name):
    """Signals. alloc and domain, interrupted after the C call had made
    the block (the domain), undo it (_making) before the exception goes on;
    a second handler exception inside that undo, before its C call ran,
    left the block live for ever (the domain for good), as one signal
    once did. At every point k of the call and every point j after it:
    made and returned, or interrupted and made nothing."""
    make, count = _MAKERS[name]
    pairs = 0
    for k in range(1, 1000):
        for j in range(1, 1000):
            gc.collect()  # no finalizer of an earlier round runs inside the call, counting its points
            a = ccalloc.Allocator("64M")
            done, fired = _twice(lambda: make(a), k, j)
            made = count(a)
            try:
                a.close()
            except ccalloc.LiveBlocksError:
                pass  # the block made
            assert made == int(done), f"{name} interrupted at point {k}, then {j} after: {made} made, " \
                                      f"{int(done)} returned"
            pairs += fired == 2
            if fired < 2:
                break
        if done:
            break
    assert pairs > 5, f"{name}: only {pairs} pairs of points tried"


@pytest.mark.parametrize("name", sorted(_MAKERS))
def test_a_handler_that_closes_the_allocator_then_raises_is_what_comes_out(name):
    """Signals. A SIGTERM handler's clean-up, close() then SystemExit, run
    at each point of alloc and domain(): where the block (the domain) was
    made before it, the undo finds the allocator closed (what it made went
    with it) and gives up at once. The exception that comes out is the
    handler's SystemExit, never the undo's "the allocator is closed", and
    an allocator the handler could not close (the call was in C) has
    nothing left in it."""
    make, count = _MAKERS[name]
    at_point = _HELPERS["at_point"]
    closed_by_handler = 0
    for k in range(1, 1000):
        gc.collect()
        a = ccalloc.Allocator("64M")
        ran = []

        def handler():
            ran.append(k)
            try:
                a.close()
            except ccalloc.Error:
                pass  # refused (the call is in C), or closed with a block live
            raise SystemExit("terminated")

        try:
            at_point(lambda: make(a), k, handler)
        except SystemExit as e:
            assert ran and str(e) == "terminated", f"{name}: point {k}"
        else:
            assert not ran, f"{name}: point {k}: the handler's exception was lost"
        if a.closed:
            closed_by_handler += 1
        else:
            assert count(a) == int(not ran), f"{name}: point {k}: {count(a)} made"
            try:
                a.close()
            except ccalloc.LiveBlocksError:
                assert not ran  # the block returned, the loop's last round
        if not ran:
            break
    assert closed_by_handler > 3, f"{name}: the handler closed the allocator at {closed_by_handler} points"


def _domain_count(a):
    return len(a.snapshot()["domains"]) - 1  # less the default


@pytest.mark.parametrize("kind", ["allocator", "plug"])
def test_an_interrupted_destroy_says_whether_the_domain_went(kind, host_plug):
    """Signals. Domain.destroy interrupted by a handler's exception after
    cca_domain_destroy had returned kept its handle: `destroyed` stayed
    False for a domain C no longer had (every call then refused as
    "invalid domain", and PlugDomain's with block tried to enter it). At
    every point: `destroyed` is True exactly when the domain is gone, and
    a domain that stayed is destroyed by the next try."""
    points = 0
    for k in range(1, 1000):
        if kind == "plug":
            a, d = plug.allocator(0), plug.domain("m")
        else:
            a = ccalloc.Allocator("64M")
            d = a.domain("m")
        done, _ = _interrupted(d.destroy, k)
        points += 1
        left = _domain_count(a)
        assert d.destroyed == (left == 0), f"destroy interrupted at point {k}: destroyed {d.destroyed}, " \
                                           f"{left} domain left"
        if left:
            d.destroy()
            assert d.destroyed and _domain_count(a) == 0
        if kind != "plug":
            a.close()
        if done:
            break
    assert points > 10, f"only {points} points tried"

_INIT_INTERRUPTED = _SUBPROCESS_HELPERS + r"""
TRACE = os.environ["CCALLOC_TRACE"]

def sections():
    # CCALLOC_TRACE starts a section when the first allocator alive opens it
    try:
        with open(TRACE) as f:
            return sum(line == "seq,op,id,size,stream,domain,name\n" for line in f)
    except FileNotFoundError:
        return 0

for k in range(1, 1000):
    before = reserved()
    done, a = interrupted(lambda: ccalloc.Allocator("1G"), k)
    if done:
        a.close()
    a = None
    gc.collect()
    if reserved() - before >= 1 << 29:
        print(f"point {k}: its simulated device was left behind")
        sys.exit(1)
    n = sections()
    ccalloc.Allocator("1M").close()
    if sections() != n + 1:
        print(f"point {k}: its allocator was left alive")
        sys.exit(1)
    if done:
        print("points", k)
        sys.exit(0)
"""


def test_an_interrupted_allocator_constructor_leaves_nothing(tmp_path):
    """Signals. Allocator() interrupted by a handler's exception just after
    the C call made the device, before the try that destroys it on failure,
    left the device behind (1 GiB of address space here); interrupted just
    after cca_create, it destroyed the device under an allocator left alive
    (its upstream freed: cca_upstream_destroy's contract is broken, a later
    fork's handler would touch it). At every point: nothing left. An
    allocator alive is seen through CCALLOC_TRACE: a new section opens only
    when none is."""
    r = _run(_INIT_INTERRUPTED, env_extra={"CCALLOC_TRACE": str(tmp_path / "t.csv")}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(r.stdout.split()[-1]) > 5, r.stdout


_CLOSE_INTERRUPTED = _SUBPROCESS_HELPERS + r"""
print("points", closed_leaving_nothing("close", lambda: ccalloc.Allocator("1G"),
                                       lambda a, k: not interrupted(a.close, k)[0]))
"""


def test_an_interrupted_close_leaves_nothing():
    """Signals. close() interrupted by a handler's exception just after
    cca_destroy returned (at the entry of the Python call that reads the
    error message: a C function's return, where handlers run) left the
    allocator's device behind: the allocator was destroyed and said
    closed, so nothing (a second close(), the finalizer) ever destroyed
    its device (1 GiB of address space here). At every point, close()
    then a second close(): closed, nothing left."""
    r = _run(_CLOSE_INTERRUPTED, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert int(r.stdout.split()[-1]) > 3, r.stdout


_HANDLER_CLOSES = _SUBPROCESS_HELPERS + r"""
from ccalloc import plug

def with_handler(op, k, handler):
    # handler() run at the k-th point of op(), as a signal handler would
    # there; False once op() has fewer points
    ran = []
    def act():
        ran.append(k)
        try:
            handler()
        except ccalloc.InvalidArgumentError:
            pass  # refused: from inside a call on this allocator
    try:
        at_point(op, k, act)
    except ccalloc.InvalidArgumentError:
        pass  # the call's own: closed
    return bool(ran)

def closed():
    a = ccalloc.Allocator("64M")
    a.close()
    return a

plug.configure(upstream="host:64M")
SCENARIOS = (
    ("close", lambda: ccalloc.Allocator("1G"), lambda a: a.close()),
    ("alloc on a closed allocator", closed, lambda a: a.alloc(4096)),
    ("stats of a plug view", lambda: plug.allocator(0), lambda a: a.stats()),
)
for name, make, call in SCENARIOS:
    closed_leaving_nothing(name, make, lambda a, k: with_handler(lambda: call(a), k, a.close))
print("done")
"""


def test_a_signal_handler_that_closes_the_allocator_never_hangs():
    """Signals. A handler that closes the allocator (a SIGTERM handler's
    clean-up) hung the process for ever when it ran while the interrupted
    code held the allocator's guard lock (not reentrant): inside close()
    (the return of get_ident or of dict.values), inside a call on a closed
    allocator (the entry of _closed_error), inside any call on a plug view
    (the entry of _live_handle and its validity check). At every point of
    each: it returns (the handler's close done or refused), the allocator
    is closed after, nothing is left."""
    try:
        r = _run(_HANDLER_CLOSES, timeout=30)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"hangs: {out.splitlines()[-1] if out else 'at once'}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == "done", r.stdout[-2000:]
    tried = r.stdout.count(" at point ")
    assert tried > 15, r.stdout


# ---- the system refusing resources: the readers need no file ------------------

_READERS_WITHOUT_FILES = r"""
import os, resource, signal
import ccalloc
a = ccalloc.Allocator("64M")
blocks = [a.alloc(1000 * (i + 1)) for i in range(100)]    # a snapshot of some KiB
READERS = (("config", a.config), ("snapshot", a.snapshot), ("snapshot_torch", a.snapshot_torch))
want = {name: read() for name, read in READERS}

def each(limit):
    for name, read in READERS:
        try:
            print(limit, name, "same" if read() == want[name] else "DIFFERENT")
        except Exception as e:
            print(limit, name, type(e).__name__, e)

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)               # EFBIG, not the signal's kill
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (512, hard))
each("fsize")
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
each("nofile")
for fd in held:
    os.close(fd)
for p in blocks:
    a.free(p)
a.close()
print("done")
"""


def test_readers_return_their_value_without_a_file():
    """The system refusing resources. ``config()``, ``snapshot()`` and
    ``snapshot_torch()`` return a value, yet each went through a temporary
    file: under a file-size limit (RLIMIT_FSIZE) the snapshots raised
    WriteError ("write failed"), and with every descriptor taken (EMFILE)
    all three raised OSError naming a temporary file the caller never asked
    for (FileNotFoundError, "No usable temporary directory found", when it
    was the process's first). Each is written into host memory, with no
    descriptor and no disk, and returns the same value it returns without
    a limit."""
    r = _run(_READERS_WITHOUT_FILES)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines() == [f"{limit} {name} same" for limit in ("fsize", "nofile")
                                     for name in ("config", "snapshot", "snapshot_torch")] + ["done"], r.stdout


# ---- paths: what names a file, and what does not ------------------------------

class _Index:
    """An integer in disguise (numpy integers): ``operator.index`` takes it."""

    def __index__(self):
        return 3


_NOT_PATHS = [pytest.param(lambda fd: fd, id="an-int-a-descriptor"), pytest.param(lambda fd: 1.5, id="float"), pytest.param(lambda fd: _Index(), id="index"),
              pytest.param(lambda fd: ["x"], id="list")]


@pytest.mark.parametrize("bad", _NOT_PATHS)
@pytest.mark.parametrize("entry", ["allocator", "plug", "torch"])
def test_a_snapshot_path_that_is_not_a_path_is_refused_before_anything(tmp_path, host_plug, entry, bad):
    """Values of another type. ``snapshot_torch(path)`` handed ``path`` to
    ``open()``, which takes an int as a file descriptor: ``path=fd`` wrote
    the pickle into that descriptor and closed it (``path=True``: the
    process's standard output, closed), with no error. A path is a str,
    bytes or an ``os.PathLike``; anything else is a TypeError naming
    ``path``, before anything is written or closed. (A bool, which would
    close this process's stdin or stdout: the next test, in a subprocess.)"""
    import ccalloc.torch as ctorch

    other = tmp_path / "other"
    fd = os.open(other, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        value = bad(fd)
        with ccalloc.Allocator("8M") as a:
            call = {"allocator": lambda: a.snapshot_torch(value), "plug": lambda: plug.snapshot_torch(value),
                    "torch": lambda: ctorch.snapshot_torch(value)}[entry]
            with pytest.raises(TypeError, match=r"^path is a str, bytes or os\.PathLike, not "):
                call()
        os.fstat(fd)  # still open
        assert os.fstat(fd).st_size == 0, "nothing was written through the descriptor"
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


_SNAPSHOT_TO_A_BOOL = r"""
import sys
import ccalloc
with ccalloc.Allocator("8M") as a:
    for value in (True, False):
        try:
            a.snapshot_torch(value)
        except TypeError as e:
            print(value, e, flush=True)
        else:
            print(value, "WRITTEN", flush=True)
print("stdout still open", flush=True)
"""


def test_a_snapshot_path_that_is_a_bool_closes_no_standard_descriptor():
    """``snapshot_torch(True)`` wrote the pickle to descriptor 1 and closed
    it: the program's standard output was gone (``False``: standard input).
    In a subprocess, whose stdout is read back."""
    r = _run(_SNAPSHOT_TO_A_BOOL)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [f"{v} path is a str, bytes or os.PathLike, not bool" for v in (True, False)] + [
        "stdout still open"], r.stdout


@pytest.mark.parametrize("path", ["a\0b", b"a\0b"])
def test_a_snapshot_path_with_a_nul_is_refused_naming_it(tmp_path, path):
    """A path with a NUL (where the system's call would end it) is a
    ValueError naming ``path``, as the other bad strings of the package name
    their argument; open()'s own "embedded null byte" named nothing."""
    with ccalloc.Allocator("8M") as a:
        with pytest.raises(ValueError, match=r"^path .* contains a NUL character"):
            a.snapshot_torch(path)


def test_a_snapshot_path_may_be_bytes_or_path_like(tmp_path):
    """The other side of the refusals above: what does name a file (a str,
    bytes, an ``os.PathLike``) is still written; a check too broad fails here."""
    import pathlib

    with ccalloc.Allocator("8M") as a:
        for name, path in (("str", str(tmp_path / "s.pickle")), ("bytes", os.fsencode(tmp_path / "b.pickle")),
                           ("path", pathlib.Path(tmp_path / "p.pickle"))):
            snap = a.snapshot_torch(path)
            assert (tmp_path / f"{name[0]}.pickle").read_bytes()[:1] == b"\x80", name
            assert "segments" in snap


_LOAD_PATH_LIKE = r"""
import pathlib, sys
import ccalloc
from ccalloc import _lib
lib = _lib.load(pathlib.Path(sys.argv[1]))
print("loaded", lib.path)
with ccalloc.Allocator("8M", library=pathlib.Path(sys.argv[1])) as a:
    p = a.alloc(512)
    print("allocator", p > 0)
    a.free(p)
"""


def test_a_library_path_may_be_path_like_from_the_first_load():
    """Values of another type. ``library=pathlib.Path(...)`` worked once the
    library was loaded (os.path.realpath takes it) but not for the first
    load of the process, which tested ``os.sep in path``: TypeError
    "argument of type 'PosixPath' is not iterable". In a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "CCALLOC_LIBRARY"}
    env["PYTHONPATH"] = str(PACKAGE_DIR)
    good = ccalloc.library_path()
    r = subprocess.run([sys.executable, "-c", _LOAD_PATH_LIKE, good], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [f"loaded {good}", "allocator True"], r.stdout


_LOAD_NOT_A_PATH = r"""
import sys
import ccalloc
from ccalloc import _lib
for value in (5, True, 1.5, ["x"], None.__class__):
    for how, call in (("load", lambda: _lib.load(value)), ("Allocator", lambda: ccalloc.Allocator("8M", library=value))):
        try:
            call()
        except TypeError as e:
            print(how, "TypeError", e)
        except Exception as e:
            print(how, type(e).__name__, e)
        else:
            print(how, "LOADED")
for value in ("a\0b", sys.argv[1] + "\0"):
    try:
        _lib.load(value)
    except ccalloc.LibraryNotFoundError as e:
        print("nul", "argument" in str(e) and "contains a NUL character" in str(e))
"""


@pytest.mark.parametrize("loaded", [False, True])
def test_a_library_argument_that_is_not_a_path_is_refused_naming_it(loaded):
    """Values of another type. ``library=5`` raised TypeError "argument of
    type 'int' is not iterable" before the first load and "expected str,
    bytes or os.PathLike object, not int" after it; a NUL in it a ValueError
    ("embedded null byte"). Neither named the argument. A non-path is a
    TypeError naming ``library``; a NUL is refused as the argument's other
    bad values are (LibraryNotFoundError, naming the argument), loaded or not."""
    code = _LOAD_NOT_A_PATH if not loaded else "import ccalloc; ccalloc.Allocator('1M').close()\n" + _LOAD_NOT_A_PATH
    env = {k: v for k, v in os.environ.items() if k != "CCALLOC_LIBRARY"} if not loaded else None
    r = _run(code, ccalloc.library_path()) if loaded else subprocess.run(
        [sys.executable, "-c", code, ccalloc.library_path()], capture_output=True, text=True,
        env=dict(env, PYTHONPATH=str(PACKAGE_DIR)), timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    types = ["int", "bool", "float", "list", "type"]
    assert lines[:10] == [f"{how} TypeError library is a str, bytes or os.PathLike, not {t}"
                          for t in types for how in ("load", "Allocator")], r.stdout
    assert lines[10:] == ["nul True", "nul True"], r.stdout


_SNAPSHOT_TO_A_FIFO = r"""
import os, sys, threading
import ccalloc
fifo = sys.argv[1]
with ccalloc.Allocator("8M") as a:
    try:
        a.snapshot_torch(fifo)
    except OSError as e:
        print("refused:", type(e).__name__, e.errno, e.strerror, e.filename == fifo, flush=True)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    while True:  # the reader's open is in progress once a writer's open succeeds
        try:
            snap = a.snapshot_torch(fifo)
            break
        except OSError:
            pass
    reader.join()
    print("read by a reader:", got[0][:1] == b"\x80", "segments" in snap, flush=True)
"""


def test_a_snapshot_path_that_is_a_fifo_nobody_reads_is_refused_not_waited_for(tmp_path):
    """Files that are not files. ``snapshot_torch(path)`` opened ``path``
    with ``open()``, which waits for a FIFO's reader: with none, for ever
    (``ccrun --snapshot`` and ``CCALLOC_TRACE`` refuse such a FIFO at once,
    common/ccai_open.h). It is refused at once with OSError (ENXIO) naming
    the path; a FIFO with a reader is written as before. In a subprocess
    under a timeout, so that a hang fails this test alone."""
    import errno

    fifo = tmp_path / "snapshot.pickle"
    os.mkfifo(fifo)
    try:
        r = _run(_SNAPSHOT_TO_A_FIFO, str(fifo), timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("snapshot_torch into a FIFO nobody reads waited for a reader")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        f"refused: OSError {errno.ENXIO} a FIFO nobody reads (refused rather than waited for) True",
        "read by a reader: True True"], r.stdout


# ---- sizes: a refused size names its parameter --------------------------------

_SIZE_PARAMETERS = {
    # parameter -> a call taking the value there (on a 64M simulated device)
    "capacity": lambda a, v: ccalloc.Allocator(capacity=v),
    "vm_granularity": lambda a, v: ccalloc.Allocator("64M", vm_granularity=v),
    "size": lambda a, v: a.alloc(v),
    "keep": lambda a, v: a.trim(v),
    "nbytes": lambda a, v: a.domain("sized").reserve(v),
    "plug size": lambda a, v: plug.alloc(v),
    "plug free size": lambda a, v: plug.free(0, v),
}


@pytest.mark.parametrize("bad", ["", "-1", "+5", " 5", "5 ", "5x", "0x10", "1e3", "nan", "inf", "16777216T",
                                 "17179869184G", "18446744073709551616", 1 << 64, (1 << 64) + 1, -1, 1.5,
                                 float("nan"), True])
@pytest.mark.parametrize("parameter", sorted(_SIZE_PARAMETERS))
def test_a_refused_size_names_its_parameter_and_value(host_plug, parameter, bad):
    """Class: every size argument, every hostile size. The message said
    "bad size '5x' (expected ...)" or "size 18446744073709551616 out of
    range" whichever parameter it was: Allocator(capacity=..., vm_granularity=...)
    has two sizes, and trim's is keep. It now names the parameter (the
    plug's, "size") and the value as given; the error's type is unchanged
    (a str or an int out of range: InvalidArgumentError; another type:
    TypeError)."""
    name = parameter.split()[-1]
    a = ccalloc.Allocator("64M")
    try:
        with pytest.raises((ccalloc.InvalidArgumentError, TypeError)) as e:
            _SIZE_PARAMETERS[parameter](a, bad)
        text = e.value.message if isinstance(e.value, ccalloc.Error) else str(e.value)
        assert text.startswith(f"{name} "), text
        if not isinstance(bad, (bool, float)):
            assert repr(bad) in text or str(bad) in text, text
        assert isinstance(e.value, TypeError) == isinstance(bad, (bool, float))
    finally:
        a.close()
