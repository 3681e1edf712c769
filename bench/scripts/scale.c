/*
 * scale.c — what each public call costs as the allocator holds more of one
 * thing, for instruction counts under callgrind. Built as bench/ccb_scale;
 * CTest runs it once per dimension at a small N (ccb_scale_<dim>, and
 * ccb_scale_<dim>_classic with classic segments).
 *
 *   ccb_scale DIM N [CONFIG]
 *
 * - DIM, the thing there are N of before the probes run:
 *     live      N live 4 KiB blocks
 *     free      N free 4 KiB blocks (2N allocated, every other one freed)
 *     sizes     N free blocks of N distinct sizes (512 B steps)
 *     segments  N live 12 MiB blocks, a segment (classic) each
 *     pages     one live block of N pages (2 MiB each), mapped page by page
 *     runs      N runs of mapped pages: 2N blocks of a page each, every
 *               other one freed, then cca_empty_cache unmaps their pages
 *     domains   N domains, each holding one live 4 KiB block
 *     empty     N domains that never held memory
 *     sleeper   the domain the sleep and wake probes use holds N live
 *               4 KiB blocks (else one), which they copy out and back
 *     asleep    N domains, each holding one live block, asleep (DISCARD)
 *     history   the history ring of N events (config history:N), full
 *     marks     N trace marks written (CCALLOC_TRACE=/dev/null)
 *     threads   N threads alive (blocked), each has made one pair
 * - Then the probes, each call made through a function of its own named
 *   scale_m_* (never inlined), so that callgrind_annotate --inclusive=yes
 *   gives each call's instructions apart; stdout lists how many times each
 *   probe ran ("probe NAME CALLS"). bench/scripts/scale.sh divides.
 * - The upstream is a fake device: addresses from a bump pointer, never
 *   touched, with the vm ops (CCA_VM_PAGES, 2 MiB granularity), host
 *   memory from malloc and copies that move nothing (the device has no
 *   bytes), and no events, so that 100,000 blocks fit under valgrind and
 *   no device cost is counted. The dimension's asleep domains sleep with
 *   CCA_SLEEP_DISCARD; the probes' sleeper copies.
 * - CONFIG goes to cca_config_parse on top of cca_config_default
 *   (expandable segments); "expandable:0" for classic segments. asleep
 *   and pages need expandable segments.
 * Exit status: 0, or 1 with a message on stderr when a call fails.
 */
#include <ccalloc.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_REPS 32
#define KiB ((size_t)1024)
#define MiB (KiB * 1024)

/* ---- the fake device: a bump pointer, never touched ------------------- */

static uintptr_t bump_next = (uintptr_t)1 << 44;
static const size_t bump_total = (size_t)1 << 46;
static size_t bump_mapped;

static uintptr_t bump_take(size_t size, size_t align) {
    uintptr_t p = (bump_next + align - 1) & ~(uintptr_t)(align - 1);
    bump_next = p + size;
    return p;
}

static cca_status fake_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = (void *)bump_take(size, 2 * MiB);
    bump_mapped += size;
    return CCA_OK;
}

static cca_status fake_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)ptr;
    bump_mapped -= size;
    return CCA_OK;
}

static cca_status fake_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    (void)ctx;
    *free_bytes = bump_total - bump_mapped;
    *total_bytes = bump_total;
    return CCA_OK;
}

static cca_status fake_granularity(void *ctx, size_t *bytes) {
    (void)ctx;
    *bytes = 2 * MiB;
    return CCA_OK;
}

static cca_status fake_reserve(void *ctx, size_t size, void **base) {
    (void)ctx;
    *base = (void *)bump_take(size, 2 * MiB);
    return CCA_OK;
}

static cca_status fake_release(void *ctx, void *base, size_t size) {
    (void)ctx;
    (void)base;
    (void)size;
    return CCA_OK;
}

static cca_status fake_map(void *ctx, void *addr, size_t size) {
    (void)ctx;
    (void)addr;
    bump_mapped += size;
    return CCA_OK;
}

