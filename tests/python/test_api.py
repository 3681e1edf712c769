"""ccalloc.Allocator end to end on the simulated device, with exact figures.

The allocators run under the default configuration (expandable segments over
whole maps: the simulated device has the vm ops) unless a test says
otherwise; the tests whose figures are those of classic segments say
expandable:0 (the `classic` fixture), and most of those have an expandable
twin.

The expected numbers come from the documented rules (docs/allocator.md, "The
life of one cca_alloc"): requests round up to 512 bytes; with classic
segments, up to small_max (1M) they use 2M small segments, below large_min
(10M) 20M medium segments, and larger ones a segment of their own rounded up
to 2M, unless a free block in a medium segment is the best fit; a remainder
is split off when it is at least 512 bytes (small pool) or larger than
small_max (medium, large). With expandable segments ("Pages, not segments")
small requests take one address range and every other request one more, each
as large as the device, its pages (2M) mapped as it grows from its start: at
least 20M per map call (small: 2M), the request's pages plus mapped / 16
ahead; a reservation and each map count as an upstream alloc, each unmap and
range release as an upstream free.
"""
from __future__ import annotations

import copy
import ctypes
import os
import pickle
import re
import tempfile

import pytest

import ccalloc
from ccalloc import _errors, _lib, plug

from conftest import HEADER, MiB, fork_children, no_access_bytes

# ---- the Python mirror of ccalloc.h ---------------------------------------------


def _header() -> str:
    return HEADER.read_text()


_CTYPES = {
    "size_t": ctypes.c_size_t,
    "uint64_t": ctypes.c_uint64,
    "double": ctypes.c_double,
    "int": ctypes.c_int,
    "cca_policy": ctypes.c_int,  # an enum
}


def _c_fields(struct: str):
    """(name, size in bytes) of every field of `typedef struct <struct> {...}` in the header."""
    m = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (struct, struct), _header(), re.S)
    assert m, f"struct {struct} not found in ccalloc.h"
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    fields = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m2 = re.fullmatch(r"(?:const )?([\w ]+?)\s*(\*?)\s*(\w+)(\[[^\]]+\])?", decl)
        assert m2, f"cannot read declaration '{decl}' in {struct}"
        ctype, star, name, array = m2.groups()
        if star or ctype in ("cca_stream",):
            size = ctypes.sizeof(ctypes.c_void_p)
        elif array:
            assert ctype == "char" and "CCA_DOMAIN_NAME_MAX + 1" in array
            size = _lib.DOMAIN_NAME_MAX + 1
        else:
            size = ctypes.sizeof(_CTYPES[ctype])
        fields.append((name, size))
    return fields


@pytest.mark.parametrize("struct,mirror", [
    ("cca_stats", _lib.Stats),
    ("cca_upstream_stats", _lib.UpstreamStats),
    ("cca_release_report", _lib.ReleaseReport),
    ("cca_live_block", _lib.LiveBlock),
    ("cca_domain_report", _lib.DomainReport),
    ("cca_domain_stats", _lib.DomainStats),
    ("cca_sleep_report", _lib.SleepReport),
    ("cca_host_options", _lib.HostOptions),
    ("cca_cuda_options", _lib.CudaOptions),
])
def test_structures_mirror_the_header(struct, mirror):
    py = [(name, ctypes.sizeof(t)) for name, t in mirror._fields_]
    assert py == _c_fields(struct)


def test_config_buffer_is_larger_than_cca_config():
    fields = _c_fields("cca_config")
    assert sum(size for _, size in fields) * 2 < _lib.CONFIG_BYTES


def test_status_codes_mirror_the_header():
    body = re.search(r"typedef enum cca_status \{(.*?)\} cca_status;", _header(), re.S).group(1)
    names = re.findall(r"\b(CCA_(?:OK|ERR_\w+))\b", body)
    for value, name in enumerate(names):
        assert getattr(_errors, name[len("CCA_"):]) == value, name
    assert len(names) == 12


def test_every_declared_function_is_in_the_header():
    header = _header()
    for name in _lib._PROTOTYPES:
        assert re.search(r"\b%s\(" % name, header), name


