/*
 * upstream.c — the wrapper every upstream sits behind (docs/allocator.md,
 * "Upstreams").
 *
 * - An upstream is an ops table (ccalloc.h, cca_upstream_ops) plus a
 *   context; the simulated device, CUDA and test doubles are all tables.
 *   This file adds what each needs once: argument checks, a lock around
 *   the accounting, the counters of cca_upstream_stats (bytes in use now
 *   and at peak, live allocations, calls). So "the upstream holds nothing
 *   for this allocator" is checkable whatever the ops are.
 * - Contract of the ops (0 = success, preconditions):
 *     alloc(size > 0, size % CCA_GRANULARITY == 0) -> CCA_ALIGNMENT-aligned
 *         ptr, ptr + size not past the top of the address space (else
 *         given back)
 *     free(ptr, size) with exactly the pair alloc returned
 *     mem_info / synchronize / stream_synchronize / events: optional,
 *     defaults in ccalloc.h
 * - The ops' own locking is theirs; the wrapper's lock covers only the
 *   counters, so a slow cudaMalloc does not serialize unrelated accounting.
 * - Messages (op_begin / op_end around every op): the thread's message is
 *   saved and cleared before the op, then
 *     op succeeded (event_query: any answer) -> the saved message put back;
 *     op failed and said why                 -> its message stands;
 *     op failed silently -> "upstream 'NAME' alloc of N bytes failed
 *         (STATUS)", never the previous call's message (which trim or the
 *         greedy cca_create would otherwise wrap as the cause).
 *   Cost: a strlen and a copy of the (usually empty) message per op.
 */
#include "upstream.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_guard {
    char saved[CCAI_ERROR_CAP]; /* the caller's message, whole */
} op_guard;

static void op_begin(op_guard *g) {
    /* an op may log: called under an allocator's lock, it is called with the
     * log held (ccai_upstream_op), so no line reaches the sink under it */
    ccai_assert(ccai_mutexes_held == 0 || ccai_log_holding());
    ccai_error_save(g->saved);
    if (g->saved[0])
        cca_clear_error();
}

/* After the op: st is its status, `ok` whether that is a success. For a
 * silent failure, `what` (printf-style) names the op and its arguments. */
static cca_status op_end(const op_guard *g, const cca_upstream *u, cca_status st, bool ok, const char *what, ...)
    CCA_PRINTF(5, 6);
static cca_status op_end(const op_guard *g, const cca_upstream *u, cca_status st, bool ok, const char *what, ...) {
    if (ok) {
        if (g->saved[0] || cca_last_error()[0])
            cca_set_error(st, "%s", g->saved);
        return st;
    }
    if (cca_last_error()[0])
        return st;
    char op[160];
    va_list ap;
    va_start(ap, what);
    vsnprintf(op, sizeof op, what, ap);
    va_end(ap);
    return cca_set_error(st, "upstream '%s' %s failed (%s)", u->name, op, cca_status_string(st));
}

/* A name cut to its buffer may end inside a UTF-8 sequence: drop that
 * partial sequence (its lead byte and the continuation bytes after it).
 * Malformed bytes elsewhere are left to the writers ('?'). */
static void utf8_cut(char *name) {
    size_t n = strlen(name), i = n;
    while (i > 0 && n - i < 3 && ((unsigned char)name[i - 1] & 0xc0) == 0x80)
        i--;
    if (i == 0)
        return;
    unsigned char lead = (unsigned char)name[i - 1];
    size_t want = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (want > n - (i - 1)) /* fewer bytes than the lead byte announces */
        name[i - 1] = '\0';
}

/* fork.c's UPSTREAM rank: every lock of u (the wrapper's counting lock
 * and, through the device's hooks, its own) taken before a fork and given
 * back after it; in the child, the device's state fixed first (the
 * simulated device's copy engine emptied: its thread is not in the child).
 * None is ever held while another ccalloc lock is taken. */
static void fork_take(ccai_fork_link *l) {
    cca_upstream *u = (cca_upstream *)((char *)l - offsetof(cca_upstream, fork));
    pthread_mutex_lock(&u->lock);
    if (u->fork_lock)
        u->fork_lock(u->ctx, true);
}

static void fork_give(ccai_fork_link *l, bool child) {
    cca_upstream *u = (cca_upstream *)((char *)l - offsetof(cca_upstream, fork));
    if (child && u->fork_child)
        u->fork_child(u->ctx);
    if (u->fork_lock)
        u->fork_lock(u->ctx, false);
    pthread_mutex_unlock(&u->lock);
}