static cca_status fake_unmap(void *ctx, void *addr, size_t size) {
    (void)ctx;
    (void)addr;
    bump_mapped -= size;
    return CCA_OK;
}

static cca_status fake_host_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = aligned_alloc(256, (size + 255) & ~(size_t)255);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}

static cca_status fake_host_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;
    free(ptr);
    return CCA_OK;
}

static cca_status fake_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    (void)ctx;
    (void)dst;
    (void)src;
    (void)size;
    (void)to_host;
    return CCA_OK;
}

static cca_status fake_copy_wait(void *ctx) {
    (void)ctx;
    return CCA_OK;
}

/* ---- the probes: one public call each ---------------------------------- */

#define NOINLINE __attribute__((noinline))

static cca_allocator *A;
static size_t probe_calls[32];
static const char *probe_names[32];
static int probe_count;

static void count(const char *name) {
    for (int i = 0; i < probe_count; i++)
        if (strcmp(probe_names[i], name) == 0) {
            probe_calls[i]++;
            return;
        }
    probe_names[probe_count] = name;
    probe_calls[probe_count++] = 1;
}

static int fail(const char *what) {
    fprintf(stderr, "ccb_scale: %s: %s\n", what, cca_last_error());
    exit(1);
}

static void check(cca_status s, const char *what) {
    if (s != CCA_OK)
        fail(what);
}

/* cca_alloc and cca_free under a probe's name each (the pair, the split
 * and its coalescing free, new memory and its free) */
#define ALLOC_PROBE(name)                                                                                              \
    NOINLINE void *scale_m_##name(size_t size) {                                                                       \
        void *p;                                                                                                       \
        check(cca_alloc(A, size, NULL, &p), #name);                                                                    \
        return p;                                                                                                      \
    }
#define FREE_PROBE(name)                                                                                               \
    NOINLINE void scale_m_##name(void *p) {                                                                            \
        check(cca_free(A, p), #name);                                                                                  \
    }
ALLOC_PROBE(pair_alloc)
ALLOC_PROBE(split_alloc)
ALLOC_PROBE(new_alloc)
FREE_PROBE(pair_free)
FREE_PROBE(coalesce_free)
FREE_PROBE(new_free)
NOINLINE void scale_m_block_size(void *p) {
    size_t n;
    check(cca_block_size(A, p, &n), "cca_block_size");
}
NOINLINE void scale_m_domain_of(void *p) {
    cca_domain *d;
    check(cca_domain_of(A, p, &d), "cca_domain_of");
}
NOINLINE void scale_m_record_stream(void *p) {
    check(cca_record_stream(A, p, NULL), "cca_record_stream");
}
NOINLINE void scale_m_get_stats(void) {
    cca_stats s;
    cca_get_stats(A, &s);
}
NOINLINE void scale_m_reset_peak(void) {
    cca_reset_peak_stats(A);
}
NOINLINE void scale_m_trim(size_t keep) {
    cca_release_report r; /* a report: its sums are part of the cost */
    check(cca_trim(A, keep, &r), "cca_trim");
}
NOINLINE void scale_m_empty_cache(void) {
    check(cca_empty_cache(A, NULL), "cca_empty_cache");
}
NOINLINE void scale_m_snapshot_json(FILE *f) {
    check(cca_write_snapshot_json(A, f), "snapshot json");
}
NOINLINE void scale_m_snapshot_torch(FILE *f) {
    check(cca_write_snapshot_torch(A, 0, f), "snapshot torch");
}
NOINLINE void scale_m_domain_stats_json(FILE *f) {
    check(cca_domain_stats_write_json(A, f), "domain stats json");
}
NOINLINE void scale_m_trace_mark(void) {
    check(cca_trace_mark(A, "phase"), "cca_trace_mark");
}
NOINLINE cca_domain *scale_m_domain_create(void) {
    cca_domain *d;
    check(cca_domain_create(A, "probe", &d), "cca_domain_create");
    return d;
}
NOINLINE void scale_m_domain_destroy(cca_domain *d) {
    check(cca_domain_destroy(A, d, 0, NULL), "cca_domain_destroy");
}
NOINLINE void scale_m_domain_sleep(cca_domain *d) {
    check(cca_domain_sleep(A, d, 0, NULL), "cca_domain_sleep");
}
NOINLINE void scale_m_domain_wake(cca_domain *d) {
    check(cca_domain_wake(A, d, NULL), "cca_domain_wake");
}
NOINLINE void scale_m_sleep_all(void) {
    check(cca_sleep(A, CCA_SLEEP_DISCARD, NULL), "cca_sleep");
}
NOINLINE void scale_m_wake_all(void) {
    check(cca_wake(A, NULL), "cca_wake");
}
NOINLINE void scale_m_domain_release(cca_domain *d) {
    check(cca_domain_release(A, d, 0, NULL), "cca_domain_release");
}
NOINLINE void scale_m_domain_stats(cca_domain *d) {
    cca_domain_stats s;
    check(cca_get_domain_stats(A, d, &s), "cca_get_domain_stats");
}
NOINLINE void scale_m_destroy(void) {
    cca_status s = cca_destroy(A);
    if (s != CCA_OK && s != CCA_ERR_LIVE_BLOCKS)
        fail("cca_destroy");
}

