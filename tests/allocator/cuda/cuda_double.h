/*
 * cuda_double.h — a test double of the CUDA runtime and driver, over host
 * memory, for running allocator/src/upstream/cuda.c on a machine without a
 * GPU (tests/allocator/cuda_double.cmake: test_cuda_double*).
 *
 * It is NOT a GPU and gives no GPU figure: it implements the calls the CUDA
 * upstream and tests/allocator/cuda/test_cuda_upstream.c make, and enforces the rules the
 * CUDA documentation states for them, so that a call sequence the real
 * driver would refuse (or silently get wrong: a runtime call on the wrong
 * device, an unmap of part of an allocation, memory touched before
 * cuMemSetAccess) is refused or counted here and fails a test. What it
 * checks, and where it is stricter than or unlike a real driver, is listed
 * in cuda_double.c's opening comment. The GPU suites (label gpu) still run
 * the same code on a real device.
 *
 * Control and inspection (call from the test, any thread):
 */
#ifndef CCA_CUDA_DOUBLE_H
#define CCA_CUDA_DOUBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUDA_DOUBLE_MAX_DEVICES 4

/* The machine the double pretends to be; set before the first CUDA call.
 * Defaults: 2 devices of 4 GiB, 2 MiB granularity, VMM supported, a
 * context costs 256 MiB of its device (as a real one costs ~300-500 MiB). */
typedef struct cuda_double_config {
    int devices;             /* 0: cudaGetDeviceCount says cudaErrorNoDevice */
    size_t device_bytes;     /* each device's total memory                    */
    size_t granularity;      /* cuMemGetAllocationGranularity's answer        */
    bool vmm;                /* CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    size_t context_bytes;    /* device memory a live primary context takes    */
    const char *hidden;      /* a driver symbol the entry-point lookup does not find (NULL: none) */
    /* cudaEventQuery's cudaErrorNotReady left out of the thread's last
     * error (cudaGetLastError / cudaPeekAtLastError). The runtime's pages do
     * not say whether "not ready", "not actually an error", is recorded
     * there: false (the default) records it, true does not; the upstream
     * must be right under both. */
    bool not_ready_unrecorded;
} cuda_double_config;

void cuda_double_configure(const cuda_double_config *c);
cuda_double_config cuda_double_defaults(void);

/* Fault injection: the `nth` call (1-based, counted from now) of the
 * function named `fn` ("cuMemCreate", "cudaMalloc", ...) fails with `code`
 * (a CUresult for cu*, a cudaError_t for cuda*), and with `sticky` every
 * later call of it too. Up to 16 rules; cuda_double_clear_faults drops all. */
void cuda_double_fail(const char *fn, unsigned long nth, int code, bool sticky);
/* The `nth` call from now of ANY function of the double fails, once: a
 * driver call (cu*) with CUDA_ERROR_UNKNOWN, a runtime call (cuda*) with
 * cudaErrorLaunchFailure. Counted are the calls cuda_double_calls counts
 * (cudaGetLastError and cudaPeekAtLastError are not). One rule of the 16. */
void cuda_double_fail_call(unsigned long nth);
void cuda_double_clear_faults(void);
/* The function the last injected fault failed since a fault was last
 * asked for (cuda_double_fail, cuda_double_fail_call): "" if none fired. */
const char *cuda_double_last_fault(void);
/* Every physical allocation neither released nor mapped (what a refused
 * cuMemRelease leaves behind) freed, as a later release would: returns how
 * many. For tests that go on after a leak they checked. */
size_t cuda_double_free_leaked_handles(void);

/* Events recorded while held stay not ready (cudaEventQuery:
 * cudaErrorNotReady) until released or a cudaDeviceSynchronize. */
void cuda_double_hold_events(bool hold);

/* A context of the caller's own on `device` (as cuCtxCreate makes): not
 * the primary one. Returned as the driver's CUcontext, cast to void *;
 * NULL after 16 (a test process needs a few). */
void *cuda_double_user_context(int device);
/* The calling thread's current context (NULL: none), as cuCtxGetCurrent. */
void *cuda_double_current(void);
/* Whether `addr` lies in a mapping now (cuMemMap'd, not yet unmapped). */
bool cuda_double_mapped(const void *addr);
/* Device `device`'s primary context, NULL while it has none. */
void *cuda_double_primary(int device);

typedef struct cuda_double_stats {
    size_t malloc_bytes[CUDA_DOUBLE_MAX_DEVICES];   /* cudaMalloc'd, live (2 MiB rounding) */
    size_t physical_bytes[CUDA_DOUBLE_MAX_DEVICES]; /* cuMemCreate'd, not yet freed        */
    size_t mapped_bytes;      /* VMM: mapped now (all devices)                            */
    size_t accessible_bytes;  /* mapped AND made accessible by cuMemSetAccess             */
    size_t reservations;      /* address ranges reserved now                              */
    size_t handles;           /* physical allocations alive (mapped or not released)      */
    unsigned long violations; /* calls that broke a documented rule (see last_violation) */
    unsigned long implicit_contexts; /* runtime calls made on a thread with no context: a
                                        real runtime makes device 0's primary context then */
    unsigned long syncs;      /* cudaDeviceSynchronize calls                              */
    unsigned long stream_syncs; /* cudaStreamSynchronize calls                            */
    int primary_refs[CUDA_DOUBLE_MAX_DEVICES]; /* cuDevicePrimaryCtxRetain - Release        */
    char last_violation[256];
    char first_implicit[40];  /* the runtime call that made the first implicit context */
    size_t pinned_bytes;      /* cudaMallocHost'd or cudaHostRegister'd, not yet given back */
    size_t streams;           /* cudaStreamCreateWithFlags'd, not yet destroyed           */
    unsigned long async_copies; /* cudaMemcpyAsync calls that copied                      */
} cuda_double_stats;

cuda_double_stats cuda_double_get_stats(void);
/* Free every live cudaMallocHost allocation and unmap every live
 * cudaHostRegister'd range (one the upstream could not give back); returns
 * their bytes. */
size_t cuda_double_free_pinned(void);
/* How many times `fn` was called (successful or not); "*": every function
 * together (the count cuda_double_fail_call aims in). */
unsigned long cuda_double_calls(const char *fn);
/* The names of the last calls made, oldest first, space-separated (at most
 * the last 64), for checks of order ("cudaDeviceSynchronize before the
 * first cuMemUnmap"). Returns a static buffer. */
const char *cuda_double_log(void);

#endif /* CCA_CUDA_DOUBLE_H */
