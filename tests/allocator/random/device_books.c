/* device_books.c — see device_books.h. */
#include "device_books.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool bit(const uint64_t *b, size_t g) {
    return (b[g / 64] >> (g % 64)) & 1;
}

static void set_bit(uint64_t *b, size_t g, bool on) {
    if (on)
        b[g / 64] |= (uint64_t)1 << (g % 64);
    else
        b[g / 64] &= ~((uint64_t)1 << (g % 64));
}

static bool tb_fails(tb *x, int k) {
    uint64_t n = ++x->calls[k], at = x->fail_at[k], c = ++x->call_no;
    if ((at && (n == at || (x->sticky[k] && n > at))) ||
        (x->fail_call && (c == x->fail_call || (x->sticky_call && c > x->fail_call)))) {
        x->injected++;
        return true;
    }
    return false;
}

static cca_status tb_injected(const tb *x, int k, cca_status st) {
    return cca_set_error(st, "%s: injected %s failure", x->name, k == TB_RECORD ? "event_record" : tu_fault_names[k]);
}

int tb_find(const tb *x, uintptr_t lo, uintptr_t hi, bool vm) {
    for (int i = 0; i < x->nr; i++)
        if (x->r[i].vm == vm && lo >= x->r[i].base && hi <= x->r[i].base + x->r[i].size)
            return i;
    return -1;
}

size_t tb_reserved(const tb *x, int owner) {
    size_t sum = 0;
    for (int i = 0; i < x->nr; i++)
        if (owner < 0 || x->r[i].owner == owner)
            sum += x->r[i].vm ? x->r[i].mapped : x->r[i].size;
    return sum;
}

size_t tb_segments(const tb *x, int owner) {
    size_t n = 0;
    for (int i = 0; i < x->nr; i++)
        n += owner < 0 || x->r[i].owner == owner;
    return n;
}

size_t tb_space(const tb *x) {
    size_t sum = 0;
    for (int i = 0; i < x->nr; i++)
        sum += x->r[i].vm ? x->r[i].size : 0;
    return sum;
}

bool tb_mapped(const tb *x, int i, size_t g) {
    return bit(x->r[i].bits, g);
}

bool tb_map_of(const tb *x, int i, size_t g, size_t *first, size_t *end) {
    const tb_range *r = &x->r[i];
    if (!bit(r->bits, g))
        return false;
    size_t lo = g, hi = g + 1, n = r->size / x->page;
    while (!bit(r->starts, lo))
        lo--;
    while (hi < n && bit(r->bits, hi) && !bit(r->starts, hi))
        hi++;
    *first = lo, *end = hi;
    return true;
}

static void tb_add(tb *x, void *base, size_t size, bool vm) {
    cr_assert_lt(x->nr, TB_RANGES, "%s: too many ranges", x->name);
    cr_assert(!vm || size / x->page <= TB_GRANULES, "%s: a range of %zu bytes", x->name, size);
    int owner = x->serving;
    if (owner < 0) {
        x->stray++;
        owner = 0;
    }
    tb_range *r = &x->r[x->nr];
    memset(r, 0, sizeof *r);
    r->base = (uintptr_t)base;
    r->size = size;
    r->vm = vm;
    r->owner = owner;
    r->id = ++x->grants;
    if (x->capturing)
        x->candidate = x->nr;
    x->nr++;
    x->ups[owner]++;
}

static void tb_remove(tb *x, int i) {
    x->downs[x->r[i].owner]++;
    x->call.segments_released++;
    if (x->candidate == x->nr - 1)
        x->candidate = i;
    else if (x->candidate == i)
        x->candidate = -1;
    x->r[i] = x->r[--x->nr];
}