#define PROBE(name, call)                                                                                              \
    do {                                                                                                               \
        call;                                                                                                          \
        count(name);                                                                                                   \
    } while (0)

/* ---- the dimensions ----------------------------------------------------- */

static void **held; /* what the dimension keeps live */
static size_t nheld;
static cca_domain **doms;
static size_t ndoms;

static void hold(void *p) {
    held[nheld++] = p;
}

static void *alloc_in(cca_domain *d, size_t size) {
    void *p;
    check(cca_alloc_in(A, d, size, NULL, &p), "a dimension's block");
    return p;
}

/* 2n blocks, held and freed in turn: held ones of `held_size`, the k-th
 * freed one of hole + k x step bytes */
static void holes(size_t n, size_t held_size, size_t hole, size_t step) {
    void **tmp = malloc(2 * n * sizeof *tmp);
    if (!tmp)
        fail("host memory");
    for (size_t i = 0; i < 2 * n; i++)
        tmp[i] = alloc_in(NULL, i & 1 ? hole + step * (i / 2) : held_size);
    for (size_t i = 0; i < 2 * n; i++)
        if (i & 1)
            check(cca_free(A, tmp[i]), "a hole");
        else
            hold(tmp[i]);
    free(tmp);
}

typedef struct thread_arg {
    pthread_barrier_t *ready, *done;
} thread_arg;

