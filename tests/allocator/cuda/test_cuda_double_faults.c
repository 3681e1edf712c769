/*
 * test_cuda_double_faults.c — allocator/src/upstream/cuda.c: the CUDA upstream on the
 * driver double (cuda_double.c), where a GPU cannot be made to fail on
 * demand: every driver call of a map, an unmap, a reservation and a release
 * failing in turn, then every call of a script whatever its function,
 * contexts put back, the order of synchronize and unmap, the double's own
 * count of device memory against the allocator's, and the log line of each
 * cleanup step the driver refuses (one, naming the call, never under a
 * lock: probe_sink checks it whenever it runs).
 *
 * The vm ops' faults, and the scripts failing every call, are those of the
 * pages backing (CCA_VM_PAGES: one cuMemCreate per page, any run of pages
 * unmapped), asked for explicitly (cuda0_pages, cuda_paged); the random
 * sequences and the other tests over cuda0 run over the upstream's default
 * (whole maps), and test_cuda_double_whole_maps.c fails every driver call
 * of whole maps.
 *
 * The double enforces CUDA's documented rules and counts a VIOLATION for
 * any call that breaks one; every test ends with none. It is not a GPU: the
 * label gpu suite (test_cuda_upstream) runs on a real device.
 */
#include "alloc_test_util.h"
#include "cuda_double.h"
#include "internal.h" /* the allocator's lock word, for the log sink's check */
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static void *driver(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cr_assert_eq(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q), cudaSuccess);
    cr_assert_eq(q, cudaDriverEntryPointSuccess, "%s", name);
    return fn;
}

static cca_upstream *cuda0(void) {
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_cuda_create(0, &u), CCA_OK, "%s", cca_last_error());
    cr_assert(cca_upstream_has_vm(u), "%s", cca_last_error());
    return u;
}

/* Device 0 with the pages backing, in pages of `page` bytes (0: the
 * driver's minimum). */
static int script_host_memory; /* cca_cuda_options.host_memory of cuda_paged's upstreams (sweep_registered) */

static cca_upstream *cuda_paged(size_t page) {
    cca_upstream *u = NULL;
    cca_cuda_options o = {
        .device = 0, .vm_granularity = page, .vm_backing = CCA_VM_PAGES, .host_memory = script_host_memory};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "page %zu: %s", page, cca_last_error());
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(g, page ? page : cuda_double_defaults().granularity);
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES);
    return u;
}

/* Device 0 with the pages backing in the driver's granules. */
static cca_upstream *cuda0_pages(void) {
    return cuda_paged(0);
}

static void assert_no_violation(void) {
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.violations, 0, "the upstream broke a driver rule: %s", s.last_violation);
    cr_assert_eq(s.implicit_contexts, 0, "a runtime call ran on a thread with no context");
}

/* The double itself: it refuses what the documentation says the driver
 * refuses, so that the tests below mean something. */
Test(cuda_double, refuses_what_the_driver_refuses) {
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = driver("cuDevicePrimaryCtxRetain");
    PFN_cuCtxSetCurrent_v4000 set_current = driver("cuCtxSetCurrent");
    PFN_cuMemAddressReserve_v10020 reserve = driver("cuMemAddressReserve");
    PFN_cuMemAddressFree_v10020 address_free = driver("cuMemAddressFree");
    PFN_cuMemCreate_v10020 create = driver("cuMemCreate");
    PFN_cuMemRelease_v10020 release = driver("cuMemRelease");
    PFN_cuMemMap_v10020 map = driver("cuMemMap");
    PFN_cuMemUnmap_v10020 unmap = driver("cuMemUnmap");
    PFN_cuMemSetAccess_v10020 set_access = driver("cuMemSetAccess");
    size_t g = 2 * MiB;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr base;
    cr_assert_eq(create(&h1, g, &prop, 0), CUDA_ERROR_INVALID_CONTEXT, "no context: refused");
    cr_assert_eq(unmap(0x200000, g), CUDA_ERROR_INVALID_CONTEXT, "no context: refused");
    CUcontext ctx;
    cr_assert_eq(retain(&ctx, 0), CUDA_SUCCESS);
    cr_assert_eq(set_current(ctx), CUDA_SUCCESS);
    cr_assert_eq(reserve(&base, 4 * g, g, 0, 1), CUDA_ERROR_INVALID_VALUE, "flags: reserved, must be 0");
    cr_assert_eq(reserve(&base, 4 * g, g, 0, 0), CUDA_SUCCESS);
    cr_assert_eq(create(&h1, g + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE, "not a multiple of the granularity");
    cr_assert_eq(create(&h1, g, &prop, 1), CUDA_ERROR_INVALID_VALUE, "flags: reserved, must be 0");
    cr_assert_eq(create(&h1, 2 * g, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(create(&h2, g, &prop, 0), CUDA_SUCCESS);
    cr_assert_eq(map(base + 8 * g, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE, "outside the reservation");
    cr_assert_eq(map(base, g, 0, h2, 1), CUDA_ERROR_INVALID_VALUE, "flags: reserved, must be 0");
    cr_assert_eq(map(base, 2 * g, 0, h1, 0), CUDA_SUCCESS);
    cr_assert_eq(map(base + g, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE, "over a mapping");
    cr_assert_eq(set_access(base, 3 * g, &access, 1), CUDA_ERROR_INVALID_VALUE, "part of the range unmapped");
    cr_assert_eq(set_access(base, g, &access, 1), CUDA_ERROR_INVALID_VALUE, "part of one mapping");
    cr_assert_eq(cuda_double_get_stats().accessible_bytes, 0, "a refused cuMemSetAccess grants nothing");
    cr_assert_eq(cudaMemset((void *)(uintptr_t)base, 1, g), cudaErrorInvalidValue, "not accessible yet");
    cr_assert_eq(set_access(base, 2 * g, &access, 1), CUDA_SUCCESS);
    cr_assert_eq(cudaMemset((void *)(uintptr_t)base, 1, 2 * g), cudaSuccess);
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 3 * g);
    cr_assert_eq(release(h1), CUDA_SUCCESS);
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 3 * g, "released while mapped: the mapping holds it");
    cr_assert_eq(unmap(base, g), CUDA_ERROR_INVALID_VALUE, "part of one allocation");
    cr_assert_eq(address_free(base, 4 * g), CUDA_ERROR_INVALID_VALUE, "a mapping still in it");
    cr_assert_eq(unmap(base, 2 * g), CUDA_SUCCESS);
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], g, "unmapped and released: gone");
    cr_assert_eq(release(h1), CUDA_ERROR_INVALID_VALUE, "released twice");
    cr_assert_eq(release(h2), CUDA_SUCCESS);
    cr_assert_eq(address_free(base, 4 * g), CUDA_SUCCESS);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.physical_bytes[0], 0);
    cr_assert_eq(s.mapped_bytes, 0);
    cr_assert_eq(s.reservations, 0);
    cr_assert_eq(s.handles, 0);
    cr_assert_eq(s.violations, 14, "each refusal above counted: %lu (%s)", s.violations, s.last_violation);
}

/* Events belong to the context they were created in: recording one on
 * another context's default stream is refused, and a synchronize of one
 * device completes that device's work only. */
Test(cuda_double, events_belong_to_their_context) {
    cudaEvent_t ev;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaEventRecord(ev, NULL), cudaErrorInvalidResourceHandle, "device 1's default stream");
    cuda_double_hold_events(true);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaEventRecord(ev, NULL), cudaSuccess);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaEventQuery(ev), cudaErrorNotReady, "device 1 synchronized, the work is device 0's");
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaEventQuery(ev), cudaSuccess);
    cr_assert_eq(cudaEventDestroy(ev), cudaSuccess);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.violations, 1, "%lu (%s)", s.violations, s.last_violation);
}

/* ---- the vm ops, one driver call failing at a time ----------------------------- */

#define GRANULES 8

static cca_upstream_stats ustats(cca_upstream *u) {
    cca_upstream_stats s;
    cr_assert_eq(cca_upstream_get_stats(u, &s), CCA_OK);
    return s;
}

/* Nothing of a failed map stays: no mapping, no physical memory, no
 * handle; the upstream's count and record unchanged, so the same map then
 * succeeds; the caller's (lack of a) context put back. */
static void expect_nothing_mapped(cca_upstream *u, const char *what) {
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes, 0, "%s: %zu bytes stay mapped", what, s.mapped_bytes);
    cr_assert_eq(s.physical_bytes[0], 0, "%s: %zu bytes of device memory stay allocated", what, s.physical_bytes[0]);
    cr_assert_eq(s.handles, 0, "%s", what);
    cr_assert_eq(ustats(u).vm_mapped_bytes, 0, "%s", what);
    cr_assert_null(cuda_double_current(), "%s: a context was left current on a thread that had none", what);
}