cca_status ccai_upstream_wrap(const cca_upstream_ops *ops, void *ctx, cca_upstream **out, const char *fn) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!ops || !ops->alloc || !ops->free)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: ops, ops->alloc and ops->free are required", fn);
    bool some_events = ops->event_record || ops->event_query || ops->event_destroy;
    bool all_events = ops->event_record && ops->event_query && ops->event_destroy;
    if (some_events && !all_events)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "%s: event_record, event_query and event_destroy go together (all or none)", fn);
    int vm = !!ops->vm_granularity + !!ops->vm_reserve + !!ops->vm_release + !!ops->vm_map + !!ops->vm_unmap;
    if (vm != 0 && vm != 5)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: the five vm_* ops go together (all or none)", fn);
    int copy = !!ops->host_alloc + !!ops->host_free + !!ops->copy + !!ops->copy_wait;
    if (copy != 0 && copy != 4)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: host_alloc, host_free, copy and copy_wait go together (all or none)", fn);
    if (ops->vm_backing != CCA_VM_PAGES && ops->vm_backing != CCA_VM_WHOLE_MAPS)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: vm_backing %d is neither CCA_VM_WHOLE_MAPS (0) nor CCA_VM_PAGES (1)",
                         fn, ops->vm_backing);
    cca_upstream *u = calloc(1, sizeof *u);
    if (!u)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed", fn);
    u->ops = *ops;
    u->ctx = ctx;
    if (snprintf(u->name, sizeof u->name, "%s", ops->name ? ops->name : "custom") >= (int)sizeof u->name)
        utf8_cut(u->name);
    u->ops.name = u->name;
    pthread_mutex_init(&u->lock, NULL);
    u->fork = (ccai_fork_link){.take = fork_take, .give = fork_give};
    ccai_fork_register(CCAI_FORK_UPSTREAM, &u->fork);
    *out = u;
    return CCA_OK;
}

cca_status cca_upstream_custom_create(const cca_upstream_ops *ops, void *ctx, cca_upstream **out) {
    return ccai_upstream_wrap(ops, ctx, out, "cca_upstream_custom_create");
}

void cca_upstream_destroy(cca_upstream *u) {
    if (!u)
        return;
    ccai_fork_unregister(CCAI_FORK_UPSTREAM, &u->fork); /* first: a fork from now on does not take its locks */
    if (u->ops.destroy)
        u->ops.destroy(u->ctx);
    pthread_mutex_destroy(&u->lock);
    free(u);
}

const char *cca_upstream_name(const cca_upstream *u) {
    return u ? u->name : "(null)";
}

/* Memory given back is uncounted BEFORE the op that gives it back, memory
 * taken counted after the op that takes it: the moment the device has the
 * memory back, another thread may take it and count it, so a free counted
 * after its op would let bytes_in_use, and its peak, say for a while that
 * the device held more than it has. This way they never exceed what the
 * device holds. A failed op counts its memory again (restore); a size the
 * counts do not hold (a caller's wrong pointer or size) is left to after
 * the op, as the op's verdict decides. `allocation`: a classic allocation
 * (counted in allocations), else mapped pages (vm_mapped_bytes). */
static void count_back(cca_upstream *u, size_t size, bool allocation, int sign) {
    if (sign < 0) {
        u->stats.bytes_in_use -= size;
        if (allocation)
            u->stats.allocations--;
        else
            u->stats.vm_mapped_bytes -= size;
        return;
    }
    u->stats.bytes_in_use += size;
    if (u->stats.bytes_in_use > u->stats.bytes_in_use_peak)
        u->stats.bytes_in_use_peak = u->stats.bytes_in_use;
    if (allocation)
        u->stats.allocations++;
    else
        u->stats.vm_mapped_bytes += size;
}

/* Before a free or unmap: true when its memory was uncounted now. */
static bool uncount_before(cca_upstream *u, size_t size, bool allocation) {
    pthread_mutex_lock(&u->lock);
    bool held =
        u->stats.bytes_in_use >= size && (allocation ? u->stats.allocations > 0 : u->stats.vm_mapped_bytes >= size);
    if (held)
        count_back(u, size, allocation, -1);
    pthread_mutex_unlock(&u->lock);
    return held;
}