def test_version_matches_the_header():
    v = [re.search(r"#define CCA_VERSION_%s (\d+)" % k, _header()).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert ccalloc.__version__ == ".".join(v)


# ---- allocation and the exact counters --------------------------------------------


@pytest.fixture
def alloc():
    """An allocator of the default configuration on a 256M device."""
    with ccalloc.Allocator(capacity="256M", conf="") as a:
        yield a


@pytest.fixture
def classic():
    """The same with classic segments (expandable:0)."""
    with ccalloc.Allocator(capacity="256M", conf="expandable:0") as a:
        yield a


def test_alloc_free_and_exact_stats_classic(classic):
    a = classic
    sizes = [1000, 3 * MiB, MiB + 1, 12 * MiB, 30 * MiB]
    ptrs = [a.alloc(n) for n in sizes]
    assert all(p % 256 == 0 for p in ptrs)
    assert [a.block_size(p) for p in ptrs] == [1024, 3 * MiB, MiB + 512, 12 * MiB, 30 * MiB]
    s = a.stats()
    # small: one 2M segment, 1024 live and the rest split off;
    # medium: one 20M segment holding 3M, 1M+512 and (best fit) the 12M
    # request, 4M-512 left; large: 30M alone
    assert s["allocated_bytes"] == 46 * MiB + 1536
    assert s["requested_bytes"] == 46 * MiB + 1001
    assert s["reserved_bytes"] == 52 * MiB
    assert s["segments"] == 3
    assert s["upstream_allocs"] == 3
    assert s["active_blocks"] == 5
    assert s["cached_blocks"] == 2
    assert s["cached_bytes"] == 6 * MiB - 1536
    assert s["largest_free_block"] == 4 * MiB - 512
    assert s["splits"] == 4
    assert s["alloc_calls"] == 5
    assert s["fragmentation"] == pytest.approx(1 - (4 * MiB - 512) / (6 * MiB - 1536), rel=1e-12)
    for p in ptrs:
        a.free(p)
    s = a.stats()
    assert s["allocated_bytes"] == 0 and s["requested_bytes"] == 0
    assert s["allocated_bytes_peak"] == 46 * MiB + 1536
    assert s["free_calls"] == 5
    assert s["merges"] == 4  # small 1; medium: 3M+1M, then +12M and +tail
    assert s["cached_blocks"] == 3  # one free block per segment
    assert s["reserved_bytes"] == 52 * MiB
    a.check()
    assert set(s) == {name for name, _ in _lib.Stats._fields_}


def test_alloc_free_and_exact_stats_expandable(alloc):
    """The same requests under the default: expandable segments over whole
    maps, one small range and one large range of 256M each."""
    a = alloc
    sizes = [1000, 3 * MiB, MiB + 1, 12 * MiB, 30 * MiB]
    ptrs = [a.alloc(n) for n in sizes]
    assert all(p % 256 == 0 for p in ptrs)
    assert [a.block_size(p) for p in ptrs] == [1024, 3 * MiB, MiB + 512, 12 * MiB, 30 * MiB]
    s = a.stats()
    assert (s["page_size"], s["vm_backing"]) == (2 * MiB, 0)  # CCA_VM_WHOLE_MAPS
    # small: 2M mapped (a small map is at most small_segment), 1024 live;
    # large: 20M mapped for the 3M request, which the 1M+512 and 12M ones
    # fit in (16M+512 used); the 30M one maps 28M more, to the page past
    # 46M+512 + 20M/16 ahead: 48M
    assert s["allocated_bytes"] == 46 * MiB + 1536
    assert s["requested_bytes"] == 46 * MiB + 1001
    assert s["reserved_bytes"] == s["mapped_bytes"] == 50 * MiB
    assert s["address_space_bytes"] == 2 * 256 * MiB
    assert s["segments"] == 2
    assert (s["vm_maps"], s["pages_mapped"]) == (3, 25)
    assert s["upstream_allocs"] == 5  # 2 reservations, 3 maps
    assert s["active_blocks"] == 5
    assert s["cached_blocks"] == 2  # each range's tail
    assert s["cached_bytes"] == 4 * MiB - 1536  # mapped free bytes only
    assert s["largest_free_block"] == 2 * MiB - 512  # the large tail's mapped stretch
    assert s["splits"] == 5
    assert s["alloc_calls"] == 5
    assert s["fragmentation"] == pytest.approx(1 - (2 * MiB - 512) / (4 * MiB - 1536), rel=1e-12)
    for p in ptrs:
        a.free(p)
    s = a.stats()
    assert s["allocated_bytes"] == 0 and s["requested_bytes"] == 0
    assert s["allocated_bytes_peak"] == 46 * MiB + 1536
    assert s["free_calls"] == 5
    assert s["merges"] == 5  # small 1; large: each of the 4 blocks into the tail
    assert s["cached_blocks"] == 2  # one free block per range
    assert s["reserved_bytes"] == s["cached_bytes"] == 50 * MiB
    assert s["largest_free_block"] == 48 * MiB
    a.check()
    assert set(s) == {name for name, _ in _lib.Stats._fields_}
    r = a.empty_cache()
    assert r == ccalloc.ReleaseReport(bytes_released=50 * MiB, segments_released=2, bytes_still_reserved=0,
                                      segments_kept=0, segments_pinned=0, live_bytes_pinning=0,
                                      free_bytes_pinned=0, pages_unmapped=25, bytes_unmapped=50 * MiB,
                                      free_bytes_trapped=0, asleep_domains=0, host_bytes=0)


def test_trim_and_empty_cache_reports_classic(classic):
    a = classic
    small = a.alloc(1000)
    for n in (3 * MiB, 30 * MiB):
        a.free(a.alloc(n))
    r = a.trim(25 * MiB)  # largest first: the 30M segment goes, 22M stay
    # the free 20M medium segment is kept for `keep`; the small one is pinned by its live block
    assert r == ccalloc.ReleaseReport(bytes_released=30 * MiB, segments_released=1,
                                      bytes_still_reserved=22 * MiB, segments_kept=1, segments_pinned=1,
                                      live_bytes_pinning=1024, free_bytes_pinned=2 * MiB - 1024,
                                      pages_unmapped=0, bytes_unmapped=0, free_bytes_trapped=0, asleep_domains=0, host_bytes=0)
    r = a.empty_cache()  # the small segment is pinned by its live block
    assert r == ccalloc.ReleaseReport(bytes_released=20 * MiB, segments_released=1,
                                      bytes_still_reserved=2 * MiB, segments_kept=0, segments_pinned=1,
                                      live_bytes_pinning=1024, free_bytes_pinned=2 * MiB - 1024,
                                      pages_unmapped=0, bytes_unmapped=0, free_bytes_trapped=0, asleep_domains=0, host_bytes=0)
    a.free(small)
    r = a.empty_cache()
    assert (r.bytes_released, r.segments_released, r.bytes_still_reserved) == (2 * MiB, 1, 0)
    assert a.stats()["reserved_bytes"] == 0
    assert a.upstream_stats()["bytes_in_use"] == 0
    free, total = a.mem_info()
    assert free == total == 256 * MiB


def test_trim_and_empty_cache_reports_expandable(alloc):
    """The same under the default (whole maps): the large range maps 20M for
    the 3M request, then 20M more in one map for the 30M one (a map call
    maps at least 20M); its maps go back whole, and a range left empty
    with them."""
    a = alloc
    small = a.alloc(1000)
    for n in (3 * MiB, 30 * MiB):
        a.free(a.alloc(n))
    assert a.stats()["reserved_bytes"] == 42 * MiB
    r = a.trim(25 * MiB)  # the tail's map [20M, 40M) goes whole: 22M stay
    # the large range keeps its first map for `keep`; the small one is
    # pinned by its live block, whose page holds its free bytes
    assert r == ccalloc.ReleaseReport(bytes_released=20 * MiB, segments_released=0,
                                      bytes_still_reserved=22 * MiB, segments_kept=1, segments_pinned=1,
                                      live_bytes_pinning=1024, free_bytes_pinned=2 * MiB - 1024,
                                      pages_unmapped=10, bytes_unmapped=20 * MiB, free_bytes_trapped=2 * MiB - 1024, asleep_domains=0, host_bytes=0)
    r = a.empty_cache()  # the large range's other map, then the range
    assert r == ccalloc.ReleaseReport(bytes_released=20 * MiB, segments_released=1,
                                      bytes_still_reserved=2 * MiB, segments_kept=0, segments_pinned=1,
                                      live_bytes_pinning=1024, free_bytes_pinned=2 * MiB - 1024,
                                      pages_unmapped=10, bytes_unmapped=20 * MiB, free_bytes_trapped=2 * MiB - 1024, asleep_domains=0, host_bytes=0)
    a.free(small)
    r = a.empty_cache()
    assert (r.bytes_released, r.segments_released, r.bytes_still_reserved, r.pages_unmapped) == (2 * MiB, 1, 0, 1)
    s = a.stats()
    assert (s["reserved_bytes"], s["address_space_bytes"]) == (0, 0)
    u = a.upstream_stats()
    assert (u["bytes_in_use"], u["vm_reserved_bytes"], u["vm_mapped_bytes"]) == (0, 0, 0)
    assert (u["vm_map_calls"], u["vm_unmap_calls"]) == (3, 3)
    free, total = a.mem_info()
    assert free == total == 256 * MiB


def test_size_zero_and_free_zero(alloc):
    assert alloc.alloc(0) == 0
    alloc.free(0)
    assert alloc.stats()["alloc_calls"] == 0
    assert alloc.stats()["free_calls"] == 0


def test_null_address_is_an_invalid_argument_where_c_says_so(alloc):
    """free(0) does nothing (C's free(NULL)); block_size and record_stream of
    0 are cca_block_size / cca_record_stream of NULL: InvalidArgumentError,
    not InvalidPointerError (no pointer was named), as docs/python.md says.
    None is NULL too (ctypes passes None as NULL): the same results."""
    for null in (0, None):
        for call in (lambda: alloc.block_size(null), lambda: alloc.record_stream(null, 1)):
            with pytest.raises(ccalloc.InvalidArgumentError) as e:
                call()
            assert not isinstance(e.value, ccalloc.InvalidPointerError)
        alloc.free(null)
    assert alloc.stats()["active_blocks"] == 0
    assert alloc.stats()["free_calls"] == 0  # free(0), free(None): no call


def test_size_texts(alloc):
    p = alloc.alloc("1.5M")
    assert alloc.block_size(p) == 3 * MiB // 2
    alloc.free(p)
    with pytest.raises(ccalloc.InvalidArgumentError):
        alloc.alloc("lots")
    with pytest.raises(ccalloc.InvalidArgumentError):
        alloc.alloc(-1)
    with pytest.raises(TypeError):
        alloc.alloc(True)
    with pytest.raises(TypeError):
        alloc.alloc(1.5)


def test_double_free_raises_and_changes_nothing(alloc):
    p = alloc.alloc(4096)
    q = alloc.alloc(4096)
    alloc.free(p)
    before = alloc.stats()
    with pytest.raises(ccalloc.InvalidPointerError) as e:
        alloc.free(p)
    assert e.value.status == _errors.ERR_INVALID_POINTER
    assert e.value.status_string.startswith("CCA_ERR_INVALID_POINTER")
    assert "double free" in e.value.message
    assert isinstance(e.value, ccalloc.Error) and isinstance(e.value, ValueError)
    with pytest.raises(ccalloc.InvalidPointerError, match="interior"):
        alloc.free(q + 512)
    with pytest.raises(ccalloc.InvalidPointerError):
        alloc.free(0x1000)
    assert alloc.stats() == before
    alloc.free(q)


def test_addresses_no_pointer_can_hold_are_refused(alloc):
    """ctypes keeps the low 64 bits of an int: p + 2**64 once freed p and
    2**64 freed nothing, silently. An address is an int in [0, 2**64), else
    InvalidPointerError, and nothing changes."""
    p = alloc.alloc(4096)
    before = alloc.stats()
    for bad in (p + (1 << 64), p - (1 << 64), 1 << 64, -1, 1.5, True, False, "0x1000"):
        with pytest.raises(ccalloc.InvalidPointerError):
            alloc.free(bad)
        with pytest.raises(ccalloc.InvalidPointerError):
            alloc.block_size(bad)
        with pytest.raises(ccalloc.InvalidPointerError):
            alloc.record_stream(bad, 0x5000)
    assert alloc.stats() == before
    assert alloc.block_size(p) == 4096
    alloc.free(p)


def test_integers_c_cannot_hold_are_refused(alloc):
    """Sizes and stream handles outside [0, 2**64) and device numbers outside
    C's int are refused, never wrapped into range."""
    for bad in (1 << 64, (1 << 64) + 512, -1):
        with pytest.raises(ccalloc.InvalidArgumentError):
            alloc.alloc(bad)
        with pytest.raises(ccalloc.InvalidArgumentError):
            alloc.trim(bad)
    for bad in (1 << 64, (1 << 64) + 0x5000, -1):
        with pytest.raises(ccalloc.InvalidArgumentError, match="stream"):
            alloc.alloc(4096, stream=bad)
    for bad in (1 << 32, (1 << 32) + 5, 1 << 31, -(1 << 31) - 1):
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            alloc.snapshot_torch(device=bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match="device"):
            ccalloc.Allocator(device=bad)
    with pytest.raises(TypeError):
        alloc.snapshot_torch(device=1.5)
    assert alloc.stats()["alloc_calls"] == 0


def test_sizes_and_counts_take_every_integer_type(alloc):
    """Addresses and devices took any integer (__index__: numpy.int64,
    numpy.uint64), sizes and max_leaks only int: alloc(numpy.int64(4096)),
    what a size computed with numpy is, raised TypeError. Every integer
    argument now takes __index__; a bool, a float or a str of digits is still
    refused, and the range checks hold for the converted value."""

    class Int:  # numpy.int64 and the like: __index__, not an int subclass
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    p = alloc.alloc(Int(4096))
    assert alloc.block_size(Int(p)) == 4096
    assert alloc.trim(Int(0)).bytes_released == 0
    d = alloc.domain("sized")
    d.reserve(Int(2 * MiB))
    d.alloc(Int(512))
    with pytest.raises(ccalloc.LiveBlocksError) as e:
        d.release(max_leaks=Int(1))
    assert len(e.value.report.leaks) == 1
    for bad in (Int(-1), Int(1 << 64)):
        with pytest.raises(ccalloc.InvalidArgumentError):
            alloc.alloc(bad)
        with pytest.raises(ccalloc.InvalidArgumentError):
            d.release(max_leaks=bad)
    for bad in (True, 4096.0, b"4096"):
        with pytest.raises(TypeError):
            alloc.alloc(bad)
        with pytest.raises(TypeError):
            d.release(max_leaks=bad)
    alloc.free(p)
    d.release(force=True)


def test_a_mark_without_a_trace_does_nothing_but_a_bad_name_raises(monkeypatch):
    """Not tracing (no CCALLOC_TRACE when the allocator is made), mark() is
    a no-op for a good name and still refuses a bad one, as its docstring
    and cca_trace_mark say."""
    monkeypatch.delenv("CCALLOC_TRACE", raising=False)
    with ccalloc.Allocator(capacity="64M") as a:
        before = a.stats()
        assert a.mark("load:resnet50") is None
        for bad in ("", "a,b", 'say "x"', "x" * 64, "tab\there"):
            with pytest.raises(ccalloc.InvalidArgumentError):
                a.mark(bad)
        assert a.stats() == before


def test_strings_with_a_nul_are_refused(alloc):
    """A C string ends at its first NUL: 'ok\\0,...' once named a domain 'ok'
    and 'max_reserved:8M\\0,bogus:1' was read as 'max_reserved:8M'. Each is
    refused with the exception of that argument's other bad values."""
    with pytest.raises(ccalloc.InvalidArgumentError, match="NUL"):
        alloc.domain('ok\x00,"\\bad')
    with pytest.raises(ccalloc.InvalidArgumentError, match="NUL"):
        alloc.mark("phase\x00junk")
    with pytest.raises(ccalloc.InvalidArgumentError, match="NUL"):
        alloc.alloc("4K\x00junk")
    with pytest.raises(ccalloc.ConfigError, match="NUL"):
        ccalloc.Allocator(capacity="64M", conf="max_reserved:8M\x00,bogus:1")
    with pytest.raises(ccalloc.InvalidArgumentError, match="NUL"):
        ccalloc.Allocator(capacity="64M\x00garbage")
    assert [d["name"] for d in alloc.snapshot()["domains"]] == ["default"]
    assert alloc.stats()["alloc_calls"] == 0


def test_strings_of_another_type_are_a_type_error_naming_it(alloc, host_plug):
    """A domain name, a mark and a configuration text are str: bytes, a
    number or None raise TypeError saying so (not the TypeError of a str
    operation on it), before any call: no domain, no allocator, the plug
    configuration in force kept."""
    for bad in (b"m", 5, None):
        kind = type(bad).__name__
        with pytest.raises(TypeError, match=f"^domain name is a str, not {kind}$"):
            alloc.domain(bad)
        with pytest.raises(TypeError, match=f"^mark is a str, not {kind}$"):
            alloc.mark(bad)
    with pytest.raises(TypeError, match="^conf is a str, not bytes$"):
        ccalloc.Allocator(capacity="64M", conf=b"max_reserved:8M")
    with pytest.raises(TypeError, match="^upstream is a str, not bytes$"):
        plug.configure(upstream=b"host:8M")
    with pytest.raises(TypeError, match="^conf is a str, not int$"):
        plug.configure(conf=5)
    assert [d["name"] for d in alloc.snapshot()["domains"]] == ["default"]
    assert alloc.stats()["alloc_calls"] == 0
    assert plug.mem_info(0) == (64 * MiB, 64 * MiB)  # host:64M, as host_plug configured it


def test_strings_that_are_not_utf8_are_refused(alloc):
    """A str with a lone surrogate (what os.fsdecode makes of a byte that is
    not UTF-8) has no C string: refused with the exception of that
    argument's other bad values, not a UnicodeEncodeError from inside."""
    bad = "x\udcff"
    with pytest.raises(ccalloc.InvalidArgumentError, match="not UTF-8"):
        alloc.domain(bad)
    with pytest.raises(ccalloc.InvalidArgumentError, match="not UTF-8"):
        alloc.mark(bad)
    with pytest.raises(ccalloc.InvalidArgumentError, match="not UTF-8"):
        alloc.alloc("4K" + bad)
    with pytest.raises(ccalloc.ConfigError, match="not UTF-8"):
        ccalloc.Allocator(capacity="64M", conf="max_reserved:" + bad)
    with pytest.raises(ccalloc.InvalidArgumentError, match="not UTF-8"):
        ccalloc.Allocator(capacity="64M" + bad)
    plug.reset()
    for kw in ({"upstream": "host:" + bad}, {"conf": bad}):
        with pytest.raises(ccalloc.ConfigError, match="not UTF-8"):
            plug.configure(**kw)
    assert [d["name"] for d in alloc.snapshot()["domains"]] == ["default"]
    assert alloc.stats()["alloc_calls"] == 0


@pytest.mark.parametrize("status", range(1, 11))
def test_errors_survive_pickle_and_copy(alloc, status):
    """An exception crosses processes by pickle (multiprocessing,
    concurrent.futures): every Error keeps its status, texts and report."""
    cls = _errors.error_class(status)
    e = cls(status, "CCA_ERR_X: text", "cca_call: what went wrong")
    e.report = ccalloc.DomainReport(1, 2, 3, 4, 5, [ccalloc.LiveBlock(0x1000, 512, 100, None, 7, False)])
    for back in (pickle.loads(pickle.dumps(e)), copy.copy(e), copy.deepcopy(e)):
        assert type(back) is cls
        assert (back.status, back.status_string, back.message, str(back)) == \
            (status, e.status_string, e.message, str(e))
        assert back.report == e.report
    with pytest.raises(ccalloc.InvalidPointerError) as raised:
        alloc.free(0x3E7)
    back = pickle.loads(pickle.dumps(raised.value))
    assert (back.status, back.message) == (_errors.ERR_INVALID_POINTER, raised.value.message)
    assert str(back) == str(raised.value)


def test_each_status_raises_the_class_that_names_it():
    """error_class gives every cca_status the class whose docstring names it
    ("CCA_ERR_IO: ..."), exported under its own name, and an unknown status
    the base Error; the classes are also the built-in exceptions a caller may
    catch instead (OutOfMemoryError a MemoryError, docs/python.md). The text
    is the message then the status, or the status alone without a message."""
    classes = [c for c in vars(_errors).values()
               if isinstance(c, type) and issubclass(c, _errors.Error) and c is not _errors.Error]
    named = {getattr(_errors, c.__doc__.split(":")[0][len("CCA_"):]): c for c in classes}
    assert sorted(named) == list(range(1, 12))
    for status, cls in named.items():
        assert _errors.error_class(status) is cls, cls
        assert getattr(ccalloc, cls.__name__) is cls
    for unknown in (-1, 0, 12, 99):
        assert _errors.error_class(unknown) is _errors.Error
    for cls, builtin in ((ccalloc.OutOfMemoryError, MemoryError), (ccalloc.InvalidArgumentError, ValueError),
                         (ccalloc.InvalidPointerError, ValueError), (ccalloc.ConfigError, ValueError),
                         (ccalloc.WriteError, OSError)):
        assert issubclass(cls, builtin), cls
    e = ccalloc.UpstreamError(4, "CCA_ERR_UPSTREAM: upstream failure", "")
    assert str(e) == "CCA_ERR_UPSTREAM: upstream failure"
    e = ccalloc.UpstreamError(4, "CCA_ERR_UPSTREAM: upstream failure", "cca_trim: refused")
    assert str(e) == "cca_trim: refused (CCA_ERR_UPSTREAM: upstream failure)"


def test_the_package_exports_exactly_its_public_names():
    """__all__ lists every public name of the package (`from ccalloc import *`
    gets them all), and each is the object of the module that defines it,
    not a stand-in: `except ccalloc.LibraryNotFoundError` catches the
    loader's error and no other ImportError."""
    import __future__
    import types

    from ccalloc import allocator

    public = {n for n, v in vars(ccalloc).items()
              if not n.startswith("_") and not isinstance(v, (types.ModuleType, __future__._Feature))}
    assert sorted(ccalloc.__all__) == sorted(public)
    for name in ccalloc.__all__:
        home = next(m for m in (_errors, allocator, _lib) if hasattr(m, name)) if name != "library_path" else None
        if home is not None:
            assert getattr(ccalloc, name) is getattr(home, name), name
    assert ccalloc.LibraryNotFoundError is _lib.LibraryNotFoundError
    assert ccalloc.LibraryNotFoundError is not ImportError


def test_out_of_memory_raises():
    with ccalloc.Allocator(capacity="8M", conf="log_oom:0") as a:
        keep = a.alloc(1000)
        with pytest.raises(ccalloc.OutOfMemoryError) as e:
            a.alloc(16 * MiB)
        assert isinstance(e.value, MemoryError)
        assert e.value.status == _errors.ERR_OUT_OF_MEMORY
        assert "never succeed" in e.value.message
        assert a.stats()["ooms"] == 1
        assert a.stats()["allocated_bytes"] == 1024
        a.free(keep)


def test_max_reserved_from_conf():
    with ccalloc.Allocator(capacity="64M", conf="max_reserved:4M,log_oom:0") as a:
        assert a.config()["max_reserved"] == "4M"
        with pytest.raises(ccalloc.OutOfMemoryError):
            a.alloc(6 * MiB)


def test_bad_arguments():
    with pytest.raises(ccalloc.ConfigError, match="greedy_fractoin"):
        ccalloc.Allocator(capacity="8M", conf="greedy_fractoin:0.5")
    with pytest.raises(ccalloc.ConfigError):
        ccalloc.Allocator(capacity="8M", conf="small_max:4M")  # > small_segment
    # history is a count: K as a multiplier, never a byte unit (the C parser's rule)
    with pytest.raises(ccalloc.ConfigError, match="is a count of entries, not a size in bytes"):
        ccalloc.Allocator(capacity="8M", conf="history:4KB")
    with ccalloc.Allocator(capacity="8M", conf="history:4K") as a:
        assert a.config()["history"] == "4K"
    with pytest.raises(ccalloc.InvalidArgumentError):
        ccalloc.Allocator(capacity=0)
    with pytest.raises(TypeError):
        ccalloc.Allocator()
    with pytest.raises(TypeError):
        ccalloc.Allocator(capacity="8M", device=0)


def test_a_device_smaller_than_a_page_is_refused():
    """A simulated device holds whole host pages: one of less than a page
    (capacity=1, "4000": a size meant as "1G"?; 0 too) could never hold a
    block, so it is refused (a ValueError) naming the least capacity; a page is
    the smallest device, and holds a block. The plug's "host:CAPACITY" the
    same, when configured."""
    page = os.sysconf("SC_PAGE_SIZE")
    for small in (0, 1, 511, "4000", page - 1):
        with pytest.raises(ValueError, match=f"capacity {int(small)} is below the {page}-byte host page"):
            ccalloc.Allocator(capacity=small)
    with ccalloc.Allocator(capacity=page) as a:
        a.free(a.alloc(512))
    plug.reset()
    with pytest.raises(ccalloc.ConfigError, match=f"capacity '1' is below the {page}-byte host page"):
        plug.configure(upstream="host:1")


def test_cuda_device_without_gpu_raises_no_device():
    try:
        a = ccalloc.Allocator(device=0)
    except ccalloc.NoDeviceError as e:
        assert e.status == _errors.ERR_NO_DEVICE
        assert "cuda" in e.message
    else:
        a.close()
        pytest.skip("a GPU is present")


def test_close_with_live_blocks_raises_after_closing():
    a = ccalloc.Allocator(capacity="8M")
    a.alloc(4096)
    with pytest.raises(ccalloc.LiveBlocksError) as e:
        a.close()
    assert e.value.report is None  # a domain release's report only
    assert a.closed
    a.close()  # twice: nothing
    with pytest.raises(ccalloc.InvalidArgumentError, match="closed"):
        a.alloc(10)


def test_an_allocator_dropped_unclosed_gives_its_device_back():
    """An Allocator the program drops without close(), a block still live,
    is destroyed by its finalizer, device and all: the simulated device's
    range (reserved with no access) is unmapped. The finalizer raises
    nothing (close() would raise LiveBlocksError)."""
    import gc

    before = no_access_bytes()
    a = ccalloc.Allocator("1G")
    a.alloc(4096)
    assert no_access_bytes() - before >= 1 << 30
    del a
    gc.collect()
    assert no_access_bytes() - before < 1 << 29


def test_context_manager_does_not_mask_an_exception():
    with pytest.raises(KeyError):
        with ccalloc.Allocator(capacity="8M") as a:
            a.alloc(4096)  # live at exit: would be LiveBlocksError
            raise KeyError("the real problem")
    assert a.closed


def test_streams_keep_their_blocks(alloc):
    p = alloc.alloc(4096, stream=0x5000)
    alloc.free(p)
    q = alloc.alloc(4096)  # default stream: not stream 0x5000's block
    assert q != p
    assert alloc.alloc(4096, stream=0x5000) == p
    alloc.free(p)
    alloc.free(q)



def test_stream_handles_are_integers_never_truncated_or_parsed(alloc):
    """A stream handle is an int (or a handle object that converts with
    __int__, as cuda-python's CUstream does). int() once took every value:
    1.5 and Fraction(7, 2) were truncated to streams 1 and 3, "12" was parsed
    to stream 12, and "abc" raised ValueError. A float, another non-integral
    number, a str or bytes is a TypeError, and nothing is allocated; so is
    a bool (True is no stream 1, False no default stream)."""
    from decimal import Decimal
    from fractions import Fraction

    for bad in (True, False, 1.5, 2.0, float("nan"), Fraction(7, 2), Decimal("3"), 1j, "12", "abc", b"1", [1]):
        with pytest.raises(TypeError, match="stream"):
            alloc.alloc(4096, stream=bad)
        with pytest.raises(TypeError, match="stream"):
            alloc.record_stream(0x1000, bad)
    assert alloc.stats()["alloc_calls"] == 0

    class Index:  # numpy.uint64 and the like
        def __index__(self):
            return 0x5000

    class Handle:  # cuda-python's CUstream: __int__, no __index__
        def __int__(self):
            return 0x5000

    class Scalar:  # a 0-d float array or a float tensor: __int__ truncates, __float__ says it is a number
        def __int__(self):
            return 1

        def __float__(self):
            return 1.5

    with pytest.raises(TypeError, match="stream"):
        alloc.alloc(4096, stream=Scalar())
    assert alloc.stats()["alloc_calls"] == 0

    p = alloc.alloc(4096, stream=0x5000)
    alloc.free(p)
    assert alloc.alloc(4096, stream=Index()) == p  # the block cached for stream 0x5000
    alloc.free(p)
    assert alloc.alloc(4096, stream=Handle()) == p
    alloc.free(p)


# ---- snapshot ----------------------------------------------------------------------


def test_snapshot_classic(classic):
    alloc = classic
    p = alloc.alloc(1000)
    q = alloc.alloc(30 * MiB)
    snap = alloc.snapshot()
    assert snap["upstream"] == alloc.device_name == "host-simulated"
    assert snap["config"]["policy"] == "growth"
    assert snap["stats"]["allocated_bytes"] == 30 * MiB + 1024
    segs = sorted(snap["segments"], key=lambda s: s["size"])
    assert [(s["size"], s["pool"], s["live_blocks"]) for s in segs] == [(2 * MiB, "small", 1), (30 * MiB, "large", 1)]
    small = segs[0]
    assert int(small["address"], 16) == p
    assert [(b["offset"], b["size"], b["state"]) for b in small["blocks"]] == [(0, 1024, "live"),
                                                                              (1024, 2 * MiB - 1024, "free")]
    assert segs[1]["blocks"][0]["requested"] == 30 * MiB
    assert [d["name"] for d in snap["domains"]] == ["default"]
    alloc.free(p)
    alloc.free(q)
    assert alloc.snapshot()["stats"]["allocated_bytes"] == 0


def test_snapshot_expandable(alloc):
    """The default: one range per pool, as large as the device, with its
    mapped runs; the large range's first map is the 30M request's pages."""
    p = alloc.alloc(1000)
    q = alloc.alloc(30 * MiB)
    snap = alloc.snapshot()
    assert snap["config"]["expandable"] == 1
    assert snap["stats"]["allocated_bytes"] == 30 * MiB + 1024
    segs = sorted(snap["segments"], key=lambda s: s["mapped_bytes"])
    assert [(s["size"], s["pool"], s["live_blocks"], s["expandable"], s["page"], s["mapped"]) for s in segs] == [
        (256 * MiB, "small", 1, True, 2 * MiB, [[0, 2 * MiB]]),
        (256 * MiB, "large", 1, True, 2 * MiB, [[0, 30 * MiB]])]
    small, large = segs
    assert int(small["address"], 16) == p and int(large["address"], 16) == q
    assert [(b["offset"], b["size"], b["state"]) for b in small["blocks"]] == [(0, 1024, "live"),
                                                                              (1024, 256 * MiB - 1024, "free")]
    assert [(b["offset"], b["size"], b["state"], b["requested"]) for b in large["blocks"]] == [
        (0, 30 * MiB, "live", 30 * MiB), (30 * MiB, 226 * MiB, "free", 0)]
    alloc.free(p)
    alloc.free(q)
    assert alloc.snapshot()["stats"]["allocated_bytes"] == 0


def test_snapshots_and_config_work_under_any_temporary_directory(alloc, tmp_path, monkeypatch):
    """snapshot(), config() and snapshot_torch() go through a temporary file
    that C opens. Its path was encoded as UTF-8, so a temporary directory
    whose name is not UTF-8 (a byte 0xff: Python holds it as the surrogate
    '\\udcff') raised UnicodeEncodeError; the path goes to C as the bytes
    the file system gave (os.fsencode). Odd but valid characters too."""
    p = alloc.alloc(4096)
    for name in (b"tmp-\xff-not-utf8", "tmp é ,:\"'*?".encode()):
        d = os.fsencode(tmp_path) + b"/" + name
        os.mkdir(d)
        monkeypatch.setattr(tempfile, "tempdir", os.fsdecode(d))
        assert alloc.snapshot()["stats"]["allocated_bytes"] == 4096
        assert alloc.config()["policy"] == "growth"
        out = os.path.join(os.fsdecode(d), "snap.pickle")
        assert alloc.snapshot_torch(out)["segments"][0]["allocated_size"] == 4096
        assert os.listdir(d) == [b"snap.pickle"]  # the temporary file is gone
    alloc.free(p)


def test_snapshots_and_config_close_the_files_they_write(alloc):
    """snapshot(), config() and snapshot_torch() have C write into host
    memory through a FILE * of their own (open_memstream); it is closed
    before the text is read: no descriptor stays open, however often they
    are called."""
    fds = "/proc/self/fd"
    if not os.path.isdir(fds):
        pytest.skip("no /proc/self/fd to count the open descriptors")
    p = alloc.alloc(4096)
    alloc.snapshot(), alloc.config(), alloc.snapshot_torch()  # whatever opens once, lazily, is open now
    before = sorted(os.listdir(fds))
    for _ in range(3):
        assert alloc.snapshot()["stats"]["allocated_bytes"] == 4096
        assert alloc.config()["policy"] == "growth"
        assert alloc.snapshot_torch()["segments"][0]["allocated_size"] == 4096
    assert sorted(os.listdir(fds)) == before
    alloc.free(p)


def test_readers_without_host_memory_for_their_stream_raise_memory_error(alloc, monkeypatch):
    """config(), snapshot() and snapshot_torch() write into a stream in host
    memory (open_memstream). No memory for the stream (open_memstream
    returns NULL: C would be handed a NULL FILE *) or for its last growth
    (fclose fails) raises MemoryError; the allocator is untouched."""
    from ccalloc import allocator as module

    p = alloc.alloc(4096)
    readers = (alloc.config, alloc.snapshot, alloc.snapshot_torch)
    why = "^no host memory for the stream a snapshot is written into$"
    monkeypatch.setattr(module._lib, "open_memstream", lambda buf, size: None)
    for read in readers:
        with pytest.raises(MemoryError, match=why):
            read()
    monkeypatch.undo()
    fclose = module._lib.fclose
    monkeypatch.setattr(module._lib, "fclose", lambda f: fclose(f) or -1)  # closed, and said to fail
    for read in readers:
        with pytest.raises(MemoryError, match=why):
            read()
    monkeypatch.undo()
    assert alloc.snapshot()["stats"]["allocated_bytes"] == alloc.block_size(p) == 4096
    alloc.free(p)


def test_trim_keeps_any_amount_c_can_hold(alloc):
    """keep is a size_t: 4 GiB on a 256M device keeps everything cached
    (it was once a C int, which wraps 2**32 to 0 and gives everything back)."""
    p = alloc.alloc(3 * MiB)
    alloc.free(p)
    cached = alloc.stats()["reserved_bytes"]
    assert cached > 0
    for keep in (1 << 32, (1 << 32) + 512, (1 << 64) - 1):
        r = alloc.trim(keep)
        assert (r.bytes_released, r.segments_released, r.bytes_still_reserved) == (0, 0, cached)
    assert alloc.empty_cache().bytes_released == cached
    assert alloc.stats()["reserved_bytes"] == 0


def test_snapshot_torch_has_pytorchs_structure_and_the_same_numbers(tmp_path):
    """Allocator.snapshot_torch: the same state as the JSON snapshot in the
    structure torch.cuda.memory._snapshot() returns, written to a file that
    the standard pickle module reads back equal. Classic segments, whose
    segment_alloc events are one per segment."""
    with ccalloc.Allocator(capacity="256M", conf="history:64,expandable:0") as a:
        p = a.alloc(1000)
        q = a.alloc(30 * MiB)
        a.free(p)
        out = tmp_path / "s.pickle"
        snap = a.snapshot_torch(str(out), device=3)
        import pickle
        assert pickle.loads(out.read_bytes()) == snap
        st = a.stats()
        assert sum(s["total_size"] for s in snap["segments"]) == st["reserved_bytes"] == 32 * MiB
        assert sum(s["allocated_size"] for s in snap["segments"]) == st["allocated_bytes"] == 30 * MiB
        assert {s["device"] for s in snap["segments"]} == {3}
        large = [s for s in snap["segments"] if s["total_size"] == 30 * MiB][0]
        assert [(b["size"], b["requested_size"], b["state"]) for b in large["blocks"]] == \
            [(30 * MiB, 30 * MiB, "active_allocated")]
        assert large["blocks"][0]["address"] == q
        traces = snap["device_traces"]
        assert len(traces) == 4 and traces[:3] == [[], [], []]
        acts = [(e["action"], e["size"]) for e in traces[3]]
        assert ("alloc", 1000) in acts and ("alloc", 30 * MiB) in acts and ("free_requested", 1000) in acts
        assert [e["action"] for e in traces[3]].count("segment_alloc") == 2
        with pytest.raises(ccalloc.InvalidArgumentError):
            a.snapshot_torch(device=-1)
        with pytest.raises(ccalloc.InvalidArgumentError):
            a.snapshot_torch(device=1024)
        a.free(q)


# ---- domains -----------------------------------------------------------------------


def test_domain_context_manager_releases_its_memory_classic(classic):
    alloc = classic
    other = alloc.alloc(1000)  # the default domain keeps its segment
    with alloc.domain("resnet50") as d:
        x = d.alloc(5 * MiB)
        y = d.alloc(1000)
        st = d.stats()
        assert st["name"] == "resnet50"
        assert st["reserved_bytes"] == 22 * MiB  # its own 20M medium and 2M small segments
        assert st["allocated_bytes"] == 5 * MiB + 1024
        d.free(x)
        d.free(y)
    assert d.destroyed
    s = alloc.stats()
    assert s["reserved_bytes"] == 2 * MiB  # the domain's 22M went back at exit
    assert s["upstream_frees"] == 2
    alloc.free(other)


def test_domain_context_manager_releases_its_memory_expandable(alloc):
    """The default: the domain's own two ranges, 20M and 2M mapped, go back
    at exit, each one unmap and one range release."""
    other = alloc.alloc(1000)  # the default domain keeps its range
    with alloc.domain("resnet50") as d:
        x = d.alloc(5 * MiB)
        y = d.alloc(1000)
        st = d.stats()
        assert st["reserved_bytes"] == 22 * MiB  # its own large (20M mapped) and small (2M) ranges
        assert st["allocated_bytes"] == 5 * MiB + 1024
        assert alloc.stats()["upstream_allocs"] == 6  # 3 ranges, a map in each
        d.free(x)
        d.free(y)
    assert d.destroyed
    s = alloc.stats()
    assert s["reserved_bytes"] == 2 * MiB  # the domain's 22M went back at exit
    assert s["upstream_frees"] == 4
    assert s["address_space_bytes"] == 256 * MiB  # the default domain's small range
    alloc.free(other)


def test_domain_context_manager_does_not_mask_an_exception(host_plug):
    """An exception leaving a domain's block is the one the caller sees,
    whatever the domain's destroy then raises, as for the Allocator's
    block. Only LiveBlocksError was let through: a destroy that failed for
    another reason (here the allocator gone: a closed Allocator, a plug view
    after plug.reset(); on a GPU a failed synchronize) replaced the
    exception with its own."""
    with pytest.raises(KeyError, match="the real problem"):
        with ccalloc.Allocator(capacity="8M") as a, a.domain("closed"):
            a.close()  # the domain dies with its allocator
            raise KeyError("the real problem")
    with pytest.raises(KeyError, match="the real problem"):
        with plug.allocator(0).domain("reset"):
            plug.reset()
            raise KeyError("the real problem")
    plug.configure(upstream="host:64M")  # the reset forgot the configuration
    with plug.allocator(0).domain("reset") as d:
        plug.reset()  # no exception in flight: the domain went with its allocator, nothing left to do
    assert d.destroyed


def test_a_domain_block_ended_by_an_exception_keeps_a_domain_that_cannot_go(alloc):
    """docs/python.md: a domain's `with` block that ends with an exception
    raises that exception; a failure of the destroy at its end is dropped,
    and a domain that could not go (a block still live: LiveBlocksError)
    stays, its blocks valid. One with no live block goes, as at a normal end."""
    with pytest.raises(KeyError, match="the real problem"):
        with alloc.domain("kept") as d:
            p = d.alloc(4096)
            raise KeyError("the real problem")
    assert not d.destroyed
    assert alloc.block_size(p) == 4096
    assert (d.stats()["allocated_bytes"], d.stats()["active_blocks"]) == (4096, 1)
    d.free(p)
    d.destroy()
    with pytest.raises(KeyError, match="the real problem"):
        with alloc.domain("gone") as e:
            e.free(e.alloc(4096))
            raise KeyError("the real problem")
    assert d.destroyed and e.destroyed
    assert [x["name"] for x in alloc.snapshot()["domains"]] == ["default"]
    s = alloc.stats()
    assert (s["allocated_bytes"], s["active_blocks"], s["reserved_bytes"]) == (0, 0, 0)


def test_a_domains_repr_names_it_and_says_when_it_is_destroyed(alloc):
    d = alloc.domain("resnet50")
    assert repr(d) == "<ccalloc.Domain 'resnet50'>"
    d.destroy()
    assert repr(d) == "<ccalloc.Domain 'resnet50' (destroyed)>"


def test_domain_leak_raises_with_the_report(alloc):
    d = alloc.domain("leaky")
    x = d.alloc(4096)
    with pytest.raises(ccalloc.LiveBlocksError) as e:
        with d:
            pass
    report = e.value.report
    assert (report.live_blocks, report.live_bytes, report.bytes_released) == (1, 4096, 0)
    assert report.leaks == [ccalloc.LiveBlock(ptr=x, size=4096, requested=4096, stream=None, age=0, pending=False)]
    assert not d.destroyed  # it stays, and its block is still valid
    d.free(x)
    r = d.destroy()
    assert (r.bytes_released, r.segments_released, r.live_blocks) == (2 * MiB, 1, 0)
    with pytest.raises(ccalloc.InvalidArgumentError):
        d.alloc(10)


# ---- sleep and wake ------------------------------------------------------------------


def test_a_leak_report_names_each_blocks_stream_and_counts_the_rest(alloc):
    """A refused release lists each live block with the stream it was
    allocated on (the handle as given); the message shows the first four
    and says how many more there are, nothing more when all are shown."""
    d = alloc.domain("streams")
    ptrs = [d.alloc(4000, stream=0x5000 + i) for i in range(6)]
    with pytest.raises(ccalloc.LiveBlocksError) as e:
        d.release()
    report = e.value.report
    assert (report.live_blocks, report.live_bytes, report.bytes_released) == (6, 6 * 4096, 0)
    assert sorted((b.ptr, b.size, b.requested, b.stream, b.pending) for b in report.leaks) == \
        sorted((p, 4096, 4000, 0x5000 + i, False) for i, p in enumerate(ptrs))
    shown = ", ".join(f"{b.ptr:#x}: 4096 bytes (requested 4000)" for b in report.leaks[:4])
    assert e.value.message.endswith("; live: " + shown + " and 2 more (DomainReport.leaks in .report)")
    for p in ptrs[1:]:
        d.free(p)
    with pytest.raises(ccalloc.LiveBlocksError) as e:
        d.release()
    assert e.value.message.endswith(f"; live: {ptrs[0]:#x}: 4096 bytes (requested 4000)")
    assert [b.stream for b in e.value.report.leaks] == [0x5000]
    d.free(ptrs[0])
    assert d.destroy().live_blocks == 0
    s = alloc.stats()
    assert (s["allocated_bytes"], s["active_blocks"]) == (0, 0)


def test_domain_sleep_keeps_the_bytes_at_the_same_addresses(alloc):
    """A 3M block and a 1000-byte one: sleep copies their requested sizes
    rounded to 512 bytes to the host and gives the device all 22M the
    domain reserved (its 20M-mapped large range, its 2M small one); wake
    maps only the pages under the blocks (2+1 pages of 2M) and copies the
    bytes back to the same addresses."""
    d = alloc.domain("model")
    x, y = d.alloc(3 * MiB), d.alloc(1000)
    ctypes.memset(x, 0xAB, 3 * MiB)
    ctypes.memset(y, 0xCD, 1000)
    free_awake, total = alloc.mem_info()
    reserved = d.stats()["reserved_bytes"]
    assert reserved == 22 * MiB
    r = d.sleep()
    assert r == ccalloc.SleepReport(blocks=2, bytes_copied=3 * MiB + 1024, bytes_unmapped=reserved,
                                    bytes_mapped=0, host_bytes=3 * MiB + 1024)
    assert alloc.mem_info() == (free_awake + reserved, total)  # exactly the domain's reserved bytes back
    st = d.stats()
    assert (st["asleep"], st["host_bytes"], st["reserved_bytes"], st["cached_bytes"]) == (1, 3 * MiB + 1024, 0, 0)
    assert (alloc.stats()["asleep_domains"], alloc.stats()["host_bytes"]) == (1, 3 * MiB + 1024)
    rr = alloc.empty_cache()  # the release report says what is asleep
    assert (rr.asleep_domains, rr.host_bytes, rr.bytes_released) == (1, 3 * MiB + 1024, 0)
    assert d.sleep() == ccalloc.SleepReport(0, 0, 0, 0, 0)  # asleep already: nothing done
    r = d.wake()
    assert r == ccalloc.SleepReport(blocks=2, bytes_copied=3 * MiB + 1024, bytes_unmapped=0,
                                    bytes_mapped=6 * MiB, host_bytes=3 * MiB + 1024)
    assert (alloc.trim(1 << 40).asleep_domains, alloc.trim(1 << 40).host_bytes) == (0, 0)
    assert ctypes.string_at(x, 3 * MiB) == b"\xab" * (3 * MiB)
    assert ctypes.string_at(y, 1000) == b"\xcd" * 1000
    st = d.stats()
    assert (st["asleep"], st["host_bytes"], st["reserved_bytes"]) == (0, 0, 6 * MiB)
    assert alloc.mem_info()[0] == free_awake + reserved - 6 * MiB
    assert d.wake() == ccalloc.SleepReport(0, 0, 0, 0, 0)  # awake already
    alloc.check()
    d.free(x)
    d.free(y)


def test_alloc_into_a_sleeping_domain_raises_asleep(alloc):
    """alloc and reserve are refused while asleep (size 0 is still 0);
    free is allowed, and the freed block's copy is not copied back."""
    d = alloc.domain("sleepy")
    x, y = d.alloc(MiB), d.alloc(MiB)
    d.sleep()
    with pytest.raises(ccalloc.AsleepError, match="domain 'sleepy' is asleep"):
        d.alloc(4096)
    with pytest.raises(ccalloc.AsleepError):
        d.reserve(8 * MiB)
    assert d.alloc(0) == 0
    other = alloc.alloc(4096)  # the default domain is awake
    d.free(y)
    r = d.wake()  # both recorded blocks woken, only x's bytes copied back
    assert (r.blocks, r.bytes_copied, r.bytes_mapped) == (2, MiB, 2 * MiB)
    z = d.alloc(4096)  # awake: allocations again
    for p in (x, z, other):
        alloc.free(p)
    alloc.check()


def test_an_asleep_domains_release_and_destroy_work_as_when_awake(alloc):
    """docs/python.md: while a domain is asleep, release() and destroy()
    work as when awake: a live block refuses them (LiveBlocksError naming
    it), and the domain stays asleep with its copy, woken intact later;
    destroy(force=True) takes the domain, its blocks and its host copy."""
    d = alloc.domain("asleep")
    x = d.alloc(MiB)
    ctypes.memset(x, 0x5A, MiB)
    d.sleep()
    for call in (d.release, d.destroy):
        with pytest.raises(ccalloc.LiveBlocksError) as e:
            call()
        assert [(b.ptr, b.size) for b in e.value.report.leaks] == [(x, MiB)]
        st = d.stats()
        assert (st["asleep"], st["host_bytes"], st["active_blocks"], st["reserved_bytes"]) == (1, MiB, 1, 0)
    assert d.wake().bytes_copied == MiB
    assert ctypes.string_at(x, MiB) == b"\x5a" * MiB
    d.sleep()
    r = d.destroy(force=True)
    assert d.destroyed and (r.live_blocks, r.live_bytes, r.bytes_still_reserved) == (1, MiB, 0)
    s = alloc.stats()
    assert (s["asleep_domains"], s["host_bytes"], s["active_blocks"], s["allocated_bytes"]) == (0, 0, 0, 0)
    alloc.check()


def test_discard_copies_nothing(alloc):
    d = alloc.domain("cache")
    x = d.alloc(3 * MiB)
    reserved = d.stats()["reserved_bytes"]
    r = d.sleep(discard=True)
    assert r == ccalloc.SleepReport(blocks=1, bytes_copied=0, bytes_unmapped=reserved, bytes_mapped=0, host_bytes=0)
    assert (d.stats()["asleep"], d.stats()["host_bytes"]) == (1, 0)
    r = d.wake()
    assert (r.blocks, r.bytes_copied, r.bytes_mapped, r.host_bytes) == (1, 0, 4 * MiB, 0)
    ctypes.memset(x, 1, 3 * MiB)  # mapped again: writable, contents were undefined
    d.free(x)


def test_wake_on_a_full_device_raises_and_stays_asleep():
    """The device taken by another allocation while asleep: wake raises
    OutOfMemoryError, maps nothing, the domain stays asleep with its copy;
    once room is back the bytes return intact."""
    with ccalloc.Allocator(capacity="64M", conf="") as a:
        d = a.domain("model")
        x = d.alloc(3 * MiB)
        ctypes.memset(x, 0x5A, 3 * MiB)
        d.sleep()
        free_asleep = a.mem_info()[0]
        hog = a.alloc(free_asleep - 2 * MiB)  # the default domain leaves 2M; wake needs 4M (2 pages)
        free_before = a.mem_info()[0]
        with pytest.raises(ccalloc.OutOfMemoryError, match="missing"):
            d.wake()
        assert a.mem_info()[0] == free_before  # nothing of the wake left mapped
        assert (d.stats()["asleep"], d.stats()["host_bytes"]) == (1, 3 * MiB)
        with pytest.raises(ccalloc.OutOfMemoryError):
            a.wake()
        a.free(hog)
        a.empty_cache()
        assert d.wake().bytes_mapped == 4 * MiB
        assert ctypes.string_at(x, 3 * MiB) == b"\x5a" * (3 * MiB)
        d.free(x)


def test_allocator_sleep_and_wake_every_domain(alloc):
    """Allocator.sleep puts every domain to sleep, the default one too;
    mem_info's used bytes fall by all that was reserved."""
    d = alloc.domain("one")
    x, y = alloc.alloc(MiB), d.alloc(MiB)
    ctypes.memset(x, 1, MiB)
    ctypes.memset(y, 2, MiB)
    free_awake, total = alloc.mem_info()
    reserved = alloc.stats()["reserved_bytes"]
    r = alloc.sleep()
    assert (r.blocks, r.bytes_copied, r.bytes_unmapped, r.host_bytes) == (2, 2 * MiB, reserved, 2 * MiB)
    assert alloc.mem_info() == (total, total) == (free_awake + reserved, total)
    s = alloc.stats()
    assert (s["asleep_domains"], s["host_bytes"], s["reserved_bytes"]) == (2, 2 * MiB, 0)
    with pytest.raises(ccalloc.AsleepError):
        alloc.alloc(10)
    r = alloc.wake()
    assert (r.blocks, r.bytes_copied, r.bytes_mapped) == (2, 2 * MiB, 4 * MiB)
    assert ctypes.string_at(x, MiB) == b"\x01" * MiB and ctypes.string_at(y, MiB) == b"\x02" * MiB
    assert alloc.stats()["asleep_domains"] == 0
    assert alloc.wake() == ccalloc.SleepReport(0, 0, 0, 0, 0)  # none asleep
    alloc.free(x)
    d.free(y)


@pytest.mark.parametrize("flag", ["False", "no", "", 2, -1, 0.0, 2.5, None, [], b"0"])
def test_flags_are_bools_not_truthy_values(alloc, flag):
    """discard and force decide what is lost (the blocks' bytes, live
    blocks' memory): a str like "False", a float or None once read as its
    truth value (discard="False" discarded the bytes); now TypeError and
    nothing changed. True, False, 0 and 1 are the flags."""
    d = alloc.domain("flags")
    x = d.alloc(MiB)
    ctypes.memset(x, 0x6B, MiB)
    with pytest.raises(TypeError, match="discard is a bool"):
        d.sleep(discard=flag)
    with pytest.raises(TypeError, match="discard is a bool"):
        alloc.sleep(discard=flag)
    assert (d.stats()["asleep"], alloc.stats()["asleep_domains"]) == (0, 0)
    with pytest.raises(TypeError, match="force is a bool"):
        d.release(force=flag)
    with pytest.raises(TypeError, match="force is a bool"):
        d.destroy(force=flag)
    assert not d.destroyed and d.stats()["allocated_bytes"] == MiB
    assert ctypes.string_at(x, MiB) == b"\x6b" * MiB
    for ok in (False, 0):
        assert d.sleep(discard=ok).bytes_copied == MiB
        d.wake()
    assert ctypes.string_at(x, MiB) == b"\x6b" * MiB
    assert d.sleep(discard=1).bytes_copied == 0
    d.wake()
    d.free(x)
    assert d.release(force=0).live_blocks == 0


class _BoolScalar:
    """numpy.bool_'s protocol, for a test that needs no numpy (CI has
    none): __bool__, == with a bool answering one of its own kind (numpy
    answers an np.bool_), no __index__ (numpy refuses it), not a
    numbers.Number, repr "True" / "False" (numpy 1.x)."""

    def __init__(self, value: bool) -> None:
        self.value = value

    def __bool__(self) -> bool:
        return self.value

    def __eq__(self, other):
        return _BoolScalar(self.value == other)

    def __ne__(self, other):
        return _BoolScalar(self.value != other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self.value)


def test_flags_take_a_bool_scalar_of_another_library(alloc):
    """A numpy.bool_ (what `array.any()` or a comparison of numpy values
    gives) was refused as a flag, with "discard is a bool (True or False),
    not True": its repr is the bool it stands for. A value that is not a
    number and equals exactly one of True and False, its own truth value,
    is that flag; a stand-in with numpy.bool_'s protocol is the test."""
    d = alloc.domain("scalars")
    x = d.alloc(MiB)
    try:
        ctypes.memset(x, 0x5A, MiB)
        assert d.sleep(discard=_BoolScalar(False)).bytes_copied == MiB
        d.wake()
        assert ctypes.string_at(x, MiB) == b"\x5a" * MiB
        assert alloc.sleep(discard=_BoolScalar(False)).bytes_copied == MiB
        alloc.wake()
        assert d.sleep(discard=_BoolScalar(True)).bytes_copied == 0
        d.wake()
        with pytest.raises(ccalloc.LiveBlocksError):
            d.release(force=_BoolScalar(False))  # read as False: live blocks refuse it
        with pytest.raises(ccalloc.LiveBlocksError):
            d.destroy(force=_BoolScalar(False))
    finally:
        d.free(x)
    assert d.destroy(force=_BoolScalar(True)).live_blocks == 0 and d.destroyed


class _EqualToAnything:
    def __eq__(self, other):
        return True

    __hash__ = None


class _NoTruth:
    def __bool__(self):
        raise ValueError("no truth value")


@pytest.mark.parametrize("flag", [_EqualToAnything(), _NoTruth(), 1.0, 0.0])
def test_a_refused_flag_says_what_a_flag_is_and_what_it_got(alloc, flag):
    """The refusal names what a flag takes and the type it got (a repr
    alone, "not True", said nothing when the value printed as a bool): a
    value equal to both True and False (unittest.mock.ANY's kind), one
    with no truth value, a float."""
    d = alloc.domain("refused")
    want = (r"discard is a bool \(True or False, 0 or 1, or a bool scalar such as numpy\.bool_\), "
            rf"not .* \({type(flag).__name__}\)")
    with pytest.raises(TypeError, match=want):
        d.sleep(discard=flag)
    with pytest.raises(TypeError, match=want.replace("discard", "force")):
        d.release(force=flag)
    assert not d.stats()["asleep"]


def test_classic_segments_cannot_sleep(classic):
    d = classic.domain("classic")
    x = d.alloc(MiB)
    with pytest.raises(ccalloc.UpstreamError, match="expandable"):
        d.sleep()
    with pytest.raises(ccalloc.UpstreamError):
        classic.sleep(discard=True)
    assert d.stats()["asleep"] == 0
    d.free(d.alloc(4096))  # nothing changed: still allocating
    d.free(x)


def test_domain_max_leaks_is_checked_before_the_call(alloc):
    """max_leaks is the size of the leak buffer: refused unless an int >= 0
    (-1 once reached C as a cap of SIZE_MAX over a one-entry buffer and
    overwrote the heap), and never more leaks listed than asked for."""
    d = alloc.domain("counted")
    ps = [d.alloc(4096) for _ in range(64)]
    for bad in (-1, -(1 << 64), 1 << 64):
        with pytest.raises(ccalloc.InvalidArgumentError, match="max_leaks"):
            d.release(max_leaks=bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match="max_leaks"):
            d.destroy(max_leaks=bad)
    for bad in (True, 1.5, "3", None):
        with pytest.raises(TypeError):
            d.release(max_leaks=bad)
    assert not d.destroyed and d.stats()["active_blocks"] == 64
    for n, listed in ((0, 0), (1, 1), (5, 5), (64, 64), (1000, 64)):
        with pytest.raises(ccalloc.LiveBlocksError) as e:
            d.release(max_leaks=n)
        assert (e.value.report.live_blocks, len(e.value.report.leaks)) == (64, listed)
    assert {leak.ptr for leak in e.value.report.leaks} == set(ps)
    for p in ps:
        d.free(p)
    assert d.destroy(max_leaks=0).live_blocks == 0


def test_domain_max_leaks_of_any_size_lists_the_live_blocks(alloc):
    """max_leaks is a bound, not a buffer size to allocate: 2**40 once asked
    ctypes for a 48 TiB leak buffer (MemoryError, which reads as an
    OutOfMemoryError to whoever catches MemoryError) and 2**63 raised
    OverflowError, even for a domain with nothing live. Every int in
    [0, 2**64) lists all the live blocks, up to that many."""
    d = alloc.domain("bounded")
    ps = [d.alloc(4096) for _ in range(3)]
    for n in (1 << 40, 1 << 63, (1 << 64) - 1):
        with pytest.raises(ccalloc.LiveBlocksError) as e:
            d.release(max_leaks=n)
        assert (e.value.report.live_blocks, [leak.ptr for leak in e.value.report.leaks]) == (3, ps)
    for p in ps:
        d.free(p)
    assert d.release(max_leaks=(1 << 64) - 1).bytes_released == 2 * MiB
    assert d.destroy(max_leaks=1 << 63).live_blocks == 0


def test_domain_force_release(alloc):
    d = alloc.domain("forced")
    x = d.alloc(4096)
    r = d.release(force=True)
    assert (r.live_blocks, r.bytes_released) == (1, 2 * MiB)
    with pytest.raises(ccalloc.InvalidPointerError):
        alloc.free(x)  # its pointer died with the release
    d.destroy()


@pytest.mark.parametrize("conf,arena_calls", [("expandable:0", 1), ("", 2)])
def test_domain_reserve_and_bad_names(conf, arena_calls):
    """The footprint arena is one upstream allocation (classic) or one range
    mapped whole (the default: a reservation and a map); a request then
    costs no upstream call."""
    with ccalloc.Allocator(capacity="256M", conf=conf) as alloc:
        _domain_reserve_and_bad_names(alloc, arena_calls)


def _domain_reserve_and_bad_names(alloc, arena_calls):
    with alloc.domain("m") as d:
        d.reserve("8M")
        assert d.stats()["reserved_bytes"] == 8 * MiB
        assert alloc.stats()["upstream_allocs"] == arena_calls
        p = d.alloc(MiB)
        assert alloc.stats()["upstream_allocs"] == arena_calls  # served from the arena
        d.free(p)
    for bad in ("", "x" * 64, 'q"uote', "back\\slash", "tab\t"):
        with pytest.raises(ccalloc.InvalidArgumentError):
            alloc.domain(bad)


def test_greedy_refuses_domains():
    with ccalloc.Allocator(capacity="64M", conf="policy:greedy,greedy_bytes:8M") as a:
        with pytest.raises(ccalloc.InvalidArgumentError):
            a.domain("m")


def test_library_path_is_the_loaded_file():
    import os
    path = ccalloc.library_path()
    assert os.path.isabs(path) and os.path.exists(path)
    if os.environ.get("CCALLOC_LIBRARY"):
        assert path == os.path.realpath(os.environ["CCALLOC_LIBRARY"])


def test_an_empty_library_argument_is_refused_not_searched():
    """library="" names no file: it is refused (LibraryNotFoundError naming
    the argument), not taken as library=None, which searches the usual
    places and would load whatever is found there."""
    with pytest.raises(ccalloc.LibraryNotFoundError, match="argument: empty path"):
        ccalloc.Allocator(capacity="1M", library="")
    with pytest.raises(ccalloc.LibraryNotFoundError, match="argument: empty path"):
        _lib.load("")


def test_install_prefixes_include_lib64_and_multiarch(monkeypatch, tmp_path):
    """Where an install puts the library: PREFIX/lib, or PREFIX/lib64 (cmake's
    GNUInstallDirs on Fedora, RHEL, SUSE), for the running prefix and the
    system's; a library only in <prefix>/lib64 is the first candidate found."""
    import sysconfig
    monkeypatch.delenv("CCALLOC_LIBRARY", raising=False)
    monkeypatch.setattr(_lib, "_checkout_root", lambda: None)
    monkeypatch.setattr(_lib.sys, "prefix", str(tmp_path))
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libccalloc.so").write_bytes(b"")
    tried = [p for origin, p in _lib.candidates() if origin == "install prefix"]
    dirs = []
    for p in tried:
        d = os.path.dirname(p)
        if d not in dirs:
            dirs.append(d)
    want = [str(tmp_path / "lib"), str(tmp_path / "lib64"), "/usr/local/lib", "/usr/local/lib64", "/usr/lib",
            "/usr/lib64"]
    if sysconfig.get_config_var("MULTIARCH"):
        want.append("/usr/lib/" + sysconfig.get_config_var("MULTIARCH"))
    assert dirs == want
    assert next(p for p in tried if os.path.exists(p)) == str(tmp_path / "lib64" / "libccalloc.so")
    # a system with no multiarch directory (Fedora, RHEL, SUSE, Arch): the same, less that directory
    monkeypatch.setattr(_lib.sysconfig, "get_config_var", lambda name: None)
    tried = [p for origin, p in _lib.candidates() if origin == "install prefix"]
    assert tried == [os.path.join(d, n) for d in want[:6] for n in ("libccalloc.so", "libccalloc.dylib")]


def test_a_domain_is_destroyed_with_its_allocator():
    """cca_destroy destroys every domain: the Python Domain says so, refuses
    its calls with the words docs/python.md quotes ("the allocator is
    closed"), and its with-block ends quietly."""
    a = ccalloc.Allocator(capacity="64M")
    d = a.domain("m")
    p = d.alloc(4096)
    assert not d.destroyed
    with d:
        with pytest.raises(ccalloc.LiveBlocksError):
            a.close()
    assert a.closed and d.destroyed
    for call in (lambda: d.alloc(512), lambda: d.stats(), lambda: d.reserve("1M"), lambda: d.release(),
                 lambda: d.destroy()):
        with pytest.raises(ccalloc.InvalidArgumentError, match="the allocator is closed"):
            call()
    assert p != 0


# A library file cut short (an interrupted link, copy or download). glibc's
# dlopen maps every loadable segment its program headers name, past the end
# of the file too, and its first read there raises SIGBUS: the process
# would die instead of dlopen failing. Each load runs in a subprocess, so a
# crash fails the test instead of ending the run.
_LOAD_CUT = """
import sys
import ccalloc
from ccalloc import _lib
good, cut = sys.argv[1], sys.argv[2]
try:
    _lib.load(cut)
except ccalloc.LibraryNotFoundError as e:
    print("refused:", repr(str(e)))
_lib.candidates = lambda: [("checkout build", cut), ("checkout build", good)]
print("loaded:", _lib.load().path)
"""


def test_a_truncated_library_is_refused_not_loaded(tmp_path):
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    import struct

    good = ccalloc.library_path()
    data = open(good, "rb").read()
    # where the loadable segments end (ELF64 little-endian): a cut beyond it
    # drops only what dlopen never maps (section headers, debug info), which
    # a Debug build has plenty of, and may load
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loaded_end = 0
    for i in range(phnum):
        p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            loaded_end = max(loaded_end, p_offset + p_filesz)
    assert 1000 < loaded_end <= len(data)
    cuts = sorted({64, 1000} | {loaded_end * k // 8 for k in range(1, 8)})
    for n in cuts:
        cut = tmp_path / f"libccalloc-{n}.so"
        cut.write_bytes(data[:n])
        env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
        env.pop("CCALLOC_LIBRARY", None)
        r = subprocess.run([sys.executable, "-c", _LOAD_CUT, good, str(cut)], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, f"cut at {n} of {len(data)} bytes: exit {r.returncode}\n{r.stderr[-2000:]}"
        lines = r.stdout.splitlines()
        assert lines[0].startswith("refused:") and str(cut) in lines[0], (n, lines)
        assert lines[-1] == f"loaded: {good}", (n, lines)


# The headline of a failed search says which failure it was: nothing found,
# or a file found that would not load (not a library; under EMFILE, the
# real one): each place tried is listed below it either way.
_LOAD_HEADLINE = """
import sys
import ccalloc
from ccalloc import _lib
for name in sys.argv[1:]:
    _lib.candidates = lambda: [("checkout build", name)]
    try:
        _lib.load()
    except ccalloc.LibraryNotFoundError as e:
        print(str(e).splitlines()[0])
"""


def test_a_library_found_that_does_not_load_is_not_called_missing(tmp_path):
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    junk = tmp_path / "libccalloc.so"
    junk.write_bytes(b"\x7fELF" + b"\0" * 60)  # an ELF header and nothing else: dlopen refuses it
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    env.pop("CCALLOC_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", _LOAD_HEADLINE, str(tmp_path / "missing.so"), str(junk)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    missing, found = r.stdout.splitlines()
    assert missing.startswith("libccalloc not found. "), missing
    assert found.startswith("libccalloc was found but could not be loaded. "), found


_LOAD_TWO = """
import sys
import ccalloc
from ccalloc import _lib
good, copy = sys.argv[1], sys.argv[2]
print("first:", _lib.load(good).path)
print("again:", _lib.load(good).path)
try:
    _lib.load(copy)
except ccalloc.LibraryNotFoundError as e:
    print("refused:", str(e))
print("still:", _lib.load().path)
with open("/proc/self/maps") as maps:
    print("copy mapped:", any(line.rstrip().endswith(copy) for line in maps))
"""


def test_a_second_library_path_is_refused_while_one_is_loaded(tmp_path):
    """docs/python.md: the library is loaded once per process; naming another
    file (here a copy of the same library) is refused, and the first stays
    the one in use. In a subprocess. The copy is refused before it is
    loaded: a second copy in the process would run its constructors (its own
    fork handler) and stay mapped (it was dlopened, then refused)."""
    import shutil
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    good = ccalloc.library_path()
    copy = tmp_path / "libccalloc.so"
    shutil.copyfile(good, copy)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    env.pop("CCALLOC_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", _LOAD_TWO, good, str(copy)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == [
        f"first: {good}", f"again: {good}",
        f"refused: libccalloc is already loaded from {good}; cannot switch to {copy}", f"still: {good}",
        "copy mapped: False"], r.stdout


def test_an_asan_library_without_its_runtime_is_refused_not_loaded(tmp_path):
    """CCALLOC_LIBRARY naming an AddressSanitizer build in a process that did
    not preload ASan's runtime: loading it would end the process (ASan's
    runtime exits when it does not come first); the package refuses it with
    LibraryNotFoundError saying what to preload. A sanitizer build made here
    (skipped without a compiler that builds one), loaded in a subprocess."""
    import shutil
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler to build an AddressSanitizer library with")
    (tmp_path / "s.c").write_text("int cca_status_string(void) { return 0; }\n")
    so = tmp_path / "libccalloc.so"
    r = subprocess.run([cc, "-shared", "-fPIC", "-fsanitize=address", "-o", str(so), str(tmp_path / "s.c")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"{cc} cannot build with -fsanitize=address: {r.stderr.strip()[-300:]}")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), CCALLOC_LIBRARY=str(so))
    env.pop("LD_PRELOAD", None)
    env.pop("ASAN_OPTIONS", None)
    code = ("import ccalloc\n"
            "try:\n    ccalloc.library_path()\n"
            "except ccalloc.LibraryNotFoundError as e:\n    print('refused:', repr(str(e)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-1000:]}"
    assert r.stdout.startswith("refused:") and str(so) in r.stdout and "LD_PRELOAD" in r.stdout, r.stdout


def test_a_child_forked_while_a_thread_loads_the_library_can_load_it():
    """os.fork() while another thread holds the loader's lock (a first load in
    progress): the child has no such thread, so with the parent's lock copied
    held its first load would wait forever. The package gives the child a new
    lock (os.register_at_fork). Run in a subprocess that has not loaded the
    library yet; the child must load it and exit within the timeout."""
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    code = r"""
import os, threading, time, warnings
from ccalloc import _lib
held, release = threading.Event(), threading.Event()
def holder():
    with _lib._load_lock:  # what a thread inside load() holds
        held.set()
        release.wait()
t = threading.Thread(target=holder)
t.start()
held.wait()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
    pid = os.fork()
if pid == 0:
    try:
        _lib.load()
        os._exit(0)
    except BaseException as e:
        os.write(2, repr(e).encode())
        os._exit(3)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    status = -1
release.set()
t.join()
print("child status", status)
"""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "child status 0", (r.stdout, r.stderr[-2000:])


def test_fork_while_threads_use_an_allocator_of_ones_own():
    """os.fork() while other threads are inside alloc / free / trim / stats
    on an Allocator the program made (ctypes lets go of the GIL there): the
    library's fork handler (fork.c) covers every allocator, so each child
    allocates, frees and checks the copy it inherits: classic segments,
    expandable ones over whole maps (the default) and over pages. A child
    that hangs on a lock a parent thread held ends by its alarm: exit by
    signal, a failure."""
    import threading

    stop = threading.Event()
    with ccalloc.Allocator(capacity="256M", conf="expandable:0") as a, ccalloc.Allocator(
        capacity="256M", conf="expandable:1"
    ) as b, ccalloc.Allocator(capacity="256M", conf="expandable:1", vm_backing="pages") as c:

        def churn(alloc_in):
            while not stop.is_set():
                ps = [alloc_in.alloc(n) for n in (4096, 3 * MiB, 12 * MiB)]
                alloc_in.stats()
                for p in ps:
                    alloc_in.free(p)
                alloc_in.trim(0)

        threads = [threading.Thread(target=churn, args=(x,)) for x in (a, a, b, c)]
        for t in threads:
            t.start()

        def child():
            ok = True
            for x in (a, b, c):
                # the parent threads' blocks, copied; requested bytes, as the
                # block may keep an unsplit remainder of a free block they left
                held = x.stats()["requested_bytes"]
                p = x.alloc(5 * MiB)
                ok = ok and x.stats()["requested_bytes"] == held + 5 * MiB
                x.free(p)
                x.empty_cache()
                x.check()
            return ok

        try:
            failed = fork_children(child, 40)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert failed is None, f"a child failed (fork number, wait status): {failed}"
        assert [x.stats()["page_size"] for x in (a, b, c)] == [0, 2 * MiB, 2 * MiB]
        assert [x.stats()["vm_backing"] for x in (b, c)] == [0, 1]  # whole maps, pages
        for x in (a, b, c):
            assert x.stats()["allocated_bytes"] == 0
            x.check()


def test_vm_backing_reaches_the_upstream():
    """``Allocator(..., vm_backing=)``: None and "whole_maps" leave the
    upstream in whole maps (cca_upstream_vm_backing 0, CCA_VM_WHOLE_MAPS,
    the default), "pages" makes it pages (1, CCA_VM_PAGES), on the simulated
    device, and the allocator's stats say the same; on a CUDA device the
    same argument reaches cca_cuda_options (no GPU: NoDeviceError, after
    the checks)."""
    for arg in (None, "whole_maps"):
        with ccalloc.Allocator("64M", conf="expandable:1", vm_backing=arg) as a:
            assert a._lib.cca_upstream_vm_backing(a._upstream) == 0, arg
            a.free(a.alloc(4096))
            assert a.stats()["vm_backing"] == 0, arg
    with ccalloc.Allocator("64M", conf="expandable:1", vm_backing="pages") as a:
        assert a._lib.cca_upstream_vm_backing(a._upstream) == 1
        a.free(a.alloc(4096))
        assert a.stats()["vm_backing"] == 1


def test_host_memory_is_handed_to_the_c_options(monkeypatch):
    """What each host_memory becomes in cca_cuda_options (no GPU:
    NoDeviceError after the checks); refused before any device is made: another
    str, another type, and any value for the simulated device."""
    seen = []
    lib = _lib.load(None)
    real = lib.cca_upstream_cuda_create_with

    def spy(opts, out):
        seen.append(ctypes.cast(opts, ctypes.POINTER(_lib.CudaOptions)).contents.host_memory)
        return real(opts, out)
    monkeypatch.setattr(lib, "cca_upstream_cuda_create_with", spy)
    for arg, want in ((None, 0), ("pinned", 0), ("registered", 1)):
        seen.clear()
        try:
            ccalloc.Allocator(device=0, host_memory=arg).close()
        except ccalloc.NoDeviceError:
            pass
        assert seen == [want], arg
    seen.clear()
    for bad in ("Pinned", "pageable", "", "registered\0"):
        with pytest.raises(ccalloc.InvalidArgumentError, match="neither 'pinned' nor 'registered'"):
            ccalloc.Allocator(device=0, host_memory=bad)
    for bad in (1, b"pinned", True):
        with pytest.raises(TypeError, match="host_memory is None, 'pinned' or 'registered'"):
            ccalloc.Allocator(device=0, host_memory=bad)
    for arg in ("pinned", "registered"):
        with pytest.raises(ccalloc.InvalidArgumentError, match="an option of a CUDA device"):
            ccalloc.Allocator("64M", host_memory=arg)
    assert seen == []


def test_vm_backing_is_handed_to_the_c_options(monkeypatch):
    """What each vm_backing becomes in cca_host_options / cca_cuda_options."""
    seen = []
    lib = _lib.load(None)
    for fn in ("cca_upstream_host_create_with", "cca_upstream_cuda_create_with"):
        real = getattr(lib, fn)

        def spy(opts, out, real=real, fn=fn):
            kind = _lib.HostOptions if fn.startswith("cca_upstream_host") else _lib.CudaOptions
            seen.append((fn, ctypes.cast(opts, ctypes.POINTER(kind)).contents.vm_backing))
            return real(opts, out)
        monkeypatch.setattr(lib, fn, spy)
    for arg, want in ((None, 0), ("whole_maps", 0), ("pages", 1)):
        seen.clear()
        ccalloc.Allocator("64M", vm_backing=arg).close()
        assert seen == [("cca_upstream_host_create_with", want)], arg
        seen.clear()
        try:
            ccalloc.Allocator(device=0, vm_backing=arg).close()
        except ccalloc.NoDeviceError:
            pass
        assert seen == [("cca_upstream_cuda_create_with", want)], arg


def test_vm_granularity_is_the_page_of_expandable_segments():
    """``Allocator(..., vm_granularity=)``: the simulated device's page
    (stats' page_size with expandable:1; one 8 MiB page mapped for a 4 KiB
    request in the small pool's range, a trim gives it back whole); a size
    the C library refuses raises InvalidArgumentError with its message; on
    a CUDA device the same argument reaches cca_cuda_options (a build or
    machine without a GPU: NoDeviceError after the argument checks, so a
    bad page is refused first)."""
    with ccalloc.Allocator("64M", conf="expandable:1", vm_granularity="8M") as a:
        p = a.alloc(4096)
        s = a.stats()
        assert s["page_size"] == 8 * MiB
        assert s["mapped_bytes"] == 8 * MiB
        a.free(p)
        r = a.trim(0)
        assert (r.pages_unmapped, r.bytes_unmapped) == (1, 8 * MiB)
        assert a.stats()["mapped_bytes"] == 0
    with ccalloc.Allocator("64M", conf="expandable:1") as a:
        a.free(a.alloc(4096))
        assert a.stats()["page_size"] == 2 * MiB, "None: the simulated device's 2 MiB"
    for bad in ("3M", 100, 3 << 20):
        with pytest.raises(ccalloc.InvalidArgumentError):
            ccalloc.Allocator("64M", vm_granularity=bad)
    # a page larger than the device: not one fits (it was taken, and every
    # allocation then failed); a page of the whole device is taken
    for bad in ("128M", "1G", 2**63):
        with pytest.raises(ccalloc.InvalidArgumentError, match="not one page fits"):
            ccalloc.Allocator("64M", vm_granularity=bad)
    with ccalloc.Allocator("64M", conf="expandable:1", vm_granularity="64M") as a:
        a.free(a.alloc(1))
    # a page with a fraction of a byte is no power of two: refused, never
    # taken as the whole page below it
    for bad in ("4096.5", "2.0000001M"):
        with pytest.raises(ccalloc.InvalidArgumentError, match=r"not a whole number of bytes"):
            ccalloc.Allocator("64M", vm_granularity=bad)
        with pytest.raises(ccalloc.InvalidArgumentError, match=r"not a whole number of bytes"):
            ccalloc.Allocator(device=0, vm_granularity=bad)
    with pytest.raises(ccalloc.InvalidArgumentError, match="not a power of two"):
        ccalloc.Allocator(device=0, vm_granularity="3M")
    try:
        ccalloc.Allocator(device=0, vm_granularity="8M").close()
    except ccalloc.NoDeviceError:
        pass


def test_the_search_order_of_the_checkout_builds(monkeypatch, tmp_path):
    """candidates(), as _lib's docstring orders them: build/ first, then every
    other build*/ directory in name order (a file named build* is no build),
    the bundled copy, the install prefixes, find_library last; with
    CCALLOC_LIBRARY set, that alone. Outside a checkout (no
    allocator/include/ccalloc.h three levels up) no checkout build is tried."""
    import ctypes.util

    monkeypatch.delenv("CCALLOC_LIBRARY", raising=False)
    for d in ("build-b", "build", "build-a"):
        (tmp_path / d / "allocator").mkdir(parents=True)
    (tmp_path / "build-notes").write_text("")
    monkeypatch.setattr(_lib, "_checkout_root", lambda: tmp_path)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libccalloc.so.7" if name == "ccalloc" else None)
    found = _lib.candidates()
    builds = [(o, p) for o, p in found if o == "checkout build"]
    assert builds == [("checkout build", str(tmp_path / d / "allocator" / n))
                      for d in ("build", "build-a", "build-b") for n in ("libccalloc.so", "libccalloc.dylib")]
    assert found[:len(builds) + 1] == builds + [("bundled with the package", str(_lib.bundled_path()))]
    assert found[-1] == ("ctypes.util.find_library('ccalloc')", "libccalloc.so.7")
    monkeypatch.setenv("CCALLOC_LIBRARY", "/x/libccalloc.so")
    assert _lib.candidates() == [("CCALLOC_LIBRARY", "/x/libccalloc.so")]

    monkeypatch.undo()
    monkeypatch.setattr(_lib, "__file__", str(tmp_path / "lib" / "python3" / "ccalloc" / "_lib.py"))
    assert _lib._checkout_root() is None
    monkeypatch.setattr(_lib, "__file__", "/app/ccalloc/_lib.py")  # too near the root for a checkout
    assert _lib._checkout_root() is None
    (tmp_path / "allocator" / "include").mkdir(parents=True)
    (tmp_path / "allocator" / "include" / "ccalloc.h").write_text("")
    monkeypatch.setattr(_lib, "__file__", str(tmp_path / "allocator" / "python" / "ccalloc" / "_lib.py"))
    assert _lib._checkout_root() == tmp_path.resolve()


def _elf(bits, phdrs, size, data=1, phentsize=None):
    """A synthetic ELF file's bytes, `size` long: the header (class `bits`,
    EI_DATA `data`: 1 little-, 2 big-endian) and the program headers
    `phdrs` [(p_type, p_offset, p_filesz)] right after it."""
    import struct

    o = ">" if data == 2 else "<"
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, data, 1]) + bytes(9)
    if bits == 64:
        ent = 56
        head = struct.pack(o + "16sHHIQQQIHHHHHH", ident, 3, 62, 1, 0, 64, 0, 0, 64,
                           ent if phentsize is None else phentsize, len(phdrs), 0, 0, 0)
        table = b"".join(struct.pack(o + "IIQQQQQQ", t, 5, off, 0, 0, filesz, filesz, 4096) for t, off, filesz in phdrs)
    else:
        ent = 32
        head = struct.pack(o + "16sHHIIIIIHHHHHH", ident, 3, 3, 1, 0, 52, 0, 0, 52,
                           ent if phentsize is None else phentsize, len(phdrs), 0, 0, 0)
        table = b"".join(struct.pack(o + "IIIIIIII", t, off, 0, 0, filesz, filesz, 5, 4096) for t, off, filesz in phdrs)
    out = head + table
    return out + bytes(size - len(out))


def test_a_library_is_truncated_only_short_of_its_last_loadable_segment(tmp_path):
    """_truncated reads the program headers as dlopen maps them: the end of
    the last PT_LOAD segment (not of another kind, PT_DYNAMIC here) is what
    the file must reach; exactly that long is whole. ELF32 and big-endian
    files are read with their own layout; a header that cannot be read
    (EI_DATA neither 1 nor 2, program headers shorter than the layout) is
    left to dlopen (None)."""
    def cut(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        return _lib._truncated(str(p))

    def why(size, need):
        return f"truncated: {size} bytes, its ELF headers describe {need} (an interrupted build or copy?)"

    segments = [(2, 0, 300), (1, 0, 5000)]  # PT_DYNAMIC, PT_LOAD
    assert cut("whole.so", _elf(64, segments, 5000)) is None
    assert cut("longer.so", _elf(64, segments, 5001)) is None
    assert cut("short.so", _elf(64, segments, 4999)) == why(4999, 5000)
    assert cut("big.so", _elf(64, segments, 4999, data=2)) == why(4999, 5000)
    assert cut("elf32.so", _elf(32, [(1, 0, 3000)], 2999)) == why(2999, 3000)
    assert cut("elf32-whole.so", _elf(32, [(1, 0, 3000)], 3000)) is None
    assert cut("no-order.so", _elf(64, segments, 4999, data=0)) is None
    assert cut("small-entries.so", _elf(64, segments, 4999, phentsize=8)) is None
    # an ELF64 file cut inside its 64-byte header (long enough for an ELF32
    # one): no program header to read, left to dlopen, which refuses it
    assert cut("header-cut.so", _elf(64, segments, 4999)[:60]) is None


@pytest.mark.parametrize("marker", [b"__asan_init", b"__tsan_init", b"__ubsan_handle_add_overflow"])
def test_a_sanitizer_build_in_the_search_is_skipped(monkeypatch, tmp_path, marker):
    """A checkout build made with ASan, TSan or UBSan (it names their
    runtime's entry points) is skipped with its reason, never loaded; named in
    CCALLOC_LIBRARY, only ASan's missing runtime refuses it (dlopen decides:
    here the file is no library at all)."""
    so = tmp_path / "libccalloc.so"
    so.write_bytes(b"not a library, but it names " + marker)
    monkeypatch.setattr(_lib, "_loaded", None)
    monkeypatch.setattr(_lib, "candidates", lambda: [("checkout build", str(so))])
    with pytest.raises(ccalloc.LibraryNotFoundError) as e:
        _lib.load()
    assert f"checkout build: {so}: built with a sanitizer" in str(e.value)
    monkeypatch.setattr(_lib, "candidates", lambda: [("CCALLOC_LIBRARY", str(so))])
    if marker == b"__asan_init":  # ASan's runtime is not in this process
        monkeypatch.delenv("ASAN_OPTIONS", raising=False)
        with pytest.raises(ccalloc.LibraryNotFoundError) as e:
            _lib.load()
        assert f"CCALLOC_LIBRARY: {so}: built with AddressSanitizer, whose runtime" in str(e.value)
        # ASAN_OPTIONS=verify_asan_link_order=0 turns ASan's check off: loading is left to dlopen
        monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=0:verify_asan_link_order=0")
    with pytest.raises(ccalloc.LibraryNotFoundError) as e:
        _lib.load()
    assert f"CCALLOC_LIBRARY: {so}: does not load" in str(e.value)


def test_a_library_without_the_functions_is_not_this_version(monkeypatch):
    """A file that loads but lacks a function the package declares (an older
    build, another library) is passed over with its reason."""
    import _ctypes

    other = getattr(_ctypes, "__file__", None)
    if not other:
        pytest.skip("_ctypes is built into this Python: no other shared library to name")
    monkeypatch.setattr(_lib, "_loaded", None)
    monkeypatch.setattr(_lib, "candidates", lambda: [("checkout build", other)])
    with pytest.raises(ccalloc.LibraryNotFoundError) as e:
        _lib.load()
    assert f"checkout build: {other}: not this version of libccalloc" in str(e.value)


def test_a_library_found_by_name_that_is_not_libccalloc_is_not_this_version(monkeypatch):
    """A name without a directory (find_library's answer) that the loader
    resolves to another library: the file it came from cannot be asked
    (dladdr of cca_create, which it lacks), so it is named as found and
    passed over as not this version, never an AttributeError."""
    import ctypes.util

    other = ctypes.util.find_library("m")
    if not other or os.sep in other:
        pytest.skip(f"no C math library found by name here ({other!r})")
    origin = "ctypes.util.find_library('ccalloc')"
    monkeypatch.setattr(_lib, "_loaded", None)
    monkeypatch.setattr(_lib, "candidates", lambda: [(origin, other)])
    with pytest.raises(ccalloc.LibraryNotFoundError) as e:
        _lib.load()
    lines = str(e.value).splitlines()
    assert lines[0].startswith("libccalloc was found but could not be loaded."), lines
    assert lines[1].startswith(f"  {origin}: {other}: not this version of libccalloc ("), lines


def test_a_library_found_by_name_is_not_judged_by_a_file_of_that_name_here(monkeypatch, tmp_path):
    """A name without a directory is the loader's to resolve (its search
    path, its cache), never a file of the working directory: like the
    other checks made before dlopen, the sanitizer check reads no file for
    a name. A file of that name here that names ASan's entry point once
    made the search skip the library the loader would take."""
    import ctypes.util

    other = ctypes.util.find_library("m")
    if not other or os.sep in other:
        pytest.skip(f"no C math library found by name here ({other!r})")
    origin = "ctypes.util.find_library('ccalloc')"
    (tmp_path / other).write_bytes(b"not the library the loader takes; it names __asan_init")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_lib, "_loaded", None)
    monkeypatch.setattr(_lib, "candidates", lambda: [(origin, other)])
    with pytest.raises(ccalloc.LibraryNotFoundError) as e:
        _lib.load()
    lines = str(e.value).splitlines()
    assert lines[1].startswith(f"  {origin}: {other}: not this version of libccalloc ("), lines


@pytest.mark.parametrize("kind", ["a directory", "a socket"])
def test_a_library_path_that_is_a_directory_or_a_socket_is_refused(monkeypatch, tmp_path, kind):
    """docs/python.md: a path that is not a regular file is refused before
    it is opened, saying what it is (a device and a FIFO: test_hostile.py)."""
    import socket

    path = tmp_path / "libccalloc.so"
    if kind == "a directory":
        path.mkdir()
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    monkeypatch.setattr(_lib, "_loaded", None)
    monkeypatch.setattr(_lib, "candidates", lambda: [("CCALLOC_LIBRARY", str(path))])
    try:
        with pytest.raises(ccalloc.LibraryNotFoundError) as e:
            _lib.load()
    finally:
        if kind == "a socket":
            sock.close()
    assert f"  CCALLOC_LIBRARY: {path}: not a regular file ({kind}); skipped" in str(e.value).splitlines()


def test_the_loaded_library_named_again_another_way_is_the_same(tmp_path, monkeypatch):
    """load(path) compares the file, not the text: a symbolic link to the
    loaded library, or its path relative to the working directory, is the
    library in use, not a second one."""
    good = ccalloc.library_path()
    link = tmp_path / "libccalloc.so"
    link.symlink_to(good)
    assert _lib.load(str(link)) is _lib.load()
    monkeypatch.chdir(os.path.dirname(good))
    assert _lib.load(os.path.join(".", os.path.basename(good))) is _lib.load()
    with ccalloc.Allocator(capacity="8M", library=str(link)) as a:
        a.free(a.alloc(512))
        assert a.stats()["allocated_bytes"] == 0


_LOAD_BY_NAME = """
import sys
import ccalloc
from ccalloc import _lib
good = sys.argv[1]
print("first:", _lib.load(good).path)
try:
    _lib.load("libccalloc-copy.so")
except ccalloc.LibraryNotFoundError as e:
    print("refused:", str(e))
print("still:", _lib.load().path)
"""


def test_a_library_named_without_a_directory_is_refused_when_another_is_loaded(tmp_path):
    """A name without a directory is found by the dynamic linker
    (LD_LIBRARY_PATH here) and only then known: another file than the one
    loaded is refused after all, and the first stays in use. In a subprocess."""
    import shutil
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    good = ccalloc.library_path()
    copy = tmp_path / "libccalloc-copy.so"
    shutil.copyfile(good, copy)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), LD_LIBRARY_PATH=str(tmp_path))
    env.pop("CCALLOC_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", _LOAD_BY_NAME, good], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == [
        f"first: {good}", f"refused: libccalloc is already loaded from {good}; cannot switch to {copy}",
        f"still: {good}"], r.stdout


# A library named without a directory is known by the file the loader took.
# Another file whose name starts with the same name (a versioned copy,
# another package's) mapped below it must not be taken for it: the decoy
# here is mapped at a low address, so it comes first in /proc/self/maps.
_LOAD_BY_NAME_DECOY = """
import ctypes, mmap, os, sys
from ccalloc import _lib
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
at = libc.mmap(1 << 33, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
with open("/proc/self/maps") as maps:
    print("decoy first:", next(line for line in maps if "libccalloc" in line).rstrip().endswith(sys.argv[1]))
print("loaded:", _lib.load("libccalloc-copy.so").path)
"""


def test_a_library_named_without_a_directory_is_the_file_the_loader_took(tmp_path):
    import shutil
    import subprocess
    import sys

    from conftest import PACKAGE_DIR

    copy = tmp_path / "lib" / "libccalloc-copy.so"
    copy.parent.mkdir()
    shutil.copyfile(ccalloc.library_path(), copy)
    decoy = tmp_path / "libccalloc-copy.so.0.1.0"
    decoy.write_bytes(b"\0" * 4096)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR), LD_LIBRARY_PATH=str(copy.parent))
    env.pop("CCALLOC_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", _LOAD_BY_NAME_DECOY, str(decoy)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["decoy first: True", f"loaded: {copy}"], r.stdout