Test(cuda_double, every_step_of_a_map_failing_leaves_nothing_behind) {
    cca_upstream *u = cuda0_pages();
    size_t g = 0;
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, GRANULES * g, &base), CCA_OK, "%s", cca_last_error());
    static const struct {
        const char *fn;
        unsigned long calls; /* calls of it in one map of GRANULES granules */
    } steps[] = {{"cuMemCreate", GRANULES}, {"cuMemMap", GRANULES}, {"cuMemSetAccess", 1}};
    static const int codes[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN};
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        for (size_t c = 0; c < 2; c++)
            for (unsigned long k = 1; k <= steps[i].calls; k++) {
                char what[96];
                snprintf(what, sizeof what, "%s failing at call %lu with %d", steps[i].fn, k, codes[c]);
                cuda_double_fail(steps[i].fn, k, codes[c], false);
                cca_status st = cca_upstream_vm_map(u, base, GRANULES * g);
                cr_assert_eq(st, codes[c] == CUDA_ERROR_OUT_OF_MEMORY ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM,
                             "%s: status %d", what, st);
                cr_assert(strstr(cca_last_error(), steps[i].fn), "%s: the message names it: %s", what,
                          cca_last_error());
                cuda_double_clear_faults();
                expect_nothing_mapped(u, what);
                cr_assert_eq(cca_upstream_vm_map(u, base, GRANULES * g), CCA_OK, "%s, then: %s", what,
                             cca_last_error());
                cr_assert_eq(cuda_double_get_stats().accessible_bytes, GRANULES * g);
                cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
            }
    cr_assert_eq(cca_upstream_vm_release(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().reservations, 0);
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* A map above the device's free memory is refused by one cudaMemGetInfo,
 * before any granule is created. */
Test(cuda_double, a_map_above_free_memory_creates_nothing) {
    cca_upstream *u = cuda0();
    size_t g = 0, free_b = 0, total_b = 0;
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    size_t size = (free_b / g + 1) * g;
    cr_assert_eq(cca_upstream_vm_reserve(u, size, &base), CCA_OK, "%s", cca_last_error());
    unsigned long creates = cuda_double_calls("cuMemCreate");
    cr_assert_eq(cca_upstream_vm_map(u, base, size), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(cuda_double_calls("cuMemCreate"), creates, "granules were created before the refusal");
    expect_nothing_mapped(u, "a map above free memory");
    cr_assert_eq(cca_upstream_vm_release(u, base, size), CCA_OK, "%s", cca_last_error());
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* An upstream on device 0 (pages backing) with a range of GRANULES
 * granules reserved and mapped by one call. */
static cca_upstream *mapped_range(size_t *g, void **base) {
    cca_upstream *u = cuda0_pages();
    cr_assert_eq(cca_upstream_vm_granularity(u, g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, GRANULES * *g, base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, *base, GRANULES * *g), CCA_OK, "%s", cca_last_error());
    return u;
}

/* An unmap the driver refuses part-way: the granules it had unmapped are
 * mapped again (new memory), so what is mapped is what it was, and
 * accessible; the call fails. */
Test(cuda_double, an_unmap_refused_part_way_maps_the_rest_back) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = mapped_range(&g, &base);
    for (unsigned long k = 1; k <= GRANULES; k++) {
        cuda_double_fail("cuMemUnmap", k, CUDA_ERROR_UNKNOWN, false);
        cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_ERR_UPSTREAM, "cuMemUnmap failing at %lu", k);
        cuda_double_clear_faults();
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, GRANULES * g, "unmap failing at granule %lu: %zu bytes mapped", k,
                     s.mapped_bytes);
        cr_assert_eq(s.accessible_bytes, GRANULES * g, "unmap failing at granule %lu", k);
        cr_assert_eq(s.physical_bytes[0], GRANULES * g);
        cr_assert_eq(ustats(u).vm_mapped_bytes, GRANULES * g);
        cr_assert_null(cuda_double_current());
    }
    cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
    expect_nothing_mapped(u, "after the last unmap");
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* The unmap refused part-way AND the map back refused: the granules before
 * the refusal stay unmapped, the message says so, and the upstream's
 * record follows the driver (a later unmap of the whole run is refused
 * before any driver call; the granules still mapped unmap). What the
 * caller believes is another matter: the call failed, so the wrapper's
 * count and the allocator still take those granules as mapped (the
 * limit stated in upstream/cuda.c). */
Test(cuda_double, an_unmap_and_its_undo_both_refused_leave_the_record_true_to_the_driver) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = mapped_range(&g, &base);
    cuda_double_fail("cuMemUnmap", 4, CUDA_ERROR_UNKNOWN, false); /* granules 0-2 go, 3 is refused */
    cuda_double_fail("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, true);
    cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "they stay unmapped"), "%s", cca_last_error());
    cuda_double_clear_faults();
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, (GRANULES - 3) * g);
    unsigned long unmaps = cuda_double_calls("cuMemUnmap");
    cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_ERR_UPSTREAM, "granules 0-2 are not mapped");
    cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps, "refused by the record, before the driver");
    cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + 3 * g, (GRANULES - 3) * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, 0);
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 0);
    cr_assert_eq(cca_upstream_vm_release(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* Reservations: the driver refusing one is the upstream refusing it;
 * refusing a release leaves the range reserved and recorded, so a later
 * release succeeds. */
/* Three refusals in a row: the unmap refused at granule 3, the map back
 * of granules 0-2 refused at its third create, and the undo of that map
 * refused for granule j (0 or 1) too. Granule j stays mapped: the message
 * says how many of the three stay mapped and how many unmapped (not "they
 * stay unmapped"), as the driver and the record have them. */
Test(cuda_double, an_unmap_whose_undo_cannot_be_undone_says_what_stays_mapped) {
    for (unsigned long j = 0; j < 2; j++) {
        size_t g = 0;
        void *base = NULL;
        cca_upstream *u = mapped_range(&g, &base);
        cuda_double_fail("cuMemUnmap", 4, CUDA_ERROR_UNKNOWN, false);     /* granules 0-2 go, 3 is refused */
        cuda_double_fail("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY, false); /* 0 and 1 mapped back, 2 not */
        cuda_double_fail("cuMemUnmap", 5 + j, CUDA_ERROR_UNKNOWN, false);  /* the undo of granule j refused */
        cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_ERR_UPSTREAM);
        cuda_double_clear_faults();
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, (GRANULES - 3 + 1) * g, "granule %lu: %zu bytes mapped", j, s.mapped_bytes);
        const char *says = "mapping the 3 before it again failed too (cuMemCreate): 1 of them stays mapped (mapped "
                           "again, and its undo refused), the other 2 stay unmapped";
        cr_assert(strstr(cca_last_error(), says), "granule %lu: the message says: %s", j, cca_last_error());
        cr_assert_null(strstr(cca_last_error(), "they stay unmapped"), "%s", cca_last_error());
        /* the record follows the driver: granule j and 3.. unmap, the others are refused before the driver */
        unsigned long before = cuda_double_calls("cuMemUnmap");
        cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_ERR_UPSTREAM);
        cr_assert_eq(cuda_double_calls("cuMemUnmap"), before, "refused by the record");
        cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + j * g, g), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + 3 * g, (GRANULES - 3) * g), CCA_OK, "%s",
                     cca_last_error());
        s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.handles, 0);
        cr_assert_eq(cca_upstream_vm_release(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
        assert_no_violation();
        cca_upstream_destroy(u);
    }
}

Test(cuda_double, refused_reservations_and_releases_change_nothing) {
    cca_upstream *u = cuda0();
    size_t g = 0;
    void *base = (void *)1;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cuda_double_fail("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY, false);
    cr_assert_eq(cca_upstream_vm_reserve(u, 4 * g, &base), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(cuda_double_get_stats().reservations, 0);
    cr_assert_eq(ustats(u).vm_reserved_bytes, 0);
    cr_assert_eq(cca_upstream_vm_reserve(u, 4 * g, &base), CCA_OK, "%s", cca_last_error());
    cuda_double_fail("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN, false);
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * g), CCA_ERR_UPSTREAM);
    cr_assert_eq(cuda_double_get_stats().reservations, 1);
    cr_assert_eq(ustats(u).vm_reserved_bytes, 4 * g);
    cr_assert_eq(cca_upstream_vm_map(u, base, g), CCA_OK, "the range is still recorded: %s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, base, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().reservations, 0);
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* ---- contexts -------------------------------------------------------------------- */

typedef struct ctx_probe {
    void *mine;     /* made current on the thread first (NULL: none) */
    int device;     /* the upstream's device                          */
    cca_status st;
    char why[256];
    bool kept;      /* `mine` was current after every op              */
    size_t on_device, elsewhere; /* cudaMalloc'd bytes seen during the alloc */
} ctx_probe;

static void *ops_in_a_context(void *arg) {
    ctx_probe *p = arg;
    PFN_cuCtxSetCurrent_v4000 set_current = driver("cuCtxSetCurrent");
    set_current((CUcontext)p->mine);
    cca_upstream *u = NULL;
    p->kept = true;
    if ((p->st = cca_upstream_cuda_create(p->device, &u)) != CCA_OK)
        goto out;
    p->kept &= cuda_double_current() == p->mine;
    void *x = NULL, *base = NULL;
    size_t f, t, g = 0;
    if ((p->st = cca_upstream_alloc(u, 4 * MiB, &x)) == CCA_OK) {
        cuda_double_stats s = cuda_double_get_stats();
        p->on_device = s.malloc_bytes[p->device];
        p->elsewhere = s.malloc_bytes[1 - p->device];
        p->kept &= cuda_double_current() == p->mine;
        p->st = cca_upstream_free(u, x, 4 * MiB);
    }
    p->kept &= cuda_double_current() == p->mine;
    if (p->st == CCA_OK)
        p->st = cca_upstream_mem_info(u, &f, &t);
    if (p->st == CCA_OK)
        p->st = cca_upstream_synchronize(u);
    if (p->st == CCA_OK && (p->st = cca_upstream_vm_granularity(u, &g)) == CCA_OK &&
        (p->st = cca_upstream_vm_reserve(u, 2 * g, &base)) == CCA_OK) {
        p->kept &= cuda_double_current() == p->mine;
        if ((p->st = cca_upstream_vm_map(u, base, g)) == CCA_OK) {
            p->kept &= cuda_double_current() == p->mine;
            p->st = cca_upstream_vm_unmap(u, base, g);
        }
        p->kept &= cuda_double_current() == p->mine;
        cca_status rel = cca_upstream_vm_release(u, base, 2 * g);
        p->st = p->st ? p->st : rel;
    }
    p->kept &= cuda_double_current() == p->mine;
    cca_upstream_destroy(u);
    p->kept &= cuda_double_current() == p->mine;
out:
    if (p->st != CCA_OK)
        snprintf(p->why, sizeof p->why, "%s", cca_last_error());
    return NULL;
}

static void run_probe(ctx_probe *p) {
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ops_in_a_context, p), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(p->st, CCA_OK, "%s", p->why);
}

/* Whatever is current on the caller's thread — its own context on another
 * device, another device's primary context, or none — is current again
 * after every op, and the memory lands on the upstream's device. */
Test(cuda_double, the_callers_context_is_put_back_and_memory_lands_on_the_upstreams_device) {
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = driver("cuDevicePrimaryCtxRetain");
    CUcontext primary1 = NULL;
    cr_assert_eq(retain(&primary1, 1), CUDA_SUCCESS);
    ctx_probe cases[] = {
        {.mine = cuda_double_user_context(1), .device = 0},
        {.mine = primary1, .device = 0},
        {.mine = NULL, .device = 1},
        {.mine = cuda_double_user_context(0), .device = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_probe(&cases[i]);
        cr_assert(cases[i].kept, "case %zu: the caller's context %p was not current after every op", i,
                  cases[i].mine);
        cr_assert_eq(cases[i].on_device, 4 * MiB, "case %zu: %zu bytes on device %d", i, cases[i].on_device,
                     cases[i].device);
        cr_assert_eq(cases[i].elsewhere, 0, "case %zu: memory went to the caller's device", i);
    }
    assert_no_violation();
}

/* A context switch the driver refuses: the op fails and does nothing. */
Test(cuda_double, a_refused_context_switch_does_nothing) {
    cca_upstream *u = cuda0();
    unsigned long mallocs = cuda_double_calls("cudaMalloc"), creates = cuda_double_calls("cuMemCreate");
    void *x = (void *)1, *base = NULL;
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, 2 * g, &base), CCA_OK, "%s", cca_last_error());
    cuda_double_fail("cuCtxSetCurrent", 1, CUDA_ERROR_INVALID_CONTEXT, false);
    cr_assert_eq(cca_upstream_alloc(u, 4 * MiB, &x), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "cuCtxSetCurrent"), "%s", cca_last_error());
    cuda_double_fail("cuCtxGetCurrent", 1, CUDA_ERROR_UNKNOWN, false);
    cr_assert_eq(cca_upstream_vm_map(u, base, g), CCA_ERR_UPSTREAM);
    cr_assert_eq(cuda_double_calls("cudaMalloc"), mallocs);
    cr_assert_eq(cuda_double_calls("cuMemCreate"), creates);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.malloc_bytes[0] + s.physical_bytes[0] + s.mapped_bytes, 0);
    cr_assert_eq(ustats(u).allocations, 0);
    cr_assert_eq(cca_upstream_vm_map(u, base, g), CCA_OK, "the record is unchanged: %s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, base, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 2 * g), CCA_OK, "%s", cca_last_error());
    assert_no_violation();
    cca_upstream_destroy(u);
}

