/*
 * host_pages.c — zeroed host records of many pages, resident only where
 * they are touched: ccai_host_zalloc / ccai_host_zfree.
 *
 * - For the records that are large and mostly untouched (a free index's
 *   bins: 196 KB of class roots, a few of which a pool uses). calloc would
 *   do only while glibc maps such a chunk; once the process frees one,
 *   glibc raises its mmap threshold and serves the next from its heap,
 *   zeroing all of it, so every page is resident.
 * - Anonymous private mappings: zero pages until written, given back
 *   whole by munmap. NULL when the system refuses (the caller's
 *   CCA_ERR_OUT_OF_MEMORY), never an exit.
 * - Cost: one mmap and one munmap system call a record.
 * - The fault-injection suites wrap ccai_host_zalloc as they wrap calloc
 *   (tests/support/malloc_fault.h), so its refusal is tested as any host
 *   allocation's.
 */
#include "support.h"

#include <sys/mman.h>

void *ccai_host_zalloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ccai_host_zfree(void *p, size_t size) {
    if (p)
        munmap(p, size);
}