/* After it: the call counted, and the counts made right for its verdict. */
static void uncount_after(cca_upstream *u, size_t size, bool allocation, bool uncounted, bool ok) {
    pthread_mutex_lock(&u->lock);
    if (ok && allocation)
        u->stats.free_calls++;
    else if (ok)
        u->stats.vm_unmap_calls++;
    if (ok && !uncounted)
        count_back(u, size, allocation, -1);
    else if (!ok && uncounted)
        count_back(u, size, allocation, +1);
    pthread_mutex_unlock(&u->lock);
}

/* [p, p + size) from an op that claimed success ends past the top of the
 * address space: p + size wraps, or is exactly 2^64. Unusable: the
 * allocator keeps every end as a number, and a block would end below
 * where it starts. */
#define PAST_TOP "whose end passes the top of the address space"
static bool passes_top(const void *p, size_t size) {
    return size > UINTPTR_MAX - (uintptr_t)p;
}

cca_status cca_upstream_alloc(cca_upstream *u, size_t size, void **ptr) {
    if (!u || !ptr)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc: NULL argument");
    *ptr = NULL;
    if (size == 0 || size % CCA_GRANULARITY)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc: size %zu is not a positive multiple of %u",
                         size, CCA_GRANULARITY);
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.alloc(u->ctx, size, ptr);
    bool no_pointer = st == CCA_OK && !*ptr;
    bool misaligned = st == CCA_OK && *ptr && (uintptr_t)*ptr % CCA_ALIGNMENT;
    if (misaligned || (st == CCA_OK && *ptr && passes_top(*ptr, size))) {
        /* unusable: every block must start on CCA_ALIGNMENT and end below the top; given back */
        void *bad = *ptr;
        cca_status back = u->ops.free(u->ctx, bad, size);
        pthread_mutex_lock(&u->lock);
        u->stats.failed_allocs++;
        pthread_mutex_unlock(&u->lock);
        *ptr = NULL;
        char why[64] = PAST_TOP;
        if (misaligned)
            snprintf(why, sizeof why, "not a multiple of %u bytes", CCA_ALIGNMENT);
        return cca_set_error(CCA_ERR_UPSTREAM, "upstream '%s' alloc of %zu bytes returned %p, %s%s", u->name, size, bad,
                         why, back == CCA_OK ? " (given back)" : " (and its free was refused)");
    }
    pthread_mutex_lock(&u->lock);
    if (st == CCA_OK && *ptr) {
        u->stats.alloc_calls++;
        count_back(u, size, true, +1);
    } else {
        u->stats.failed_allocs++;
        if (st == CCA_OK)
            st = CCA_ERR_UPSTREAM; /* an upstream must not return OK with NULL */
        *ptr = NULL;
    }
    pthread_mutex_unlock(&u->lock);
    if (no_pointer) /* whatever the op wrote: it claimed success */
        return cca_set_error(st, "upstream '%s' alloc of %zu bytes returned CCA_OK without a pointer", u->name, size);
    return op_end(&g, u, st, st == CCA_OK, "alloc of %zu bytes", size);
}

cca_status cca_upstream_free(cca_upstream *u, void *ptr, size_t size) {
    if (!u || !ptr)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_free: NULL argument");
    op_guard g;
    op_begin(&g);
    bool uncounted = uncount_before(u, size, true);
    cca_status st = u->ops.free(u->ctx, ptr, size);
    uncount_after(u, size, true, uncounted, st == CCA_OK);
    return op_end(&g, u, st, st == CCA_OK, "free of %p (%zu bytes)", ptr, size);
}

cca_status cca_upstream_mem_info(cca_upstream *u, size_t *free_bytes, size_t *total_bytes) {
    if (!u || !free_bytes || !total_bytes)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_mem_info: NULL argument");
    if (!u->ops.mem_info)
        return cca_set_error(CCA_ERR_UPSTREAM, "upstream '%s' cannot report memory info", u->name);
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.mem_info(u->ctx, free_bytes, total_bytes);
    return op_end(&g, u, st, st == CCA_OK, "mem_info");
}

cca_status cca_upstream_synchronize(cca_upstream *u) {
    if (!u)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_synchronize: upstream is NULL");
    if (!u->ops.synchronize)
        return CCA_OK;
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.synchronize(u->ctx);
    return op_end(&g, u, st, st == CCA_OK, "synchronize");
}