/* ---- log lines from inside an op ------------------------------------------------ */

/* A failing driver call on a cleanup path (the switch back to the caller's
 * context, a handle's cuMemRelease, ...) cannot change what the op did: it
 * is said in one log line. Those lines are made inside the op, which the
 * allocator calls under its lock and the vm ops make under the upstream's
 * vm lock; ccalloc.h promises that no line reaches the sink while a ccalloc
 * lock is held, so that a sink may call the library. probe_sink checks
 * that promise whenever it runs: the allocator's lock word is free (this
 * thread would be the holder), then it calls the library back: the
 * allocator's stats (its lock) and a vm_release of a range the upstream
 * never reserved, refused by its record before any driver call (the vm
 * lock). A lock this thread still held would make the call back wait for
 * ever, and the test's timeout fails it; with CCA_DEBUG >= 1 the library
 * aborts first (status.c). It counts lines, keeps the last naming `want`,
 * and adds up the bytes they say leak. */
typedef struct log_probe {
    cca_allocator *a; /* the allocator to check and call back; NULL: none */
    cca_upstream *u;  /* the upstream to call back (with vm ops); NULL: none */
    const char *want; /* NULL: every line */
    int lines, named, under_lock;
    size_t leaked;  /* "leaked: N bytes of device memory", added up */
    void *leak_map; /* the last such allocation that was mapped ("mapped at P"); NULL: none */
    char line[512];
} log_probe;

/* What the driver holds beside what is mapped: the leaked bytes, less a
 * leaked allocation still mapped (its memory is the mapping's until the
 * unmap). At most one leak per probe here. */
static size_t leaked_unmapped(const log_probe *p) {
    return p->leak_map && cuda_double_mapped(p->leak_map) ? 0 : p->leaked;
}

static void probe_sink(void *user, const char *line) {
    log_probe *p = user;
    p->lines++;
    if (!p->want || strstr(line, p->want)) {
        p->named++;
        snprintf(p->line, sizeof p->line, "%s", line);
    }
    const char *leak = strstr(line, "leaked: ");
    size_t n = 0;
    if (leak && strstr(leak, " bytes of device memory") && sscanf(leak, "leaked: %zu", &n) == 1)
        p->leaked += n;
    const char *at = strstr(line, "mapped at ");
    void *addr = NULL;
    if (leak && at && sscanf(at, "mapped at %p", &addr) == 1)
        p->leak_map = addr;
    if (p->a && atomic_load(&p->a->lock.state) != 0) {
        p->under_lock++; /* calling back would wait for ever */
        return;
    }
    if (p->a) {
        cca_stats s;
        cca_get_stats(p->a, &s);
    }
    size_t g = 0;
    if (p->u && cca_upstream_vm_granularity(p->u, &g) == CCA_OK) /* an address no range holds */
        cr_assert_eq(cca_upstream_vm_release(p->u, (void *)(uintptr_t)g, g), CCA_ERR_UPSTREAM);
}

static void watch_log(log_probe *p, cca_allocator *a, cca_upstream *u, const char *want) {
    *p = (log_probe){.a = a, .u = u, .want = want};
    cca_set_log_callback(probe_sink, p);
}

/* An op that switches to the device's primary context, with the switch
 * back refused (the caller's context destroyed meanwhile, say). */
enum { OP_ALLOC, OP_FREE, OP_MEM_INFO, OP_SYNCHRONIZE, OP_VM_RESERVE, OP_VM_MAP, OP_VM_UNMAP, OP_VM_RELEASE, OPS };
static const char *const op_names[OPS] = {"alloc",      "free",   "mem_info", "synchronize",
                                          "vm_reserve", "vm_map", "vm_unmap", "vm_release"};

static cca_status run_op(int op, cca_upstream *u, void **x, void **base, size_t g) {
    size_t f, t;
    switch (op) {
    case OP_ALLOC: return cca_upstream_alloc(u, 4 * MiB, x);
    case OP_FREE: return cca_upstream_free(u, *x, 4 * MiB);
    case OP_MEM_INFO: return cca_upstream_mem_info(u, &f, &t);
    case OP_SYNCHRONIZE: return cca_upstream_synchronize(u);
    case OP_VM_RESERVE: return cca_upstream_vm_reserve(u, 2 * g, base);
    case OP_VM_MAP: return cca_upstream_vm_map(u, *base, g);
    case OP_VM_UNMAP: return cca_upstream_vm_unmap(u, *base, g);
    default: return cca_upstream_vm_release(u, *base, 2 * g);
    }
}

/* The switch back refused: the op's result stands (each op here succeeds,
 * and its memory is the caller's as usual), the device's primary context
 * stays current on the thread, and exactly one line says so, naming the
 * device, cuCtxSetCurrent and the driver's error, by the time the op
 * returns. The same through the allocator (under its lock): a classic
 * allocation, a free that records an event, an allocation over pages and
 * the empty-cache that unmaps them: one line each, after the lock. */
Test(cuda_double, a_refused_switch_back_is_logged_once_and_the_op_stands, .timeout = 60) {
    PFN_cuCtxSetCurrent_v4000 set_current = driver("cuCtxSetCurrent");
    CUcontext mine = (CUcontext)cuda_double_user_context(1);
    cca_upstream *u = cuda0();
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    log_probe p;
    watch_log(&p, NULL, u, "cuCtxSetCurrent");
    void *x = NULL, *base = NULL;
    for (int op = 0; op < OPS; op++) {
        set_current(mine);
        cuda_double_fail("cuCtxSetCurrent", 2, CUDA_ERROR_INVALID_CONTEXT, false); /* 1: to the primary; 2: back */
        cr_assert_eq(run_op(op, u, &x, &base, g), CCA_OK, "%s: the op stands: %s", op_names[op], cca_last_error());
        cuda_double_clear_faults();
        cr_assert_eq(p.named, op + 1, "%s: one line each: %d", op_names[op], p.named);
        cr_assert_eq(cuda_double_current(), cuda_double_primary(0), "%s: the primary context stays current",
                     op_names[op]);
        cr_assert(strstr(p.line, "cuda:0: cuCtxSetCurrent back to the caller's context") &&
                      strstr(p.line, "failed: invalid device context (CUresult 201)") &&
                      strstr(p.line, "the op stands, and the device's primary context stays current on this thread"),
                  "%s: %s", op_names[op], p.line);
    }
    cr_assert_eq(p.lines, OPS, "no other line: %d", p.lines);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.malloc_bytes[0] + s.physical_bytes[0] + s.mapped_bytes + s.reservations, 0, "every op happened");

    static const struct {
        const char *conf;
        bool expandable;
    } allocators[] = {{"expandable:0,log_oom:0", false}, {"expandable:1,log_oom:0", true}};
    for (size_t i = 0; i < 2; i++) {
        cca_allocator *a = tu_allocator(u, allocators[i].conf);
        watch_log(&p, a, u, "cuCtxSetCurrent");
        set_current(mine);
        cuda_double_fail("cuCtxSetCurrent", 2, CUDA_ERROR_INVALID_CONTEXT, false); /* the first op's switch back */
        void *q = NULL;
        cr_assert_eq(cca_alloc(a, 5 * MiB, (cca_stream)0x100, &q), CCA_OK, "%s: %s", allocators[i].conf,
                     cca_last_error());
        cuda_double_clear_faults();
        cr_assert_eq(p.named, 1, "%s: cca_alloc: one line by its return: %d", allocators[i].conf, p.named);
        cr_assert_eq(cuda_double_current(), cuda_double_primary(0));
        cr_assert_eq(cca_record_stream(a, q, (cca_stream)0x200), CCA_OK);
        cuda_double_hold_events(true);
        set_current(mine);
        cuda_double_fail("cuCtxSetCurrent", 2, CUDA_ERROR_INVALID_CONTEXT, false); /* the event record's */
        cr_assert_eq(cca_free(a, q), CCA_OK, "%s", cca_last_error());
        cuda_double_clear_faults();
        cr_assert_eq(p.named, 2, "%s: cca_free: one line: %d", allocators[i].conf, p.named);
        cr_assert_eq(tu_stats(a).pending_blocks, 1, "%s: the free waits on the recorded event", allocators[i].conf);
        cuda_double_hold_events(false);
        set_current(mine);
        cuda_double_fail("cuCtxSetCurrent", 2, CUDA_ERROR_INVALID_CONTEXT, false);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error()); /* the segment goes back */
        cuda_double_clear_faults();
        cr_assert_eq(p.named, 3, "%s: cca_empty_cache: one line: %d", allocators[i].conf, p.named);
        cr_assert_eq(tu_stats(a).reserved_bytes, 0, "%s", allocators[i].conf);
        cr_assert_eq(p.under_lock, 0, "%s: %d lines reached the sink under the allocator's lock", allocators[i].conf,
                     p.under_lock);
        cr_assert_eq(p.lines, 3, "%s: %d lines", allocators[i].conf, p.lines);
        p.a = NULL; /* not called back while it is destroyed */
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    }
    cca_set_log_callback(NULL, NULL);
    set_current(NULL);
    cca_upstream_destroy(u);
    s = cuda_double_get_stats();
    cr_assert_eq(s.malloc_bytes[0] + s.physical_bytes[0] + s.mapped_bytes + s.reservations + s.handles, 0);
    assert_no_violation();
}

/* A handle's cuMemRelease refused, after its map (granule k of a map of
 * GRANULES): the map stands (CCA_OK, every granule mapped and accessible)
 * and one line names cuMemRelease and the bytes that leak: that granule's
 * memory is not freed by its unmap. Unmapped, the driver holds exactly
 * that one allocation; nothing else is lost and nothing released twice
 * (the double counts a second release as a violation). Then the undo of a
 * map: cuMemMap refused at granule k and the release of the memory made
 * for it refused too: the map fails with cuMemMap's error, the granules
 * before k are unmapped and freed, and the line says that allocation
 * leaks. Through the allocator, the line comes after its lock. */
