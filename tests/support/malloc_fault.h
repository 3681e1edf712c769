/*
 * malloc_fault.h — host malloc failures on demand, for suites linked with
 * the linker's --wrap for every host allocation the library makes
 * (CCA_MALLOC_FAULT_WRAP in tests/CMakeLists.txt: malloc, calloc, realloc,
 * aligned_alloc, strdup, open_memstream, and the library's own
 * ccai_host_zalloc, an mmap): every allocation of the library's
 * static archive and of the suite goes through __wrap_* (malloc_fault.c),
 * which passes it on to the real one unless armed.
 *
 *   tu_malloc_arm(n, sticky)   the n-th allocation from now fails (n >= 1);
 *                              sticky: every one after it too
 *   tu_malloc_disarm()         no more failures; returns how many were injected
 *   tu_malloc_injected()       how many were injected since the last arm
 *   tu_malloc_hold(on)         while held (nested holds count), this thread's
 *                              allocations neither fail nor count: a test's
 *                              own bookkeeping (its audits, a test double's
 *                              events) between the library calls it aims at
 *   tu_malloc_calls()          this thread's allocations so far (failed ones
 *                              included, held ones not): what a call costs
 *                              in host allocations is the difference
 *   tu_malloc_fails_now()      one allocation counted: true when it is the
 *                              one to fail; for a suite that wraps one more
 *                              allocating libc call itself (test_runtime_faults:
 *                              fdopen, whose FILE is malloc'd inside libc)
 *
 * Counters are atomic: threads may allocate while armed.
 */
#ifndef CCA_TESTS_MALLOC_FAULT_H
#define CCA_TESTS_MALLOC_FAULT_H

#include <stdbool.h>

void tu_malloc_arm(long nth, bool sticky);
long tu_malloc_disarm(void);
long tu_malloc_injected(void);
void tu_malloc_hold(bool on);
long tu_malloc_calls(void);
bool tu_malloc_fails_now(void);

#endif