cca_status cca_upstream_stream_synchronize(cca_upstream *u, cca_stream stream) {
    if (!u)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_stream_synchronize: upstream is NULL");
    if (!u->ops.stream_synchronize)
        return cca_upstream_synchronize(u);
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.stream_synchronize(u->ctx, stream);
    return op_end(&g, u, st, st == CCA_OK, "stream_synchronize of stream %p", stream);
}

cca_status cca_upstream_get_stats(cca_upstream *u, cca_upstream_stats *s) {
    if (!u || !s)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_get_stats: NULL argument");
    pthread_mutex_lock(&u->lock);
    *s = u->stats;
    pthread_mutex_unlock(&u->lock);
    return CCA_OK;
}

/* ---- virtual memory ---------------------------------------------------------
 * The wrapper checks what it can without the upstream's state (NULLs, zero
 * sizes, alignment to the granularity, asked once and kept) and counts;
 * the upstream enforces the rules that need its state (inside a reserved
 * range, no overlap with a mapped granule, an unmap naming only mapped
 * granules, release only when nothing is mapped). */

int cca_upstream_has_vm(const cca_upstream *u) {
    return u && u->ops.vm_map != NULL;
}

int cca_upstream_vm_backing(const cca_upstream *u) {
    return cca_upstream_has_vm(u) ? u->ops.vm_backing : CCA_VM_PAGES;
}

void ccai_upstream_set_no_vm_reason(cca_upstream *u, const char *why) {
    snprintf(u->no_vm_reason, sizeof u->no_vm_reason, "%s", why);
}

/* "upstream 'NAME' has no virtual-memory operations[: WHY]" into buf. */
static const char *no_vm(const cca_upstream *u, char *buf, size_t len) {
    snprintf(buf, len, "upstream '%s' has no virtual-memory operations%s%s", u->name, u->no_vm_reason[0] ? ": " : "",
             u->no_vm_reason);
    return buf;
}

void ccai_upstream_log_no_vm(cca_upstream *u, bool asked) {
    if (!asked || cca_upstream_has_vm(u) || !u->no_vm_reason[0]) /* made without vm ops: its maker's choice */
        return;
    pthread_mutex_lock(&u->lock);
    bool first = !u->no_vm_logged;
    u->no_vm_logged = true;
    pthread_mutex_unlock(&u->lock);
    char why[256];
    if (first)
        ccai_log("expandable segments need virtual memory, but %s; using classic segments",
                 no_vm(u, why, sizeof why));
}

cca_status cca_upstream_vm_granularity(cca_upstream *u, size_t *bytes) {
    if (!u || !bytes)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_granularity: NULL argument");
    *bytes = 0;
    char why[256];
    if (!u->ops.vm_granularity)
        return cca_set_error(CCA_ERR_UPSTREAM, "%s", no_vm(u, why, sizeof why));
    pthread_mutex_lock(&u->lock);
    size_t g = u->vm_granularity;
    pthread_mutex_unlock(&u->lock);
    if (g) {
        *bytes = g;
        return CCA_OK;
    }
    op_guard gd;
    op_begin(&gd);
    cca_status st = u->ops.vm_granularity(u->ctx, &g);
    if (st == CCA_OK && (g == 0 || g % CCA_GRANULARITY || (g & (g - 1))))
        return cca_set_error(CCA_ERR_UPSTREAM, "upstream '%s' reported a granularity of %zu bytes: not a power of two "
                         "multiple of %u", u->name, g, CCA_GRANULARITY);
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->vm_granularity = g;
        pthread_mutex_unlock(&u->lock);
        *bytes = g;
    }
    return op_end(&gd, u, st, st == CCA_OK, "vm_granularity");
}

/* Size and (when given) address: non-zero multiples of the granularity. */
/* The checks every vm_* wrapper makes before calling the upstream: u (and,
 * except for vm_reserve, addr) not NULL, the ops present, and address and
 * size multiples of the granularity (returned in *gran). */
static cca_status vm_check(cca_upstream *u, const char *fn, const void *addr, bool addr_needed, size_t size,
                           size_t *gran) {
    if (!u || (addr_needed && !addr))
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    cca_status st = cca_upstream_vm_granularity(u, gran);
    if (st != CCA_OK)
        return cca_error_prefix(st, "%s", fn);
    if (size == 0 || size % *gran || (uintptr_t)addr % *gran)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: address %p and size %zu must be multiples of the %zu-byte "
                         "granularity, size > 0", fn, addr, size, *gran);
    return CCA_OK;
}