Test(cuda_double, a_refused_release_of_a_handle_is_logged_and_leaks_that_handle_only, .timeout = 60) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = cuda0_pages();
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, GRANULES * g, &base), CCA_OK, "%s", cca_last_error());
    log_probe p;
    for (unsigned long k = 1; k <= GRANULES; k++) {
        watch_log(&p, NULL, u, "cuMemRelease");
        cuda_double_fail("cuMemRelease", k, CUDA_ERROR_UNKNOWN, false);
        cr_assert_eq(cca_upstream_vm_map(u, base, GRANULES * g), CCA_OK, "granule %lu: %s", k, cca_last_error());
        cuda_double_clear_faults();
        cr_assert_eq(p.lines, 1, "granule %lu: %d lines", k, p.lines);
        char want[160];
        snprintf(want, sizeof want, "cuda:0: cuMemRelease of the allocation mapped at %p (%zu bytes) failed",
                 (void *)((char *)base + (k - 1) * g), g);
        cr_assert(strstr(p.line, want) && strstr(p.line, "unknown error (CUresult 999)"), "granule %lu: %s", k, p.line);
        cr_assert_eq(p.leaked, g, "granule %lu: %s", k, p.line);
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, GRANULES * g, "granule %lu: the map stands", k);
        cr_assert_eq(s.accessible_bytes, GRANULES * g);
        cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
        s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, 0);
        cr_assert_eq(s.handles, 1, "granule %lu: exactly the one allocation stays: %zu", k, s.handles);
        cr_assert_eq(s.physical_bytes[0], g, "granule %lu: %zu bytes stay", k, s.physical_bytes[0]);
        cr_assert_eq(ustats(u).vm_mapped_bytes, 0);
        cr_assert_eq(cuda_double_free_leaked_handles(), 1);
        assert_no_violation();
    }
    for (unsigned long k = 1; k <= GRANULES; k++) {
        watch_log(&p, NULL, u, "cuMemRelease");
        cuda_double_fail("cuMemMap", k, CUDA_ERROR_UNKNOWN, false);
        cuda_double_fail("cuMemRelease", k, CUDA_ERROR_UNKNOWN, false); /* the release of granule k's memory */
        cr_assert_eq(cca_upstream_vm_map(u, base, GRANULES * g), CCA_ERR_UPSTREAM, "granule %lu", k);
        cr_assert(strstr(cca_last_error(), "cuMemMap"), "granule %lu: %s", k, cca_last_error());
        cuda_double_clear_faults();
        cr_assert_eq(p.lines, 1, "granule %lu: %d lines", k, p.lines);
        char want[200];
        snprintf(want, sizeof want,
                 "cuda:0: cuMemRelease of the allocation made for %p (%zu bytes), whose cuMemMap failed, failed",
                 (void *)((char *)base + (k - 1) * g), g);
        cr_assert(strstr(p.line, want), "granule %lu: %s", k, p.line);
        cr_assert_eq(p.leaked, g, "granule %lu: %s", k, p.line);
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, 0, "granule %lu: the granules before it unmapped", k);
        cr_assert_eq(s.handles, 1, "granule %lu: %zu allocations stay", k, s.handles);
        cr_assert_eq(s.physical_bytes[0], g);
        cr_assert_eq(ustats(u).vm_mapped_bytes, 0);
        cr_assert_eq(cuda_double_free_leaked_handles(), 1);
        cr_assert_eq(cca_upstream_vm_map(u, base, GRANULES * g), CCA_OK, "the record is unchanged: %s",
                     cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());
        assert_no_violation();
    }
    cr_assert_eq(cca_upstream_vm_release(u, base, GRANULES * g), CCA_OK, "%s", cca_last_error());

    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    watch_log(&p, a, u, "cuMemRelease");
    cuda_double_fail("cuMemRelease", 1, CUDA_ERROR_UNKNOWN, false);
    void *q = tu_alloc(a, 5 * MiB, NULL);
    cuda_double_clear_faults();
    cr_assert_eq(p.named, 1, "one line by cca_alloc's return: %d", p.named);
    cr_assert_eq(p.under_lock, 0);
    tu_free(a, q);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.physical_bytes[0], p.leaked, "what stays is what the line said: %zu, %zu", s.physical_bytes[0],
                 p.leaked);
    cr_assert_eq(p.leaked, g);
    cr_assert_eq(p.lines, 1);
    p.a = NULL;
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(cuda_double_free_leaked_handles(), 1);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* The other cleanup steps the driver may refuse, each logged once with what
 * stays behind, the op's result unchanged: the primary context's release
 * by cca_upstream_destroy and by a creation that fails after retaining it
 * (one retain stays: the driver keeps the context), the event of a refused
 * cudaEventRecord that cudaEventDestroy will not take (the free
 * synchronizes instead, as for any refused record), and a reservation that
 * could not be recorded (no host memory) and that cuMemAddressFree will not
 * give back (the range stays reserved). */
Test(cuda_double, refused_cleanups_are_logged_and_change_no_result, .timeout = 60) {
    log_probe p;
    watch_log(&p, NULL, NULL, "cuDevicePrimaryCtxRelease");
    cca_upstream *u = cuda0();
    cuda_double_fail("cuDevicePrimaryCtxRelease", 1, CUDA_ERROR_UNKNOWN, false);
    cca_upstream_destroy(u);
    cuda_double_clear_faults();
    cr_assert_eq(p.named, 1, "%d", p.named);
    cr_assert(strstr(p.line, "cuda:0: cuDevicePrimaryCtxRelease failed: unknown error (CUresult 999)"), "%s", p.line);
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 1, "the retain stays");

    cuda_double_fail("cudaFree", 1, cudaErrorMemoryAllocation, false); /* the creation's cudaFree(NULL) */
    cuda_double_fail("cuDevicePrimaryCtxRelease", 1, CUDA_ERROR_UNKNOWN, false);
    cr_assert_eq(cca_upstream_cuda_create(0, &u), CCA_ERR_OUT_OF_MEMORY, "the creation's own failure");
    cr_assert(strstr(cca_last_error(), "context creation"), "%s", cca_last_error());
    cuda_double_clear_faults();
    cr_assert_eq(p.named, 2, "%d", p.named);
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 2);

    u = cuda0();
    cca_allocator *a = tu_allocator(u, "log_oom:0");
    watch_log(&p, a, u, "cudaEventDestroy");
    void *q = tu_alloc(a, MiB, (cca_stream)0x100);
    cr_assert_eq(cca_record_stream(a, q, (cca_stream)0x200), CCA_OK);
    cuda_double_fail("cudaEventRecord", 1, cudaErrorLaunchFailure, false);
    cuda_double_fail("cudaEventDestroy", 1, cudaErrorLaunchFailure, false);
    unsigned long syncs = cuda_double_get_stats().syncs;
    cr_assert_eq(cca_free(a, q), CCA_OK, "%s", cca_last_error());
    cuda_double_clear_faults();
    cr_assert_eq(cuda_double_get_stats().syncs, syncs + 1, "a refused record: the free synchronizes instead");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(p.named, 1, "%d", p.named);
    cr_assert(strstr(p.line, "cuda:0: cudaEventDestroy of the event whose cudaEventRecord failed, failed"), "%s",
              p.line);
    cr_assert_eq(p.under_lock, 0);
    p.a = NULL;
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());

    watch_log(&p, NULL, u, "cuMemAddressFree");
    size_t g = 0;
    void *base = (void *)1;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, 4 * g, &base), CCA_OK); /* the double's own tables grown first */
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * g), CCA_OK);
    cuda_double_fail("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN, false);
    tu_malloc_arm(1, false); /* the record of the range */
    cca_status st = cca_upstream_vm_reserve(u, 4 * g, &base);
    tu_malloc_disarm();
    cuda_double_clear_faults();
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "host malloc failed recording a range"), "%s", cca_last_error());
    cr_assert_null(base);
    cr_assert_eq(p.named, 1, "%d", p.named);
    cr_assert(strstr(p.line, "cuMemAddressFree of") && strstr(p.line, "the range stays reserved"), "%s", p.line);
    cr_assert_eq(cuda_double_get_stats().reservations, 1, "the range the driver kept");
    cr_assert_eq(ustats(u).vm_reserved_bytes, 0, "not the upstream's: it never handed it out");
    cca_set_log_callback(NULL, NULL);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- creation ------------------------------------------------------------------- */

static cca_status create_with(cuda_double_config c, int device, cca_upstream **u) {
    cuda_double_configure(&c);
    *u = NULL;
    return cca_upstream_cuda_create(device, u);
}

Test(cuda_double, creation_says_why_without_a_device_a_driver_function_or_vmm) {
    cuda_double_config c = cuda_double_defaults();
    cca_upstream *u;
    c.devices = 0;
    cr_assert_eq(create_with(c, 0, &u), CCA_ERR_NO_DEVICE);
    cr_assert_null(u);
    cr_assert(strstr(cca_last_error(), "no usable GPU"), "%s", cca_last_error());
    c = cuda_double_defaults();
    cr_assert_eq(create_with(c, 2, &u), CCA_ERR_INVALID_ARGUMENT, "device 2 of 2");
    cr_assert_eq(create_with(c, -1, &u), CCA_ERR_INVALID_ARGUMENT);
    c.hidden = "cuCtxGetCurrent";
    cr_assert_eq(create_with(c, 0, &u), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "the driver has no cuCtxGetCurrent"), "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 0);
    /* no VMM: created, without the vm ops, the reason kept for later */
    static const struct {
        const char *hidden;
        bool vmm;
        size_t granularity;
        const char *why;
    } novm[] = {
        {"cuMemSetAccess", true, 2 * MiB, "the driver has no cuMemSetAccess"},
        {NULL, false, 2 * MiB, "does not support virtual memory management"},
        {NULL, true, 3 * MiB, "no usable granularity (3145728)"},
        {NULL, true, 0, "no usable granularity (0)"},
    };
    for (size_t i = 0; i < sizeof novm / sizeof *novm; i++) {
        c = cuda_double_defaults();
        c.hidden = novm[i].hidden;
        c.vmm = novm[i].vmm;
        c.granularity = novm[i].granularity;
        cr_assert_eq(create_with(c, 0, &u), CCA_OK, "case %zu: %s", i, cca_last_error());
        cr_assert_not(cca_upstream_has_vm(u), "case %zu", i);
        void *base;
        cr_assert_eq(cca_upstream_vm_reserve(u, 2 * MiB, &base), CCA_ERR_UPSTREAM, "case %zu", i);
        cr_assert(strstr(cca_last_error(), novm[i].why), "case %zu: %s", i, cca_last_error());
        cca_upstream_destroy(u);
        cr_assert_eq(cuda_double_get_stats().primary_refs[0], 0, "case %zu: the primary context stays retained", i);
    }
    assert_no_violation();
}

/* The primary context is retained once by a created upstream, released by
 * its destroy, and released again when creation fails after retaining it. */
Test(cuda_double, the_primary_context_is_retained_for_the_upstreams_life) {
    cca_upstream *u = cuda0(), *v = NULL;
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 1);
    cuda_double_fail("cudaFree", 1, cudaErrorMemoryAllocation, false); /* the runtime's state in the context */
    cr_assert_eq(cca_upstream_cuda_create(0, &v), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(v);
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 1, "a failed creation keeps its retain");
    cuda_double_fail("cuDevicePrimaryCtxRetain", 1, CUDA_ERROR_OUT_OF_MEMORY, false);
    cr_assert_eq(cca_upstream_cuda_create(0, &v), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 1);
    cca_upstream_destroy(u);
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 0);
    assert_no_violation();
}

/* ---- the allocator over the double ------------------------------------------------- */