/* Bytes go back: the guard first; in a trim, only while above the budget. */
static void tb_giving(tb *x, const char *what, uintptr_t lo, uintptr_t hi) {
    if (x->guard)
        x->guard(x->user, what, lo, hi);
    if (x->call.trimming && strcmp(what, "vm_release") != 0) /* a release gives back no memory */
        cr_assert_gt(tb_reserved(x, -1), x->call.keep, "%s: trim(%zu) gave %zu bytes back with %zu held", x->name,
                     x->call.keep, (size_t)(hi - lo), tb_reserved(x, -1));
}

static cca_status tb_alloc(void *ctx, size_t size, void **ptr) {
    tb *x = ctx;
    if (tb_fails(x, TU_FAULT_ALLOC))
        return tb_injected(x, TU_FAULT_ALLOC, CCA_ERR_OUT_OF_MEMORY);
    cca_status st = cca_upstream_alloc(x->inner, size, ptr);
    if (st == CCA_OK) {
        x->ok[TU_FAULT_ALLOC]++;
        tb_add(x, *ptr, size, false);
    }
    return st;
}

static cca_status tb_free(void *ctx, void *ptr, size_t size) {
    tb *x = ctx;
    int i = tb_find(x, (uintptr_t)ptr, (uintptr_t)ptr + size, false);
    cr_assert(i >= 0 && x->r[i].base == (uintptr_t)ptr && x->r[i].size == size, "%s: free of %p (%zu) not granted",
              x->name, ptr, size);
    tb_giving(x, "free", (uintptr_t)ptr, (uintptr_t)ptr + size);
    if (tb_fails(x, TU_FAULT_FREE))
        return tb_injected(x, TU_FAULT_FREE, CCA_ERR_UPSTREAM);
    cca_status st = cca_upstream_free(x->inner, ptr, size);
    if (st == CCA_OK) {
        x->ok[TU_FAULT_FREE]++;
        x->call.given_bytes += size;
        tb_remove(x, i);
    }
    return st;
}

static cca_status tb_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    tb *x = ctx;
    return cca_upstream_mem_info(x->inner, free_bytes, total_bytes);
}

void tb_progress_all(tb *x) {
    memcpy(x->done, x->recorded, sizeof x->done);
    x->events_done = x->events_recorded;
}

static cca_status tb_sync(void *ctx) {
    tb *x = ctx;
    if (tb_fails(x, TU_FAULT_SYNC)) {
        x->call.syncs_failed++;
        return tb_injected(x, TU_FAULT_SYNC, CCA_ERR_UPSTREAM);
    }
    cca_status st = cca_upstream_synchronize(x->inner);
    if (st == CCA_OK) {
        x->ok[TU_FAULT_SYNC]++;
        x->call.syncs_ok++;
        if (!x->sync_keeps)
            tb_progress_all(x);
    }
    return st;
}

static int stream_index(const tb *x, cca_stream s) {
    for (int i = 0; i < x->nstreams; i++)
        if (x->streams[i] == s)
            return i;
    cr_assert_fail("%s: an event recorded on stream %p, which the test does not use", x->name, s);
    return -1;
}

static tb_event not_an_event; /* what a refused record leaves in *event */

static cca_status tb_event_record(void *ctx, cca_stream s, void **event) {
    tb *x = ctx;
    int i = stream_index(x, s);
    int n = x->call.nrec++ < 8 ? x->call.nrec - 1 : 7; /* the log keeps the first 8 of the call */
    if (n == x->call.nrec - 1) {
        x->call.rec_stream[n] = i;
        x->call.rec_seq[n] = 0;
    }
    if (tb_fails(x, TB_RECORD)) {
        x->call.records_failed++;
        *event = &not_an_event;
        return tb_injected(x, TB_RECORD, CCA_ERR_UPSTREAM);
    }
    tb_event *e = malloc(sizeof *e);
    cr_assert_not_null(e);
    e->stream = i;
    e->seq = ++x->recorded[i];
    x->events_recorded++;
    if (!x->busy[i])
        x->done[i] = e->seq;
    if (n == x->call.nrec - 1)
        x->call.rec_seq[n] = e->seq;
    x->events_live++;
    x->ok[TB_RECORD]++;
    *event = e;
    return CCA_OK;
}

