/*
 * sleep.c — a model asleep: loaded, every weight pointer valid, none of its
 * device memory held; and woken again at the same addresses.
 *
 *     awake    domain "A"  pages |##|##|##|##|##|  |   weights + cached activations
 *     asleep   domain "A"  pages |  |  |  |  |  |  |   weights' bytes in host memory
 *     woken    domain "A"  pages |##|##|##|##|  |  |   the pages under the weights
 *
 * Rules:
 * - Owns: ccr_model_sleep, ccr_model_wake, ccr_model_asleep and the
 *   refusal of what a sleeping model cannot do (ccr_model_check_awake:
 *   infer.c's run, model.c's save). The mechanism is the allocator's
 *   (cca_domain_sleep / cca_domain_wake, allocator/src/sleep.c); this file
 *   adds the model's view: which domain, when it is safe, what it costs.
 * - A model sleeps alone only in a domain of its own: without one (domains
 *   off, policy greedy) its weights share the default domain with every
 *   other model and the engine's workspace, so the sleep is refused
 *   (CCR_ERR_UNSUPPORTED), as it is over classic segments (page_size 0),
 *   before anything changes.
 * - No activation is live at a sleep: ccr_model_run frees every block it
 *   takes before it returns (infer.c), and on CUDA the sleep waits for the
 *   engine's stream first, so the copy reads weights no kernel still uses.
 *   The allocator copies every live block of the domain: the weights, and
 *   any block a caller allocated in ccr_model_domain.
 * - m->asleep follows the domain: set when the allocator's sleep put it to
 *   sleep (a refused unmap included: the domain IS asleep then), or when a
 *   caller's cca_domain_sleep on ccr_model_domain did, cleared by a wake
 *   that succeeded, the caller's cca_domain_wake included: the domain's
 *   state is read again at each run, save, sleep, wake and
 *   ccr_model_asleep (one domain stats read). Unload works asleep or awake (model.c:
 *   cca_free and cca_domain_destroy accept a sleeping domain, the host
 *   copy goes with it).
 * - wake_need is the pages under the weights (page-aligned ranges: the
 *   device's page is the allocator's stats.page_size, segment bases are
 *   page-aligned), merged where two tensors share a page: the bytes the
 *   allocator's wake maps and asks the device for, so an out-of-memory wake
 *   says how many bytes are missing against the device's free memory.
 * - Costs: sleep: one stream synchronize (CUDA), O(layers log layers) for
 *   wake_need, cca_domain_sleep (a host copy of the weights, one unmap per
 *   map), two mem_info; wake: cca_domain_wake (a map per run, a copy back,
 *   a mem_info), two mem_info. Each also marks two phases: with a
 *   timeline, two rows (timeline.c: a mem_info each).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Whether m is asleep: its domain's state, which a caller may also have
 * changed (cca_domain_sleep / cca_domain_wake on ccr_model_domain); m's
 * own flag when it has no domain or the domain cannot be read. */
static int asleep_now(const ccr_model *m) {
    cca_domain_stats ds;
    if (m->domain && cca_get_domain_stats(m->e->alloc, m->domain, &ds) == CCA_OK)
        return ds.asleep != 0;
    return m->asleep;
}

/* m->asleep follows such a change from here. */
static void follow_domain(ccr_model *m) {
    m->asleep = asleep_now(m);
}

ccr_status ccr_model_check_awake(ccr_model *m, const char *what) {
    follow_domain(m);
    if (!m->asleep)
        return CCR_OK;
    return ccr_fail(CCR_ERR_ASLEEP, "model '%s' is asleep: %s refused (ccr_model_wake first)", m->name, what);
}

int ccr_model_asleep(const ccr_model *m) {
    return m ? asleep_now(m) : 0;
}

/* The device's free bytes (0, and *read cleared, when it refuses to say). */
static size_t device_free(ccr_engine *e, int *read) {
    size_t f = 0, t = 0;
    ccr_kept_error k; /* read after a refused sleep or wake: its message stays */
    ccr_error_keep(&k);
    if (cca_upstream_mem_info(e->up, &f, &t) != CCA_OK) {
        f = 0;
        *read = 0;
    }
    ccr_error_restore(&k);
    return f;
}

typedef struct page_range {
    uintptr_t lo, hi; /* pages [lo, hi) */
} page_range;