/* What the driver holds is what the allocator says it maps: the double's
 * physical and mapped bytes equal the stats' mapped_bytes and the
 * upstream's vm_mapped_bytes, and every mapped byte is accessible. */
static void expect_accounts_agree_leaking(cca_allocator *a, cca_upstream *u, size_t leaked, const char *when) {
    cca_stats st = tu_stats(a);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes, st.mapped_bytes, "%s: the driver maps %zu, the allocator says %zu", when,
                 s.mapped_bytes, st.mapped_bytes);
    cr_assert_eq(s.physical_bytes[0], st.mapped_bytes + leaked,
                 "%s: %zu bytes of device memory, %zu mapped, %zu leaked", when, s.physical_bytes[0], st.mapped_bytes,
                 leaked);
    cr_assert_eq(s.accessible_bytes, s.mapped_bytes, "%s: mapped but not made accessible", when);
    cr_assert_eq(ustats(u).vm_mapped_bytes, st.mapped_bytes, "%s", when);
    cr_assert_eq(s.malloc_bytes[0], st.reserved_bytes - st.mapped_bytes, "%s: classic segments", when);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", when, cca_last_error());
}

/* The same where nothing leaked: the driver holds exactly what is mapped. */
static void expect_accounts_agree(cca_allocator *a, cca_upstream *u, const char *when) {
    expect_accounts_agree_leaking(a, u, 0, when);
}

/* Every byte of a live block is device memory the device may touch. */
static void touch(void *p, size_t size) {
    cr_assert_eq(cudaMemset(p, 0xab, 1), cudaSuccess, "the first byte of %p (%zu)", p, size);
    cr_assert_eq(cudaMemset((char *)p + size - 1, 0xcd, 1), cudaSuccess, "the last byte of %p (%zu)", p, size);
}

#define SLOTS 48

/* A seeded sequence of allocations (512 B - 48 MiB, three streams, events
 * held back at times so frees wait), frees, record_stream, trims and
 * empty-caches over expandable segments, the accounts compared after
 * every step; at the end nothing is left with the driver. Returns the
 * OOMs it met. */
static uint64_t random_sequence(const char *conf, uint64_t seed) {
    cca_upstream *u = cuda0();
    cca_allocator *a = tu_allocator(u, conf);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess); /* the test's own cudaMemset: in device 0's context */
    void *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    uint64_t rng = seed;
    size_t pending_seen = 0;
    cca_stream streams[3] = {NULL, (cca_stream)0x100, (cca_stream)0x200};
    for (int step = 0; step < 1500; step++) {
        uint64_t r = tu_rand(&rng);
        size_t i = (size_t)(r >> 8) % SLOTS;
        char when[64];
        snprintf(when, sizeof when, "seed %llu step %d", (unsigned long long)seed, step);
        switch (r % 16) {
        case 0:
            cr_assert_eq(cca_trim(a, (size_t)(tu_rand(&rng) % (256 * MiB)), NULL), CCA_OK, "%s: %s", when,
                         cca_last_error());
            break;
        case 1:
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s: %s", when, cca_last_error());
            break;
        case 2:
            cuda_double_hold_events(tu_rand(&rng) % 2);
            break;
        case 3:
            if (slot[i])
                cr_assert_eq(cca_record_stream(a, slot[i], streams[tu_rand(&rng) % 3]), CCA_OK, "%s: %s", when,
                             cca_last_error());
            break;
        default:
            if (slot[i]) {
                cr_assert_eq(cca_free(a, slot[i]), CCA_OK, "%s: %s", when, cca_last_error());
                slot[i] = NULL;
            } else {
                uint64_t k = tu_rand(&rng);
                size[i] = k % 4 == 0 ? 512 + (size_t)(k >> 8) % (48 * MiB) : 512 + (size_t)(k >> 8) % (2 * MiB);
                cca_status st = cca_alloc(a, size[i], streams[k % 3], &slot[i]);
                cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s: %s", when, cca_last_error());
                if (st == CCA_OK)
                    touch(slot[i], size[i]);
            }
        }
        expect_accounts_agree(a, u, when);
        pending_seen += tu_stats(a).pending_blocks > 0;
    }
    cca_stats end = tu_stats(a);
    cr_log_info("%s, seed %llu: peak %zu MiB reserved, %llu maps, %llu unmaps, %llu OOMs, %zu steps with pending frees",
                conf, (unsigned long long)seed, end.reserved_bytes_peak >> 20, (unsigned long long)end.vm_maps,
                (unsigned long long)end.vm_unmaps, (unsigned long long)end.ooms, pending_seen);
    cr_assert_gt(end.reserved_bytes_peak, 64 * MiB, "the sequence used the device");
    cr_assert_gt(pending_seen, 0, "frees waited on held events");
    cuda_double_hold_events(false);
    for (size_t i = 0; i < SLOTS; i++)
        if (slot[i])
            cr_assert_eq(cca_free(a, slot[i]), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    expect_accounts_agree(a, u, "after the last empty-cache");
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.reservations + s.handles, 0,
                 "left with the driver: %zu mapped, %zu physical, %zu ranges", s.mapped_bytes, s.physical_bytes[0],
                 s.reservations);
    cr_assert_eq(s.malloc_bytes[0], 0);
    cca_upstream_destroy(u);
    assert_no_violation();
    return end.ooms;
}

Test(cuda_double, expandable_sequences_keep_the_driver_and_the_allocator_in_step, .timeout = 120) {
    for (uint64_t seed = 1; seed <= 4; seed++)
        random_sequence("expandable:1,log_oom:0", seed);
}

Test(cuda_double, greedy_expandable_and_classic_sequences_too, .timeout = 120) {
    random_sequence("expandable:1,policy:greedy,greedy_bytes:1G,log_oom:0", 5);
    random_sequence("expandable:0,log_oom:0", 6);
}

/* cca_destroy synchronizes the device before it unmaps (queued kernels may
 * still use freed pages), and when that synchronize fails it unmaps
 * nothing and says how much it left mapped. */
Test(cuda_double, destroy_synchronizes_before_it_unmaps) {
    cca_upstream *u = cuda0();
    cca_allocator *a = tu_allocator(u, "expandable:1");
    void *p = tu_alloc(a, 6 * MiB, (cca_stream)0x100), *q = tu_alloc(a, 3 * MiB, NULL);
    tu_free(a, p);
    tu_free(a, q);
    unsigned long syncs = cuda_double_get_stats().syncs;
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().syncs, syncs + 1);
    const char *log = cuda_double_log(), *sync = strstr(log, "cudaDeviceSynchronize"), *unmap = strstr(log, "cuMemUnmap");
    cr_assert(sync && unmap && sync < unmap, "the calls of cca_destroy, in order: %s", log);
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, 0);

    a = tu_allocator(u, "expandable:1");
    p = tu_alloc(a, 6 * MiB, NULL);
    tu_free(a, p);
    size_t mapped = tu_stats(a).mapped_bytes;
    cr_assert_gt(mapped, 0);
    cuda_double_fail("cudaDeviceSynchronize", 1, cudaErrorLaunchFailure, true);
    unsigned long unmaps = cuda_double_calls("cuMemUnmap");
    cr_assert_eq(cca_destroy(a), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "left mapped"), "%s", cca_last_error());
    cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps, "pages were unmapped without a synchronize");
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, mapped);
    cuda_double_clear_faults();
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* The allocator's event queries leave the thread's last error as the
 * caller would have it, whether or not the runtime records "not ready"
 * there (cuda_double_config): recorded, it is cleared (the caller must not
 * find a "not ready" of the allocator's; the runtime has already put it in
 * place of any earlier error); not recorded, the caller's own pending
 * error (a launch it has not checked yet) stays. */
Test(cuda_double, event_queries_leave_the_callers_pending_error) {
    for (int unrecorded = 0; unrecorded < 2; unrecorded++) {
        cuda_double_config c = cuda_double_defaults();
        c.not_ready_unrecorded = unrecorded;
        cuda_double_configure(&c);
        cca_upstream *u = cuda0();
        cca_allocator *a = tu_allocator(u, NULL);
        cuda_double_hold_events(true);
        void *p = tu_alloc(a, 1 * MiB, (cca_stream)0x100);
        cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x200), CCA_OK, "%s", cca_last_error());
        tu_free(a, p); /* pending on 0x200's event, held: not ready */
        cr_assert_eq(tu_stats(a).pending_blocks, 1);
        /* the caller's error, as an unchecked launch would leave it */
        cuda_double_fail("cudaMemGetInfo", 1, cudaErrorInvalidValue, false);
        size_t f, t;
        cr_assert_eq(cudaMemGetInfo(&f, &t), cudaErrorInvalidValue);
        void *q = tu_alloc(a, 4096, (cca_stream)0x100); /* step 3 queries the held event */
        cr_assert_eq(tu_stats(a).pending_blocks, 1, "the event is still not ready");
        cudaError_t want = unrecorded ? cudaErrorInvalidValue : cudaSuccess;
        cr_assert_eq(cudaPeekAtLastError(), want, "not ready %s: the last error is %d, not %d",
                     unrecorded ? "unrecorded" : "recorded", (int)cudaPeekAtLastError(), (int)want);
        (void)cudaGetLastError();
        /* with no error of the caller's, a recorded "not ready" is cleared */
        void *r = tu_alloc(a, 4096, (cca_stream)0x100);
        cr_assert_eq(cudaPeekAtLastError(), cudaSuccess, "a \"not ready\" was left in the last error");
        tu_free(a, q);
        tu_free(a, r);
        cuda_double_hold_events(false);
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
        cca_upstream_destroy(u);
        assert_no_violation();
        cuda_double_clear_faults();
    }
    cuda_double_config c = cuda_double_defaults();
    cuda_double_configure(&c);
}

Test(cuda_double, sequences_on_a_small_device_run_out_and_recover, .timeout = 120) {
    cuda_double_config c = cuda_double_defaults();
    c.device_bytes = 576 * MiB; /* 320 MiB free beside the context: the sequences need more */
    cuda_double_configure(&c);
    cr_assert_gt(random_sequence("expandable:1,log_oom:0", 7), 0, "the device never ran out");
    cr_assert_gt(random_sequence("expandable:0,log_oom:0", 8), 0, "the device never ran out");
}

/* ---- every driver call of a script failing in turn --------------------------------- */

/* A fixed script (over expandable segments, or classic ones): grow, free with a held event,
 * trim with live blocks, an OOM retry, empty-cache. `fn` names the function
 * whose k-th call fails ("*": the k-th call of any function, counted from
 * the allocator's creation: cuda_double_fail_call). Each op may fail only
 * with a status the header documents for it; whatever fails, the
 * allocator's accounts equal the driver's after every op, and at the end
 * nothing stays with the driver but what a log line said leaks. The log
 * (probe_sink: never under a lock) has a line only for a refused cleanup,
 * one at most: a cuMemRelease (its line names it and the bytes that leak,
 * which the accounts allow for), a refused event_destroy op (the wrapper's
 * line: its cudaEventDestroy, or entering the context for it, failed), a
 * failed event_query op (the wrapper's line, likewise), or
 * the switch back to the caller's (no)
 * context, which leaves the primary context current: then, and only then,
 * a line names cuCtxSetCurrent. The script runs with no context current,
 * and puts none back at its end. Returns the calls of `fn` it made. */