static cca_status tb_event_query(void *ctx, void *event) {
    tb *x = ctx;
    const tb_event *e = event;
    cr_assert(e != &not_an_event, "%s: query of what a refused event_record left in *event", x->name);
    return e->seq <= x->done[e->stream] ? CCA_OK : CCA_ERR_NOT_READY;
}

static cca_status tb_event_destroy(void *ctx, void *event) {
    tb *x = ctx;
    cr_assert(event != &not_an_event, "%s: destroy of what a refused event_record left in *event", x->name);
    cr_assert_gt(x->events_live, 0);
    x->events_live--;
    free(event);
    return CCA_OK;
}

static cca_status tb_vm_granularity(void *ctx, size_t *bytes) {
    tb *x = ctx;
    return cca_upstream_vm_granularity(x->inner, bytes);
}

static cca_status tb_vm_reserve(void *ctx, size_t size, void **base) {
    tb *x = ctx;
    if (tb_fails(x, TU_FAULT_RESERVE))
        return tb_injected(x, TU_FAULT_RESERVE, CCA_ERR_OUT_OF_MEMORY);
    cca_status st = cca_upstream_vm_reserve(x->inner, size, base);
    if (st == CCA_OK) {
        x->ok[TU_FAULT_RESERVE]++;
        tb_add(x, *base, size, true);
    }
    return st;
}

static cca_status tb_vm_release(void *ctx, void *base, size_t size) {
    tb *x = ctx;
    int i = tb_find(x, (uintptr_t)base, (uintptr_t)base + size, true);
    cr_assert(i >= 0 && x->r[i].base == (uintptr_t)base && x->r[i].size == size,
              "%s: release of range %p (%zu) not reserved", x->name, base, size);
    tb_giving(x, "vm_release", (uintptr_t)base, (uintptr_t)base + size);
    if (tb_fails(x, TU_FAULT_RELEASE))
        return tb_injected(x, TU_FAULT_RELEASE, CCA_ERR_UPSTREAM);
    cca_status st = cca_upstream_vm_release(x->inner, base, size);
    if (st == CCA_OK) {
        cr_assert_eq(x->r[i].mapped, 0, "%s: range %p released with %zu bytes mapped", x->name, base, x->r[i].mapped);
        x->ok[TU_FAULT_RELEASE]++;
        tb_remove(x, i);
    }
    return st;
}

static cca_status tb_vm_map(void *ctx, void *addr, size_t size) {
    tb *x = ctx;
    int i = tb_find(x, (uintptr_t)addr, (uintptr_t)addr + size, true);
    cr_assert(i >= 0, "%s: map of %p (%zu) outside every range", x->name, addr, size);
    if (tb_fails(x, TU_FAULT_MAP))
        return tb_injected(x, TU_FAULT_MAP, CCA_ERR_OUT_OF_MEMORY);
    cca_status st = cca_upstream_vm_map(x->inner, addr, size);
    if (st != CCA_OK)
        return st;
    tb_range *r = &x->r[i];
    set_bit(r->starts, ((uintptr_t)addr - r->base) / x->page, true);
    for (size_t g = ((uintptr_t)addr - r->base) / x->page, n = size / x->page; n--; g++) {
        cr_assert(!bit(r->bits, g), "%s: granule %zu of %p mapped twice", x->name, g, (void *)r->base);
        set_bit(r->bits, g, true);
        set_bit(r->fresh, g, true);
    }
    r->mapped += size;
    x->granules_mapped += size / x->page;
    x->ok[TU_FAULT_MAP]++;
    x->ups[r->owner]++;
    return st;
}