static int by_lo(const void *a, const void *b) {
    const page_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The bytes of the pages under the model's weights and biases (each block
 * as cca_block_size holds it), merged where they share a page. */
static size_t pages_under_weights(const ccr_model *m, size_t page) {
    page_range r[2 * CCR_MAX_LAYERS];
    size_t n = 0, bytes = 0;
    for (size_t i = 0; i < m->arch.n_layers; i++) {
        const void *p[2] = {m->w[i], m->b[i]};
        for (int k = 0; k < 2; k++) {
            size_t held = 0;
            if (!p[k] || cca_block_size(m->e->alloc, p[k], &held) != CCA_OK || held == 0)
                continue;
            uintptr_t a = (uintptr_t)p[k];
            r[n++] = (page_range){a / page, (a + held - 1) / page + 1};
        }
    }
    qsort(r, n, sizeof r[0], by_lo);
    uintptr_t end = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t lo = r[i].lo > end ? r[i].lo : end;
        if (r[i].hi > lo)
            bytes += (size_t)(r[i].hi - lo) * page;
        if (r[i].hi > end)
            end = r[i].hi;
    }
    return bytes;
}

/* Step 1 of a sleep: can this model sleep alone? CCR_OK, and *page the
 * allocator's page; else CCR_ERR_UNSUPPORTED, nothing changed. */
static ccr_status check_can_sleep(ccr_model *m, size_t *page) {
    cca_stats s;
    if (!m->domain)
        return ccr_fail(CCR_ERR_UNSUPPORTED,
                        "model '%s' cannot sleep: it has no memory domain of its own (engine domains off, or policy "
                        "greedy), its weights share the default domain with the rest of the engine",
                        m->name);
    cca_get_stats(m->e->alloc, &s);
    if (s.page_size == 0)
        return ccr_fail(CCR_ERR_UNSUPPORTED,
                        "model '%s' cannot sleep: the allocator has classic segments (expandable:0, or a device "
                        "without virtual-memory ops); sleep keeps the addresses while it unmaps the pages, which "
                        "needs expandable segments",
                        m->name);
    *page = s.page_size;
    return CCR_OK;
}

/* Step 2: the work that may still read the weights is done (CUDA: the
 * engine's one stream; the allocator waits for the blocks' own streams). */
static ccr_status wait_for_work(ccr_model *m) {
    if (!m->e->cuda)
        return CCR_OK;
    cck_status ks = cck_cuda_synchronize(m->e->cuda);
    return ks == CCK_OK ? CCR_OK
                        : ccr_fail(CCR_ERR_DEVICE, "model '%s' not put to sleep: waiting for its work: %s", m->name,
                                   cck_status_string(ks));
}

/* The allocator's refusal of a sleep as the runtime's status. A refused
 * unmap (CCA_ERR_UPSTREAM with the domain asleep) leaves the model asleep. */
static ccr_status sleep_failed(ccr_model *m, cca_status cs) {
    cca_domain_stats ds;
    if (cs == CCA_ERR_UPSTREAM && cca_get_domain_stats(m->e->alloc, m->domain, &ds) == CCA_OK && ds.asleep) {
        m->asleep = 1;
        char b0[32];
        return ccr_fail(CCR_ERR_DEVICE,
                        "model '%s' is asleep, but the device refused to unmap %s of its pages (still mapped; sleep "
                        "again to retry): %s",
                        m->name, cca_format_bytes(ds.reserved_bytes, b0, sizeof b0), cca_last_error());
    }
    ccr_status st = cs == CCA_ERR_OUT_OF_MEMORY           ? CCR_ERR_OUT_OF_MEMORY
                    : ccr_status_of(cs) == CCR_ERR_DEVICE ? CCR_ERR_DEVICE
                                                          : CCR_ERR_ALLOCATOR;
    return ccr_fail(st, "model '%s' not put to sleep (nothing changed): %s: %s", m->name, cca_status_string(cs),
                    cca_last_error());
}

/* Both calls begin here: *r and *info (may be NULL) zeroed, m checked. */
static ccr_status begin(const ccr_model *m, ccr_sleep_info *info, ccr_sleep_info *r) {
    memset(r, 0, sizeof *r);
    if (info)
        memset(info, 0, sizeof *info);
    return m ? CCR_OK : ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model is NULL");
}