static size_t script_pages = 1; /* the upstream's page, in the driver's minimum granules (sweep_pages) */

/* Runs of script() whose log had the line of a refused release, and of a
 * refused switch back: a sweep of every call must meet both. */
static unsigned long logged_releases, logged_switch_backs;

/* The check of script()'s log once its faults are cleared: which call failed decides what lines are due. */
static bool expect_log_of_the_fault(const log_probe *p, const char *when) {
    const char *failed = cuda_double_last_fault();
    cr_assert_eq(p->under_lock, 0, "%s: a line reached the sink under the allocator's lock", when);
    bool primary_kept = cuda_double_current() != NULL; /* a switch back to "none" was refused */
    /* a refused event_destroy op is the wrapper's line: the failed call was
     * the op's own (cudaEventDestroy, or entering the context for it) */
    bool event_kept = p->lines == 1 && strstr(p->line, "event_destroy") != NULL;
    if (strcmp(failed, "cudaEventDestroy") == 0)
        cr_assert(event_kept, "%s: a refused cudaEventDestroy is logged: %d lines, the last: %s", when, p->lines,
                  p->line);
    if (event_kept)
        cr_assert(!strcmp(failed, "cudaEventDestroy") || !strcmp(failed, "cuCtxGetCurrent") ||
                      (!strcmp(failed, "cuCtxSetCurrent") && !primary_kept),
                  "%s: an event_destroy line for the failed call '%s': %s", when, failed, p->line);
    /* a failed event_query op is the wrapper's line too (the first of a run
     * of failures): its cudaEventQuery, or entering the context for it */
    bool query_failed = p->lines == 1 && strstr(p->line, "event_query") != NULL;
    if (strcmp(failed, "cudaEventQuery") == 0)
        cr_assert(query_failed, "%s: a failed cudaEventQuery is logged: %d lines, the last: %s", when, p->lines,
                  p->line);
    if (query_failed) {
        cr_assert(!strcmp(failed, "cudaEventQuery") || !strcmp(failed, "cuCtxGetCurrent") ||
                      (!strcmp(failed, "cuCtxSetCurrent") && !primary_kept),
                  "%s: an event_query line for the failed call '%s': %s", when, failed, p->line);
        cr_assert(strstr(p->line, "upstream 'cuda:0' event_query"), "%s: %s", when, p->line);
    }
    /* a refused host_free at a wake is sleep.c's line: its cudaFreeHost (registered: cudaHostUnregister), or
     * entering the context for it */
    bool host_kept = p->lines == 1 && strstr(p->line, "host memory") != NULL;
    const char *host_free = script_host_memory == CCA_HOST_MEMORY_REGISTERED ? "cudaHostUnregister" : "cudaFreeHost";
    if (strcmp(failed, host_free) == 0)
        cr_assert(host_kept, "%s: a refused %s is logged: %d lines, the last: %s", when, host_free, p->lines, p->line);
    if (host_kept)
        cr_assert(!strcmp(failed, host_free) || !strcmp(failed, "cuCtxGetCurrent") ||
                      (!strcmp(failed, "cuCtxSetCurrent") && !primary_kept),
                  "%s: a host memory line for the failed call '%s': %s", when, failed, p->line);
    int due = strcmp(failed, "cuMemRelease") == 0 || primary_kept || event_kept || query_failed || host_kept;
    cr_assert_eq(p->lines, due, "%s (the failed call: '%s'): %d lines, the last: %s", when, failed, p->lines, p->line);
    logged_releases += due && !primary_kept;
    logged_switch_backs += primary_kept;
    if (primary_kept) {
        cr_assert_str_eq(failed, "cuCtxSetCurrent", "%s", when);
        cr_assert_eq(cuda_double_current(), cuda_double_primary(0), "%s", when);
        cr_assert(strstr(p->line, "cuCtxSetCurrent back to the caller's context"), "%s: %s", when, p->line);
    } else if (event_kept) {
        cr_assert(strstr(p->line, "upstream 'cuda:0' event_destroy"), "%s: %s", when, p->line);
        cr_assert_eq(p->leaked, 0, "%s", when);
    } else if (query_failed || host_kept) {
        cr_assert_eq(p->leaked, 0, "%s", when);
    } else if (due) {
        cr_assert(strstr(p->line, "cuda:0: cuMemRelease of the allocation"), "%s: %s", when, p->line);
        cr_assert_eq(p->leaked, script_pages * cuda_double_defaults().granularity, "%s: %s", when, p->line);
    }
    if (!due)
        cr_assert_eq(p->leaked, 0, "%s", when);
    return host_kept;
}

/* The script also sleeps and wakes the default domain (the sweeps of the
 * calls sleep and wake make, and one of every call): off for the others,
 * whose runs it would only lengthen. */
static bool script_sleeps;
/* The calls of fn the clean run made before the sleep, and up to the wake's end (script_sleeps). */
static unsigned long sleep_first, sleep_last;

static unsigned long script(const char *conf, const char *fn, unsigned long k) {
    cuda_double_config c = cuda_double_defaults();
    c.device_bytes = 1280 * MiB; /* 1 GiB free beside the context */
    cuda_double_configure(&c);
    cca_upstream *u = cuda_paged(script_pages * c.granularity);
    cca_allocator *a = tu_allocator(u, conf);
    cr_assert_null(cuda_double_current(), "the script starts with no context current");
    log_probe log;
    watch_log(&log, a, u, NULL);
    bool any = strcmp(fn, "*") == 0;
    unsigned long before = cuda_double_calls(fn);
    if (any)
        cuda_double_fail_call(k);
    else
        cuda_double_fail(fn, k, !strncmp(fn, "cu", 2) && strncmp(fn, "cuda", 4) ? CUDA_ERROR_UNKNOWN
                                                                                : cudaErrorLaunchFailure,
                         false);
    char when[96];
    void *p[6] = {0};
    static const size_t sizes[6] = {3 * MiB, 40 * MiB, 700, 100 * MiB, 64 * MiB, 5 * MiB};
    cca_config cfg;
    cr_assert_eq(cca_get_config(a, &cfg), CCA_OK);
    bool large = false; /* a block of the large pool's segments (large_min or more) asked for */
    for (int i = 0; i < 6; i++) {
        snprintf(when, sizeof when, "%s failing at call %lu: alloc %d", fn, k, i);
        /* a sleeping script copies every live byte twice: its blocks over 8 MiB a 32nd as
         * large, but the largest, 100 MiB, is large_min (5 pages): one of the large pool */
        size_t size = sizes[i];
        if (script_sleeps && size > 8 * MiB)
            size = size == 100 * MiB ? cfg.large_min : size / 32;
        large |= size >= cfg.large_min;
        cca_status st = cca_alloc(a, size, i % 2 ? (cca_stream)0x100 : NULL, &p[i]);
        cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "%s: %d %s", when, st,
                  cca_last_error());
        expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    }
    /* the sleep and wake meet every pool's segments: small, medium and large */
    cr_assert(large, "%s: no block of large_min (%zu) or more", when, cfg.large_min);
    /* sleep and wake the default domain (classic segments: refused, no call);
     * a wake refused by the fault is tried again, and succeeds */
    snprintf(when, sizeof when, "%s failing at call %lu: sleep", fn, k);
    if (p[0])
        memset(p[0], 0x5a, sizes[0]);
    sleep_first = cuda_double_calls(fn) - before;
    cca_status st = script_sleeps ? cca_domain_sleep(a, NULL, 0, NULL) : CCA_OK;
    cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_OUT_OF_MEMORY, "%s: %d %s", when, st,
              cca_last_error());
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", when, cca_last_error());
    expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    if (log.leak_map && !cuda_double_mapped(log.leak_map)) /* the sleep unmapped a leaked allocation: */
        log.leak_map = NULL; /* its memory stays leaked, whatever the wake maps at that address again */
    snprintf(when, sizeof when, "%s failing at call %lu: wake", fn, k);
    if ((st = cca_domain_wake(a, NULL, NULL)) != CCA_OK)
        st = cca_domain_wake(a, NULL, NULL);
    cr_assert_eq(st, CCA_OK, "%s: %s", when, cca_last_error());
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", when, cca_last_error());
    expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    sleep_last = cuda_double_calls(fn) - before;
    size_t changed = p[0] ? tu_bytes_not(p[0], sizes[0], 0x5a) : 0;
    cr_assert_eq(changed, 0, "%s: %zu bytes of a block changed", when, changed);
    cuda_double_hold_events(true);
    if (p[1]) {
        st = cca_record_stream(a, p[1], (cca_stream)0x200);
        cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    }
    for (int i = 0; i < 6; i += 2) {
        if (p[i] && i != 4) {
            cr_assert_eq(cca_free(a, p[i]), CCA_OK, "%s", cca_last_error());
            p[i] = NULL;
        }
    }
    if (p[1]) { /* pending on the held event; or, its record failed, waited for by a synchronize */
        st = cca_free(a, p[1]);
        cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM, "%s", cca_last_error());
        p[1] = NULL;
    }
    snprintf(when, sizeof when, "%s failing at call %lu: trim", fn, k);
    st = cca_trim(a, 0, NULL); /* NOT_READY: an event query failed after the synchronize (kept pending) */
    cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_NOT_READY, "%s: %d %s", when, st,
              cca_last_error());
    expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    void *big = NULL; /* above what is free with the cache: the OOM retry returns cached pages first */
    snprintf(when, sizeof when, "%s failing at call %lu: the retry", fn, k);
    st = cca_alloc(a, 900 * MiB, NULL, &big);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "%s: %d %s", when, st,
              cca_last_error());
    expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    cuda_double_hold_events(false);
    if (big)
        tu_free(a, big);
    for (int i = 0; i < 6; i++)
        if (p[i])
            tu_free(a, p[i]);
    unsigned long made = cuda_double_calls(fn) - before;
    cuda_double_clear_faults();
    snprintf(when, sizeof when, "%s failing at call %lu: the end", fn, k);
    bool host_kept = expect_log_of_the_fault(&log, when);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s: %s", when, cca_last_error());
    expect_accounts_agree_leaking(a, u, leaked_unmapped(&log), when);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0, "%s", when);
    log.a = NULL; /* not called back while it is destroyed */
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s: %s", when, cca_last_error());
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes + s.reservations + s.malloc_bytes[0], 0, "%s: left with the driver", when);
    cr_assert_eq(s.physical_bytes[0], log.leaked, "%s: left with the driver: %zu bytes", when, s.physical_bytes[0]);
    cr_assert_eq(s.handles, log.leaked ? 1 : 0, "%s", when);
    cr_assert_eq(cuda_double_free_pinned() != 0, host_kept, "%s: pinned memory left exactly when a line said so", when);
    cr_assert_eq(cuda_double_free_leaked_handles(), s.handles);
    cca_set_log_callback(NULL, NULL);
    PFN_cuCtxSetCurrent_v4000 set_current = driver("cuCtxSetCurrent");
    set_current(NULL);
    cca_upstream_destroy(u);
    assert_no_violation();
    return made;
}