static cca_status tb_vm_unmap(void *ctx, void *addr, size_t size) {
    tb *x = ctx;
    int i = tb_find(x, (uintptr_t)addr, (uintptr_t)addr + size, true);
    cr_assert(i >= 0, "%s: unmap of %p (%zu) outside every range", x->name, addr, size);
    tb_range *r = &x->r[i];
    size_t g0 = ((uintptr_t)addr - r->base) / x->page, n = size / x->page;
    bool fresh = true;
    for (size_t g = g0; g < g0 + n; g++)
        fresh &= bit(r->fresh, g);
    if (x->whole) { /* whole maps: it starts at a map's start and ends at a map's end */
        size_t first, end;
        cr_assert(tb_map_of(x, i, g0, &first, &end) && first == g0, "%s: unmap of %p (%zu) starts inside a map",
                  x->name, addr, size);
        cr_assert(tb_map_of(x, i, g0 + n - 1, &first, &end) && end == g0 + n, "%s: unmap of %p (%zu) ends inside a map",
                  x->name, addr, size);
    }
    cr_assert(!x->check_calls || fresh || x->call.syncs_ok > 0,
              "%s: unmap of %p (%zu) with no synchronize that succeeded in this call (queued work may use it)",
              x->name, addr, size);
    tb_giving(x, "vm_unmap", (uintptr_t)addr, (uintptr_t)addr + size);
    if (tb_fails(x, TU_FAULT_UNMAP))
        return tb_injected(x, TU_FAULT_UNMAP, CCA_ERR_UPSTREAM);
    cca_status st = cca_upstream_vm_unmap(x->inner, addr, size);
    if (st != CCA_OK)
        return st;
    for (size_t g = g0; g < g0 + n; g++) {
        cr_assert(bit(r->bits, g), "%s: granule %zu of %p unmapped but not mapped", x->name, g, (void *)r->base);
        set_bit(r->bits, g, false);
        set_bit(r->fresh, g, false);
        set_bit(r->starts, g, false);
    }
    for (size_t g = g0; g < g0 + n; g += n > 1 ? n - 1 : 1) /* its first and last granules */
        cr_assert_eq(tu_probe((char *)r->base + g * x->page), EFAULT, "%s: an unmapped granule is still accessible",
                     x->name);
    r->mapped -= size;
    x->granules_unmapped += n;
    x->call.given_bytes += size;
    x->call.given_pages += n;
    x->ok[TU_FAULT_UNMAP]++;
    x->downs[r->owner]++;
    return st;
}

cca_upstream *tb_create(tb *x, cca_upstream *inner, const char *name, size_t page, const cca_stream *streams,
                        int nstreams) {
    memset(x, 0, sizeof *x);
    cr_assert_leq(nstreams, TB_STREAMS);
    x->inner = inner;
    x->name = name;
    x->page = page;
    x->whole = cca_upstream_vm_backing(inner) == CCA_VM_WHOLE_MAPS;
    x->serving = -1;
    x->candidate = -1;
    x->nstreams = nstreams;
    for (int i = 0; i < nstreams; i++) {
        x->streams[i] = streams[i];
        x->busy[i] = true;
    }
    cca_upstream_ops ops = {
        .alloc = tb_alloc,
        .free = tb_free,
        .mem_info = tb_mem_info,
        .synchronize = tb_sync,
        .name = name,
        .vm_granularity = tb_vm_granularity,
        .vm_reserve = tb_vm_reserve,
        .vm_release = tb_vm_release,
        .vm_map = tb_vm_map,
        .vm_unmap = tb_vm_unmap,
        .vm_backing = x->whole ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES,
    };
    if (nstreams) {
        ops.event_record = tb_event_record;
        ops.event_query = tb_event_query;
        ops.event_destroy = tb_event_destroy;
    }
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, x, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

void tb_faults_off(tb *x) {
    memset(x->fail_at, 0, sizeof x->fail_at);
    memset(x->sticky, 0, sizeof x->sticky);
    x->fail_call = 0;
    x->sticky_call = false;
}

void tb_call_begin(tb *x) {
    memset(&x->call, 0, sizeof x->call);
    for (int i = 0; i < x->nr; i++)
        memset(x->r[i].fresh, 0, sizeof x->r[i].fresh);
}