cca_status cca_upstream_vm_reserve(cca_upstream *u, size_t size, void **base) {
    if (!u || !base)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_reserve: NULL argument");
    *base = NULL;
    size_t gran;
    cca_status st = vm_check(u, "cca_upstream_vm_reserve", NULL, false, size, &gran);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.vm_reserve(u->ctx, size, base);
    if (st == CCA_OK && (!*base || (uintptr_t)*base % gran || passes_top(*base, size))) {
        void *b = *base;
        *base = NULL;
        char why[64] = PAST_TOP;
        if (!b || (uintptr_t)b % gran)
            snprintf(why, sizeof why, "not a %zu-aligned address", gran);
        /* give the range back: the caller never sees it */
        cca_status back = b ? u->ops.vm_release(u->ctx, b, size) : CCA_OK;
        return cca_set_error(CCA_ERR_UPSTREAM, "upstream '%s' vm_reserve of %zu bytes returned %p: %s%s", u->name, size,
                         b, why,
                         back == CCA_OK ? (b ? " (given back)" : "")
                                        : " (and its release was refused: the range stays reserved)");
    }
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->stats.vm_reserved_bytes += size;
        pthread_mutex_unlock(&u->lock);
    } else {
        *base = NULL;
    }
    return op_end(&g, u, st, st == CCA_OK, "vm_reserve of %zu bytes", size);
}

cca_status cca_upstream_vm_release(cca_upstream *u, void *base, size_t size) {
    size_t gran;
    cca_status st = vm_check(u, "cca_upstream_vm_release", base, true, size, &gran);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.vm_release(u->ctx, base, size);
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->stats.vm_reserved_bytes -= size;
        pthread_mutex_unlock(&u->lock);
    }
    return op_end(&g, u, st, st == CCA_OK, "vm_release of %p (%zu bytes)", base, size);
}

cca_status cca_upstream_vm_map(cca_upstream *u, void *addr, size_t size) {
    size_t gran;
    cca_status st = vm_check(u, "cca_upstream_vm_map", addr, true, size, &gran);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.vm_map(u->ctx, addr, size);
    pthread_mutex_lock(&u->lock);
    if (st == CCA_OK) {
        u->stats.vm_map_calls++;
        count_back(u, size, false, +1);
    } else {
        u->stats.vm_failed_maps++;
    }
    pthread_mutex_unlock(&u->lock);
    return op_end(&g, u, st, st == CCA_OK, "vm_map of %p (%zu bytes)", addr, size);
}

cca_status cca_upstream_vm_unmap(cca_upstream *u, void *addr, size_t size) {
    size_t gran;
    cca_status st = vm_check(u, "cca_upstream_vm_unmap", addr, true, size, &gran);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    bool uncounted = uncount_before(u, size, false);
    st = u->ops.vm_unmap(u->ctx, addr, size);
    uncount_after(u, size, false, uncounted, st == CCA_OK);
    return op_end(&g, u, st, st == CCA_OK, "vm_unmap of %p (%zu bytes)", addr, size);
}

/* ---- host staging memory and copies (sleep and wake) ------------------------ */

int cca_upstream_has_copy(const cca_upstream *u) {
    return u && u->ops.copy != NULL;
}

static cca_status copy_check(const cca_upstream *u, const char *fn, bool args_ok) {
    if (!u || !args_ok)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: NULL argument or size 0", fn);
    if (!u->ops.copy)
        return cca_set_error(CCA_ERR_UPSTREAM, "%s: upstream '%s' has no host staging memory or copies", fn,
                             u->name);
    return CCA_OK;
}

cca_status cca_upstream_host_alloc(cca_upstream *u, size_t size, void **ptr) {
    if (ptr)
        *ptr = NULL;
    cca_status st = copy_check(u, "cca_upstream_host_alloc", ptr && size);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.host_alloc(u->ctx, size, ptr);
    if (st == CCA_OK && !*ptr)
        st = CCA_ERR_UPSTREAM; /* success without a pointer */
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->stats.host_bytes_in_use += size;
        if (u->stats.host_bytes_in_use > u->stats.host_bytes_peak)
            u->stats.host_bytes_peak = u->stats.host_bytes_in_use;
        pthread_mutex_unlock(&u->lock);
    } else {
        *ptr = NULL;
    }
    return op_end(&g, u, st, st == CCA_OK, "host_alloc of %zu bytes", size);
}