/* The script once clean, counting fn's calls, then once with each of those
 * calls failing in turn; every run leaves the double as it found it. */
static void sweep_with(const char *conf, const char *fn) {
    unsigned long calls = script(conf, fn, 1000000); /* counted, never fired */
    cr_assert_gt(calls, 0, "the script never calls %s", fn);
    unsigned long lo = 1, hi = calls; /* a sleeping script: the calls of its sleep and wake (the rest: sweep) */
    if (script_sleeps)
        lo = sleep_first + 1, hi = sleep_last;
    cr_assert_leq(lo, hi, "the sleep and wake never call %s", fn);
    for (unsigned long k = lo; k <= hi; k++) {
        if (getenv("CCA_SWEEP_TRACE"))
            fprintf(stderr, "sweep %s %lu/%lu\n", fn, k, calls);
        script(conf, fn, k);
    }
    cr_log_info("%s, %s: failed at each of its %lu calls in turn", conf, fn, calls);
}

static void sweep(const char *fn) {
    sweep_with("expandable:1,log_oom:0", fn);
}

/* The same over classic segments (cudaMalloc, cudaFree). */
static void sweep_classic(const char *fn) {
    sweep_with("expandable:0,log_oom:0", fn);
}

/* The same over pages of 4 and 16 of the driver's granules (one cuMemCreate
 * each, cca_cuda_options.vm_granularity). */
static void sweep_pages(const char *fn) {
    static const size_t pages[] = {4, 16};
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        script_pages = pages[i];
        sweep(fn);
    }
    script_pages = 1;
}

Test(cuda_double, sweep_cuMemCreate, .timeout = 120) { sweep("cuMemCreate"); }
Test(cuda_double, sweep_cuMemMap, .timeout = 120) { sweep("cuMemMap"); }
Test(cuda_double, sweep_cuMemSetAccess) { sweep("cuMemSetAccess"); }
Test(cuda_double, sweep_cuMemUnmap, .timeout = 120) { sweep("cuMemUnmap"); }
Test(cuda_double, sweep_cuMemAddressReserve) { sweep("cuMemAddressReserve"); }
Test(cuda_double, sweep_cuMemAddressFree) { sweep("cuMemAddressFree"); }
Test(cuda_double, sweep_cuCtxSetCurrent, .timeout = 120) { sweep("cuCtxSetCurrent"); }
Test(cuda_double, sweep_cudaMemGetInfo) { sweep("cudaMemGetInfo"); }
Test(cuda_double, sweep_cudaDeviceSynchronize) { sweep_classic("cudaDeviceSynchronize"); } /* classic trims */
Test(cuda_double, sweep_cudaStreamSynchronize) { sweep("cudaStreamSynchronize"); }
Test(cuda_double, sweep_cudaEventRecord) { sweep("cudaEventRecord"); }
Test(cuda_double, sweep_cudaEventQuery) { sweep("cudaEventQuery"); }
/* Sleep and wake (sleep.c): each of their calls failing, those of a function (host memory, copies, the
 * copy stream, its synchronize), then every call they make whatever its function. */
static void sweep_sleeping(const char *fn) {
    script_sleeps = true;
    sweep(fn);
    script_sleeps = false;
}
Test(cuda_double, sweep_cudaMallocHost) { sweep_sleeping("cudaMallocHost"); }     /* sleep's host memory */
Test(cuda_double, sweep_cudaFreeHost) { sweep_sleeping("cudaFreeHost"); }         /* the wake's */
Test(cuda_double, sweep_cudaMemcpyAsync) { sweep_sleeping("cudaMemcpyAsync"); }   /* every copy of both */
Test(cuda_double, sweep_cudaStreamCreateWithFlags) { sweep_sleeping("cudaStreamCreateWithFlags"); } /* copy stream */
Test(cuda_double, sweep_sleep_cudaStreamSynchronize) { sweep_sleeping("cudaStreamSynchronize"); } /* and copy_wait */
Test(cuda_double, sweep_sleep_every_call, .timeout = 300) { sweep_sleeping("*"); }
/* The same over registered host memory (cca_cuda_options.host_memory): the mapping registered, then
 * unregistered and unmapped; a refused register gives its mapping back, a refused unregister keeps it (the
 * double's record of it freed by cuda_double_free_pinned at the end). */
static void sweep_registered(const char *fn) {
    script_host_memory = CCA_HOST_MEMORY_REGISTERED;
    sweep_sleeping(fn);
    script_host_memory = CCA_HOST_MEMORY_PINNED;
}
Test(cuda_double, sweep_registered_cudaHostRegister) { sweep_registered("cudaHostRegister"); }
Test(cuda_double, sweep_registered_cudaHostUnregister) { sweep_registered("cudaHostUnregister"); }
Test(cuda_double, sweep_registered_every_call, .timeout = 300) { sweep_registered("*"); }
Test(cuda_double, sweep_cuCtxGetCurrent, .timeout = 120) { sweep("cuCtxGetCurrent"); }
Test(cuda_double, sweep_pages_cuMemCreate, .timeout = 120) { sweep_pages("cuMemCreate"); }
Test(cuda_double, sweep_pages_cuMemMap, .timeout = 120) { sweep_pages("cuMemMap"); }
Test(cuda_double, sweep_pages_cuMemSetAccess) { sweep_pages("cuMemSetAccess"); }
Test(cuda_double, sweep_pages_cuMemUnmap, .timeout = 120) { sweep_pages("cuMemUnmap"); }
Test(cuda_double, sweep_pages_cudaMemGetInfo) { sweep_pages("cudaMemGetInfo"); }
Test(cuda_double, sweep_classic_cudaMalloc) { sweep_classic("cudaMalloc"); }
Test(cuda_double, sweep_classic_cudaFree) { sweep_classic("cudaFree"); }
Test(cuda_double, sweep_classic_cuCtxSetCurrent, .timeout = 120) { sweep_classic("cuCtxSetCurrent"); }
Test(cuda_double, sweep_classic_cudaMemGetInfo) { sweep_classic("cudaMemGetInfo"); }

/* Every call of the script failing in turn, whichever function it is
 * ("*"): each driver and runtime call the allocator makes, cleanup steps
 * included (a handle's cuMemRelease, the switch back to the caller's
 * context), over pages of the driver's granule, of 4 and of 16, and over
 * classic segments (cudaMalloc, cudaFree, events). */
Test(cuda_double, sweep_every_call, .timeout = 300) {
    sweep("*");
    cr_assert_gt(logged_releases, 0, "no run refused a handle's release");
    cr_assert_gt(logged_switch_backs, 0, "no run refused a switch back");
}
Test(cuda_double, sweep_pages_every_call, .timeout = 300) {
    sweep_pages("*");
    cr_assert_gt(logged_releases, 0, "no run refused a handle's release");
    cr_assert_gt(logged_switch_backs, 0, "no run refused a switch back");
}
Test(cuda_double, sweep_classic_every_call, .timeout = 300) {
    sweep_classic("*");
    cr_assert_gt(logged_switch_backs, 0, "no run refused a switch back");
}

/* ---- PyTorch's entry points over CUDA --------------------------------------------- */

/* cca_plug_* over "cuda", as PyTorch calls them: from a thread working on
 * cuda:1 (its primary context current), blocks for device 1 land there and
 * blocks for device 0 on device 0, the thread's context stays, a device
 * past the count gives NULL, and cca_plug_reset hands everything back. */
