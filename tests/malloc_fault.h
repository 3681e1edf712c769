/*
 * malloc_fault.h — host malloc failures on demand, for suites linked with
 * the linker's --wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc
 * (tests/allocator.cmake): every allocation of the library's static archive
 * and of the suite goes through __wrap_* (malloc_fault.c), which passes it
 * on to the real one unless armed.
 *
 *   tu_malloc_arm(n, sticky)   the n-th allocation from now fails (n >= 1);
 *                              sticky: every one after it too
 *   tu_malloc_disarm()         no more failures; returns how many were injected
 *
 * Counters are atomic: threads may allocate while armed.
 */
#ifndef CCA_TESTS_MALLOC_FAULT_H
#define CCA_TESTS_MALLOC_FAULT_H

#include <stdbool.h>

void tu_malloc_arm(long nth, bool sticky);
long tu_malloc_disarm(void);

#endif