cca_status cca_upstream_host_free(cca_upstream *u, void *ptr, size_t size) {
    cca_status st = copy_check(u, "cca_upstream_host_free", ptr && size);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.host_free(u->ctx, ptr, size);
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->stats.host_bytes_in_use -= size <= u->stats.host_bytes_in_use ? size : u->stats.host_bytes_in_use;
        pthread_mutex_unlock(&u->lock);
    }
    return op_end(&g, u, st, st == CCA_OK, "host_free of %p (%zu bytes)", ptr, size);
}

cca_status cca_upstream_copy(cca_upstream *u, void *dst, const void *src, size_t size, int to_host) {
    cca_status st = copy_check(u, "cca_upstream_copy", dst && src && size);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.copy(u->ctx, dst, src, size, to_host ? 1 : 0);
    if (st == CCA_OK) {
        pthread_mutex_lock(&u->lock);
        u->stats.copies++;
        u->stats.bytes_copied += size;
        pthread_mutex_unlock(&u->lock);
    }
    return op_end(&g, u, st, st == CCA_OK, "copy of %zu bytes %s (%p -> %p)", size,
                  to_host ? "to the host" : "to the device", src, dst);
}

cca_status cca_upstream_copy_wait(cca_upstream *u) {
    cca_status st = copy_check(u, "cca_upstream_copy_wait", true);
    if (st != CCA_OK)
        return st;
    op_guard g;
    op_begin(&g);
    st = u->ops.copy_wait(u->ctx);
    return op_end(&g, u, st, st == CCA_OK, "copy_wait");
}

bool ccai_upstream_has_stream_sync(const cca_upstream *u) {
    return u->ops.stream_synchronize != NULL;
}

bool ccai_upstream_has_events(const cca_upstream *u) {
    return u->ops.event_record != NULL;
}

cca_status ccai_upstream_event_record(cca_upstream *u, cca_stream s, void **event) {
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.event_record(u->ctx, s, event);
    if (st != CCA_OK) /* whatever a refused record left there is no event of ours to query or destroy */
        *event = NULL;
    return op_end(&g, u, st, st == CCA_OK, "event_record on stream %p", s);
}

cca_status ccai_upstream_event_query(cca_upstream *u, void *event) {
    /* every caller reads any status but CCA_OK as "not completed yet" and
     * asks again later, inside calls that go on and may succeed: a failure
     * (a lost device) is no message of theirs, so the caller's is kept */
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.event_query(u->ctx, event);
    /* ...but said once per run of failures (a poll queries at every
     * cca_alloc): a lost device would otherwise show only as trim's
     * CCA_ERR_NOT_READY, which reads as work still queued */
    bool failed = st != CCA_OK && st != CCA_ERR_NOT_READY;
    pthread_mutex_lock(&u->lock);
    bool first = failed && !u->query_failing;
    u->query_failing = failed;
    pthread_mutex_unlock(&u->lock);
    if (first) /* the op's own message, if it wrote one (op_begin cleared the caller's) */
        ccai_log("upstream '%s' event_query of %p failed (%s): read as not yet completed, so the blocks waiting on "
                 "its events stay pending (trim: CCA_ERR_NOT_READY); later failures are not logged until a query "
                 "answers again",
                 u->name, event, cca_last_error()[0] ? cca_last_error() : cca_status_string(st));
    return op_end(&g, u, st, true, "event_query of event %p", event);
}

void ccai_upstream_event_destroy(cca_upstream *u, void *event) {
    /* its status has nowhere to go (the allocator cannot act on it), so a
     * refusal is logged (the event stays with the upstream: it may leak);
     * the caller's message is kept either way. Called under an allocator's
     * lock, the line waits for the unlock (ccai_upstream_op). */
    op_guard g;
    op_begin(&g);
    cca_status st = u->ops.event_destroy(u->ctx, event);
    if (st != CCA_OK) /* the op's own message, if it wrote one (op_begin cleared the caller's) */
        ccai_log("upstream '%s' event_destroy of %p refused (%s): the event stays with the upstream", u->name, event,
                 cca_last_error()[0] ? cca_last_error() : cca_status_string(st));
    op_end(&g, u, CCA_OK, true, "event_destroy");
}

/* ---- fork ------------------------------------------------------------------- */

void ccai_upstream_set_fork_hooks(cca_upstream *u, void (*lock)(void *ctx, bool lock), void (*child)(void *ctx)) {
    u->fork_lock = lock;
    u->fork_child = child;
}