Test(cuda_double, plug_over_cuda_puts_each_block_on_its_device) {
    cr_assert_eq(cca_plug_configure("cuda", "expandable:1,log_oom:0"), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    void *mine = cuda_double_current();
    cca_stream s1 = (cca_stream)0x7001;
    void *a = cca_plug_alloc(5 * MiB, 1, s1), *b = cca_plug_alloc(3 * MiB, 0, NULL);
    cr_assert(a && b, "%s", cca_last_error());
    cr_assert_eq(cuda_double_current(), mine, "the caller's context moved");
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_geq(s.physical_bytes[1], 5 * MiB);
    cr_assert_geq(s.physical_bytes[0], 3 * MiB);
    cr_assert_eq(cudaMemset(a, 1, 5 * MiB), cudaSuccess, "device 1's block is mapped and accessible");
    cr_assert_null(cca_plug_alloc(1 * MiB, 2, NULL), "device 2 of 2");
    cr_assert_null(cca_plug_alloc(0, 1, s1), "size 0");
    cca_plug_free(a, 5 * MiB, 1, s1);
    cca_plug_free(b, 3 * MiB, 0, NULL);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    s = cuda_double_get_stats();
    cr_assert_eq(s.physical_bytes[0] + s.physical_bytes[1] + s.mapped_bytes + s.reservations + s.handles, 0,
                 "left with the driver after cca_plug_reset");
    cr_assert_eq(s.primary_refs[0] + s.primary_refs[1], 0);
    cr_assert_eq(cuda_double_current(), mine);
    assert_no_violation();
}

/* A map the driver refuses for another reason than memory: cca_alloc fails
 * with CCA_ERR_UPSTREAM (no retry: only an OOM is retried), its message
 * names the call and keeps the driver's reason, and nothing stays mapped;
 * cca_alloc_in says its own name. */
Test(cuda_double, a_map_refused_for_another_reason_fails_the_call_that_asked) {
    cca_upstream *u = cuda0();
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    void *p = (void *)1;
    cuda_double_fail("cuMemMap", 1, CUDA_ERROR_UNKNOWN, true);
    cr_assert_eq(cca_alloc(a, 5 * MiB, NULL, &p), CCA_ERR_UPSTREAM);
    cr_assert_null(p);
    cr_assert(strncmp(cca_last_error(), "cca_alloc: ", 11) == 0 && strstr(cca_last_error(), "cuMemMap"), "%s",
              cca_last_error());
    cr_assert_eq(cca_alloc_in(a, d, 5 * MiB, NULL, &p), CCA_ERR_UPSTREAM);
    cr_assert(strncmp(cca_last_error(), "cca_alloc_in: ", 14) == 0, "%s", cca_last_error());
    cuda_double_clear_faults();
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, 0);
    cr_assert_eq(tu_stats(a).allocated_bytes, 0);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    p = tu_alloc(a, 5 * MiB, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- pages above the driver's minimum ------------------------------------------------ */

/* The largest page (1 GiB, CCA_CUDA_MAX_VM_GRANULARITY) on a device that
 * holds three of them: a range aligned to it, sizes that are not whole
 * pages refused before the driver is asked, one cuMemCreate per page, and
 * the upstream's and the driver's counts equal after each step. */
Test(cuda_double, the_largest_page_maps_whole_pages_only) {
    cuda_double_config c = cuda_double_defaults();
    c.device_bytes = 3 * CCA_CUDA_MAX_VM_GRANULARITY + c.context_bytes;
    cuda_double_configure(&c);
    const size_t page = CCA_CUDA_MAX_VM_GRANULARITY;
    cca_upstream *u = cuda_paged(page);
    void *base = NULL;
    static const size_t odd[] = {1, 2 * MiB, page - 2 * MiB, page + 2 * MiB, 3 * page / 2};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        base = (void *)1;
        cr_assert_eq(cca_upstream_vm_reserve(u, odd[i], &base), CCA_ERR_INVALID_ARGUMENT, "reserve of %zu", odd[i]);
        cr_assert_null(base);
    }
    cr_assert_eq(cuda_double_calls("cuMemAddressReserve"), 0, "refused before the driver");
    cr_assert_eq(cca_upstream_vm_reserve(u, 4 * page, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq((uintptr_t)base % page, 0);
    char *p = base;
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
        cr_assert_eq(cca_upstream_vm_map(u, p, odd[i]), CCA_ERR_INVALID_ARGUMENT, "map of %zu", odd[i]);
    cr_assert_eq(cca_upstream_vm_map(u, p + 2 * MiB, page), CCA_ERR_INVALID_ARGUMENT, "a map off the page");
    cr_assert_eq(cuda_double_calls("cuMemCreate"), 0);
    cr_assert_eq(cca_upstream_vm_map(u, p + page, 2 * page), CCA_OK, "%s", cca_last_error());
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(cuda_double_calls("cuMemCreate"), 2);
    cr_assert_eq(s.physical_bytes[0], 2 * page);
    cr_assert_eq(s.mapped_bytes, 2 * page);
    cr_assert_eq(s.accessible_bytes, 2 * page);
    cr_assert_eq(s.handles, 2);
    cr_assert_eq(ustats(u).vm_mapped_bytes, 2 * page);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaMemset(p + page, 1, 1), cudaSuccess);
    cr_assert_eq(cudaMemset(p + 3 * page - 1, 1, 1), cudaSuccess);
    /* two pages mapped, one left: a map of two more is above free memory */
    cr_assert_eq(cca_upstream_vm_map(u, p, page), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + 3 * page, page), CCA_ERR_OUT_OF_MEMORY, "the device is full");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + page, page - 2 * MiB), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_vm_unmap(u, p + page, page), CCA_OK, "%s", cca_last_error());
    s = cuda_double_get_stats();
    cr_assert_eq(s.physical_bytes[0], 2 * page);
    cr_assert_eq(s.handles, 2);
    cr_assert_eq(ustats(u).vm_mapped_bytes, 2 * page);
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * page), CCA_ERR_UPSTREAM, "pages still mapped");
    cr_assert_eq(cca_upstream_vm_unmap(u, p, page), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 2 * page, page), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * page), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = ustats(u);
    cr_assert_eq(us.vm_mapped_bytes + us.vm_reserved_bytes + us.bytes_in_use, 0);
    cr_assert_eq(us.vm_map_calls, 2);
    cr_assert_eq(us.vm_unmap_calls, 3);
    cr_assert_eq(us.vm_failed_maps, 1);
    s = cuda_double_get_stats();
    cr_assert_eq(s.physical_bytes[0] + s.mapped_bytes + s.handles + s.reservations, 0);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* Expandable segments over pages of 16 driver granules: a block maps whole
 * pages (the driver holds exactly what the allocator says), a free leaves
 * them cached, trim with keep_bytes keeps whole pages and returns the
 * rest, empty-cache returns everything; the counts exact at each step. */
Test(cuda_double, expandable_segments_over_large_pages_trim_exactly) {
    const size_t page = 16 * cuda_double_defaults().granularity;
    cca_upstream *u = cuda_paged(page);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    const size_t sizes[] = {512, 3 * MiB, page - 512, page + 1, 5 * page / 2};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        char when[64];
        snprintf(when, sizeof when, "a block of %zu", sizes[i]);
        void *p = tu_alloc(a, sizes[i], NULL);
        expect_accounts_agree(a, u, when);
        size_t mapped = tu_stats(a).mapped_bytes;
        cr_assert_eq(mapped % page, 0, "%s: %zu mapped", when, mapped);
        cr_assert_geq(mapped, sizes[i], "%s", when);
        cr_assert_lt(mapped - sizes[i], page + 2 * MiB, "%s: %zu mapped", when, mapped);
        tu_free(a, p);
        cr_assert_eq(tu_stats(a).mapped_bytes, mapped, "%s: a free keeps its pages cached", when);
        cca_release_report r;
        cr_assert_eq(cca_trim(a, page, &r), CCA_OK, "%s", cca_last_error());
        expect_accounts_agree(a, u, when);
        size_t kept = mapped > page ? page : mapped;
        cr_assert_eq(tu_stats(a).mapped_bytes, kept, "%s: trim to one page", when);
        cr_assert_eq(r.bytes_unmapped, mapped - kept, "%s", when);
        cr_assert_eq(r.pages_unmapped, (mapped - kept) / page, "%s", when);
        cr_assert_eq(r.free_bytes_trapped, 0, "%s", when);
        cr_assert_eq(cca_trim(a, page / 2, &r), CCA_OK, "%s", cca_last_error()); /* less than a page: none kept */
        expect_accounts_agree(a, u, when);
        cr_assert_eq(tu_stats(a).mapped_bytes, 0, "%s: trim below one page", when);
        cr_assert_eq(r.pages_unmapped, 1, "%s", when);
        cr_assert_eq(r.bytes_unmapped, page, "%s", when);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        expect_accounts_agree(a, u, when);
        cr_assert_eq(tu_stats(a).reserved_bytes, 0, "%s", when);
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.physical_bytes[0] + s.mapped_bytes + s.handles + s.reservations, 0, "%s", when);
    }
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* The plug's "cuda:vm_granularity=SIZE" on the double (2 MiB minimum): a
 * page the device refuses (below or not a multiple of its minimum) fails
 * the device's creation with CCA_ERR_INVALID_ARGUMENT, the same on every
 * later call, the primary context given back; pages it takes, up to 1 GiB,
 * are what each block maps. */
Test(cuda_double, plug_pages_the_device_refuses_or_takes) {
    static const char *const refused[] = {"cuda:vm_granularity=512", "cuda:vm_granularity=1M",
                                          "cuda:vm_granularity=1MiB"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        cr_assert_eq(cca_plug_configure(refused[i], "expandable:1,log_oom:0"), CCA_OK, "%s", cca_last_error());
        for (int k = 0; k < 2; k++) {
            cr_assert_null(cca_plug_alloc(MiB, 0, NULL), "%s", refused[i]);
            cca_allocator *a = NULL;
            cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_INVALID_ARGUMENT, "%s: %s", refused[i],
                         cca_last_error());
            cr_assert(strstr(cca_last_error(), "is not a multiple of device 0's minimum granularity (2097152)"),
                      "%s: %s", refused[i], cca_last_error());
        }
        cr_assert_eq(cuda_double_get_stats().primary_refs[0], 0, "%s: the context was given back", refused[i]);
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    }
    static const struct {
        const char *text;
        size_t page;
    } taken[] = {{"cuda:vm_granularity=2M", 2 * MiB}, {"cuda:vm_granularity=16M", 16 * MiB},
                 {"cuda:vm_granularity=1G", 1024 * MiB}};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        cr_assert_eq(cca_plug_configure(taken[i].text, "expandable:1,log_oom:0"), CCA_OK, "%s", cca_last_error());
        void *p = cca_plug_alloc(MiB, 0, NULL);
        cr_assert_not_null(p, "%s: %s", taken[i].text, cca_last_error());
        cuda_double_stats s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes, taken[i].page, "%s: %zu mapped", taken[i].text, s.mapped_bytes);
        cr_assert_eq(s.handles, 1, "%s: one physical allocation", taken[i].text);
        cca_plug_free(p, MiB, 0, NULL);
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
        s = cuda_double_get_stats();
        cr_assert_eq(s.physical_bytes[0] + s.mapped_bytes + s.reservations + s.handles, 0, "%s", taken[i].text);
    }
    assert_no_violation();
}

/* A page larger than the device's memory (cuDeviceTotalMem): not one page
 * fits, so creation refuses it (CCA_ERR_INVALID_ARGUMENT, "not one page
 * fits", the primary context given back), as the simulated device does; a
 * page the device holds is taken, the device's whole memory included. A
 * driver without cuDeviceTotalMem, or one that refuses it, leaves the page
 * to the maps, as before. */
Test(cuda_double, a_page_larger_than_the_device_is_refused) {
    cuda_double_config c = cuda_double_defaults();
    c.device_bytes = 512 * MiB;
    cuda_double_configure(&c);
    cca_upstream *u = NULL;
    cca_cuda_options o = {.device = 0, .vm_granularity = 1024 * MiB, .vm_backing = CCA_VM_PAGES};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert(strstr(cca_last_error(),
                     "vm_granularity 1073741824 is larger than device 0's 536870912 bytes: not one page fits"),
              "%s", cca_last_error());
    cr_assert_eq(cuda_double_get_stats().primary_refs[0], 0, "the context was given back");
    o.vm_granularity = 512 * MiB;
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(g, 512 * MiB);
    cca_upstream_destroy(u);
    o.vm_granularity = 1024 * MiB;
    for (int k = 0; k < 2; k++) { /* unknown total: the page is taken, the maps decide */
        c.hidden = k ? NULL : "cuDeviceTotalMem";
        cuda_double_configure(&c);
        if (k)
            cuda_double_fail("cuDeviceTotalMem", 1, CUDA_ERROR_UNKNOWN, false);
        cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "case %d: %s", k, cca_last_error());
        cr_assert(cca_upstream_has_vm(u), "case %d", k);
        cr_assert_str_eq(cuda_double_last_fault(), k ? "cuDeviceTotalMem" : "", "case %d", k);
        cca_upstream_destroy(u);
        cuda_double_clear_faults();
    }
    assert_no_violation();
}

/* Each host allocation of cca_upstream_cuda_create_with refused in turn:
 * CCA_ERR_OUT_OF_MEMORY, nothing made, and the message names the function
 * called (upstream.h: a refusal's message names it), not
 * cca_upstream_cuda_create. */
Test(cuda_double, a_refused_host_malloc_names_the_create_called) {
    cca_cuda_options o = {.device = 0};
    int refused = 0;
    for (long nth = 1;; nth++) {
        cca_upstream *u = (cca_upstream *)1;
        tu_malloc_arm(nth, false);
        cca_status st = cca_upstream_cuda_create_with(&o, &u);
        if (!tu_malloc_disarm()) { /* past the last allocation: made */
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            cca_upstream_destroy(u);
            break;
        }
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "allocation %ld: %s", nth, cca_last_error());
        cr_assert_null(u);
        cr_assert(strstr(cca_last_error(), "cca_upstream_cuda_create_with:"), "allocation %ld: %s", nth,
                  cca_last_error());
        refused++;
    }
    cr_assert_geq(refused, 2, "the device's record and the wrapper's");
    assert_no_violation();
}