ccr_status ccr_model_sleep(ccr_model *m, ccr_sleep_info *info) {
    ccr_sleep_info r;
    if (begin(m, info, &r) != CCR_OK)
        return CCR_ERR_INVALID_ARGUMENT;
    ccr_engine *e = m->e;
    size_t page = 0;
    ccr_status st = check_can_sleep(m, &page);
    if (st == CCR_OK)
        st = wait_for_work(m);
    if (st != CCR_OK)
        return st;
    follow_domain(m);
    r.was_asleep = m->asleep;
    r.wake_need = pages_under_weights(m, page);
    ccr_engine_mark(e, "sleep", m->name);
    r.device_free_read = 1;
    r.device_free_before = device_free(e, &r.device_free_read);
    double t0 = now_ms();
    cca_sleep_report rep;
    cca_status cs = cca_domain_sleep(e->alloc, m->domain, 0, &rep);
    r.ms = now_ms() - t0;
    r.device_free_after = device_free(e, &r.device_free_read);
    if (!r.device_free_read)
        r.device_free_before = r.device_free_after = 0; /* neither alone: no difference made of one */
    r.bytes_copied = rep.bytes_copied;
    r.device_bytes = rep.bytes_unmapped;
    r.host_bytes = rep.host_bytes;
    if (cs == CCA_OK)
        m->asleep = 1;
    else
        st = sleep_failed(m, cs);
    ccr_engine_mark(e, m->asleep ? "asleep" : "awake", m->name);
    if (info)
        *info = r;
    return st;
}

ccr_status ccr_model_wake(ccr_model *m, ccr_sleep_info *info) {
    ccr_sleep_info r;
    if (begin(m, info, &r) != CCR_OK)
        return CCR_ERR_INVALID_ARGUMENT;
    follow_domain(m);
    if (!m->asleep)
        return CCR_OK;
    ccr_engine *e = m->e;
    cca_stats s;
    r.was_asleep = 1;
    cca_get_stats(e->alloc, &s);
    r.wake_need = s.page_size ? pages_under_weights(m, s.page_size) : 0;
    ccr_engine_mark(e, "wake", m->name);
    r.device_free_read = 1;
    r.device_free_before = device_free(e, &r.device_free_read);
    double t0 = now_ms();
    cca_sleep_report rep;
    cca_status cs = cca_domain_wake(e->alloc, m->domain, &rep);
    r.ms = now_ms() - t0;
    r.device_free_after = device_free(e, &r.device_free_read);
    if (!r.device_free_read)
        r.device_free_before = r.device_free_after = 0; /* neither alone: no difference made of one */
    ccr_status st = CCR_OK;
    if (cs == CCA_OK) {
        m->asleep = 0;
        r.bytes_copied = rep.bytes_copied;
        r.device_bytes = rep.bytes_mapped;
        r.host_bytes = rep.host_bytes;
    } else if (cs == CCA_ERR_OUT_OF_MEMORY) {
        char b0[32], b1[32], b2[32];
        if (!r.device_free_read) /* no count to say or to subtract from */
            st = ccr_fail(CCR_ERR_OUT_OF_MEMORY,
                          "model '%s' stays asleep: its wake needs %s of device memory, the device's free memory "
                          "is unknown (mem_info refused): %s",
                          m->name, cca_format_bytes(r.wake_need, b0, sizeof b0), cca_last_error());
        else {
            r.missing = r.wake_need > r.device_free_after ? r.wake_need - r.device_free_after : 0;
            st = ccr_fail(CCR_ERR_OUT_OF_MEMORY,
                          "model '%s' stays asleep: its wake needs %s of device memory, the device has %s free (%s "
                          "missing): %s",
                          m->name, cca_format_bytes(r.wake_need, b0, sizeof b0),
                          cca_format_bytes(r.device_free_after, b1, sizeof b1),
                          cca_format_bytes(r.missing, b2, sizeof b2), cca_last_error());
        }
    } else {
        st = ccr_fail(ccr_status_of(cs) == CCR_ERR_DEVICE ? CCR_ERR_DEVICE : CCR_ERR_ALLOCATOR,
                      "model '%s' stays asleep: %s: %s", m->name, cca_status_string(cs), cca_last_error());
    }
    ccr_engine_mark(e, m->asleep ? "asleep" : "awake", m->name);
    if (info)
        *info = r;
    return st;
}