static void *thread_main(void *v) {
    thread_arg *t = v;
    void *p = alloc_in(NULL, 4 * KiB);
    check(cca_block_size(A, p, &(size_t){0}), "a thread's block size");
    check(cca_free(A, p), "a thread's free");
    cca_clear_error();
    pthread_barrier_wait(t->ready);
    pthread_barrier_wait(t->done);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: ccb_scale DIM N [CONFIG]\n");
        return 1;
    }
    const char *dim = argv[1];
    size_t n = strtoull(argv[2], NULL, 10);
    char conf[256];
    snprintf(conf, sizeof conf, "%s", argc == 4 ? argv[3] : "");
    if (strcmp(dim, "history") == 0)
        snprintf(conf + strlen(conf), sizeof conf - strlen(conf), "%shistory:%zu", conf[0] ? "," : "", n);
    if (strcmp(dim, "marks") == 0)
        setenv("CCALLOC_TRACE", "/dev/null", 1);
    else
        unsetenv("CCALLOC_TRACE");
    unsetenv("CCALLOC_CONF");

    cca_upstream_ops ops = {.alloc = fake_alloc,
                            .free = fake_free,
                            .mem_info = fake_mem_info,
                            .name = "fake",
                            .vm_granularity = fake_granularity,
                            .vm_reserve = fake_reserve,
                            .vm_release = fake_release,
                            .vm_map = fake_map,
                            .vm_unmap = fake_unmap,
                            .vm_backing = CCA_VM_PAGES,
                            .host_alloc = fake_host_alloc,
                            .host_free = fake_host_free,
                            .copy = fake_copy,
                            .copy_wait = fake_copy_wait};
    cca_upstream *u;
    check(cca_upstream_custom_create(&ops, NULL, &u), "the fake upstream");
    cca_config c;
    cca_config_default(&c);
    check(cca_config_parse(&c, conf), "CONFIG");
    check(cca_create(&c, u, &A), "cca_create");
    held = malloc((2 * n + 1) * sizeof *held);
    doms = malloc((n + 1) * sizeof *doms);
    pthread_t *threads = NULL;
    pthread_barrier_t ready, done;
    if (!held || !doms)
        return fail("host memory");

    /* the dimension */
    if (strcmp(dim, "live") == 0) {
        for (size_t i = 0; i < n; i++)
            hold(alloc_in(NULL, 4 * KiB));
    } else if (strcmp(dim, "free") == 0) {
        holes(n, 4 * KiB, 4 * KiB, 0);
    } else if (strcmp(dim, "sizes") == 0) {
        holes(n, 4 * KiB, 512, 512);
    } else if (strcmp(dim, "segments") == 0) {
        for (size_t i = 0; i < n; i++)
            hold(alloc_in(NULL, 12 * MiB));
    } else if (strcmp(dim, "pages") == 0) {
        hold(alloc_in(NULL, n * 2 * MiB));
    } else if (strcmp(dim, "runs") == 0) {
        holes(n, 2 * MiB, 2 * MiB, 0);
        check(cca_empty_cache(A, NULL), "the holes' unmap");
    } else if (strcmp(dim, "empty") == 0) {
        for (size_t i = 0; i < n; i++)
            check(cca_domain_create(A, "unused", &doms[ndoms++]), "a domain");
    } else if (strcmp(dim, "domains") == 0 || strcmp(dim, "asleep") == 0) {
        for (size_t i = 0; i < n; i++) {
            check(cca_domain_create(A, "model", &doms[ndoms]), "a domain");
            hold(alloc_in(doms[ndoms++], 4 * KiB));
            if (dim[0] == 'a')
                check(cca_domain_sleep(A, doms[ndoms - 1], CCA_SLEEP_DISCARD, NULL), "a domain's sleep");
        }
    } else if (strcmp(dim, "sleeper") == 0) {
        /* the probes make the sleeper's blocks */
    } else if (strcmp(dim, "history") == 0) {
        for (size_t i = 0; i < n; i++)
            check(cca_free(A, alloc_in(NULL, 4 * KiB)), "a free for the history");
    } else if (strcmp(dim, "marks") == 0) {
        for (size_t i = 0; i < n; i++)
            check(cca_trace_mark(A, "step"), "a mark");
    } else if (strcmp(dim, "threads") == 0) {
        threads = malloc(n * sizeof *threads);
        pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
        pthread_barrier_init(&done, NULL, (unsigned)n + 1);
        static thread_arg t;
        t.ready = &ready;
        t.done = &done;
        for (size_t i = 0; i < n; i++)
            if (pthread_create(&threads[i], NULL, thread_main, &t) != 0)
                return fail("pthread_create");
        pthread_barrier_wait(&ready);
    } else {
        fprintf(stderr, "ccb_scale: unknown DIM '%s'\n", dim);
        return 1;
    }

    /* the probes: the cached pair, a split and its coalescing free, new
     * memory and its free, the lookups, stats, releases, writers, domains */
    void *live = alloc_in(NULL, 8 * KiB);
    void *big = alloc_in(NULL, 3 * MiB);
    check(cca_free(A, big), "a free block to split");
    for (int k = 0; k < PROBE_REPS; k++) {
        void *p;
        PROBE("pair_alloc", p = scale_m_pair_alloc(8 * KiB));
        PROBE("pair_free", scale_m_pair_free(p));
    }
    for (int k = 0; k < PROBE_REPS; k++) {
        void *p;
        PROBE("split_alloc", p = scale_m_split_alloc(512 * (size_t)(k + 1)));
        PROBE("coalesce_free", scale_m_coalesce_free(p));
    }
    void *fresh[PROBE_REPS];
    for (int k = 0; k < PROBE_REPS; k++)
        PROBE("new_alloc", fresh[k] = scale_m_new_alloc(64 * MiB + (size_t)k * 2 * MiB));
    for (int k = 0; k < PROBE_REPS; k++)
        PROBE("new_free", scale_m_new_free(fresh[k]));
    for (int k = 0; k < PROBE_REPS; k++) {
        PROBE("block_size", scale_m_block_size(live));
        PROBE("domain_of", scale_m_domain_of(live));
        PROBE("record_stream", scale_m_record_stream(live));
        PROBE("get_stats", scale_m_get_stats());
        PROBE("reset_peak", scale_m_reset_peak());
        PROBE("trace_mark", scale_m_trace_mark());
    }
    PROBE("empty_cache", scale_m_empty_cache());
    for (int k = 0; k < 4; k++)
        PROBE("trim", scale_m_trim(SIZE_MAX / 2));
    FILE *null = fopen("/dev/null", "w");
    if (!null)
        return fail("/dev/null");
    for (int k = 0; k < 2; k++) {
        PROBE("snapshot_json", scale_m_snapshot_json(null));
        PROBE("snapshot_torch", scale_m_snapshot_torch(null));
        PROBE("domain_stats_json", scale_m_domain_stats_json(null));
    }
    fclose(null);
    for (int k = 0; k < PROBE_REPS; k++) {
        cca_domain *d;
        PROBE("domain_create", d = scale_m_domain_create());
        PROBE("domain_stats", scale_m_domain_stats(d));
        PROBE("domain_release", scale_m_domain_release(d));
        PROBE("domain_destroy", scale_m_domain_destroy(d));
    }
    cca_config in_force;
    check(cca_get_config(A, &in_force), "cca_get_config");
    if (in_force.expandable) {
        cca_domain *d;
        check(cca_domain_create(A, "sleeper", &d), "the sleeper");
        size_t blocks = strcmp(dim, "sleeper") == 0 ? n : 1;
        void **p = malloc(blocks * sizeof *p);
        if (!p)
            return fail("host memory");
        for (size_t i = 0; i < blocks; i++)
            p[i] = alloc_in(d, 4 * KiB);
        for (int k = 0; k < PROBE_REPS / 4; k++) {
            PROBE("domain_sleep", scale_m_domain_sleep(d));
            PROBE("domain_wake", scale_m_domain_wake(d));
        }
        for (size_t i = 0; i < blocks; i++)
            check(cca_free(A, p[i]), "the sleeper's block");
        free(p);
        check(cca_domain_destroy(A, d, 0, NULL), "the sleeper's destroy");
        for (int k = 0; k < 2; k++) { /* every domain (the first wake wakes the asleep dimension's too) */
            PROBE("sleep_all", scale_m_sleep_all());
            PROBE("wake_all", scale_m_wake_all());
        }
    }

    if (threads) {
        pthread_barrier_wait(&done);
        for (size_t i = 0; i < n; i++)
            pthread_join(threads[i], NULL);
    }
    check(cca_free(A, live), "the probe's live block");
    PROBE("destroy", scale_m_destroy());
    for (int i = 0; i < probe_count; i++)
        printf("probe %s %zu\n", probe_names[i], probe_calls[i]);
    cca_upstream_destroy(u);
    free(held);
    free(doms);
    free(threads);
    return 0;
}
