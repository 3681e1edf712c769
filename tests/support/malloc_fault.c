/* malloc_fault.c — see malloc_fault.h. */
#include "malloc_fault.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

void *__real_malloc(size_t);
void *__real_calloc(size_t, size_t);
void *__real_realloc(void *, size_t);
void *__real_aligned_alloc(size_t, size_t);
char *__real_strdup(const char *);
FILE *__real_open_memstream(char **, size_t *);
void *__real_ccai_host_zalloc(size_t);
void *__wrap_malloc(size_t);
void *__wrap_calloc(size_t, size_t);
void *__wrap_realloc(void *, size_t);
void *__wrap_aligned_alloc(size_t, size_t);
char *__wrap_strdup(const char *);
FILE *__wrap_open_memstream(char **, size_t *);
void *__wrap_ccai_host_zalloc(size_t);

static _Atomic long countdown; /* > 0: armed; the call that brings it to 0 fails */
static _Atomic long failed;
static _Atomic bool sticky_on;
static _Thread_local int held;
static _Thread_local long calls; /* this thread's, not held */

static bool fail_now(void) {
    if (held)
        return false;
    calls++;
    if (atomic_load(&sticky_on) && atomic_load(&failed)) {
        atomic_fetch_add(&failed, 1);
        return true;
    }
    long c = atomic_load(&countdown);
    while (c > 0) {
        if (atomic_compare_exchange_weak(&countdown, &c, c - 1)) {
            if (c == 1) {
                atomic_fetch_add(&failed, 1);
                return true;
            }
            return false;
        }
    }
    return false;
}

void *__wrap_malloc(size_t n) {
    return fail_now() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m) {
    return fail_now() ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n) {
    return fail_now() ? NULL : __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t al, size_t n) {
    return fail_now() ? NULL : __real_aligned_alloc(al, n);
}
char *__wrap_strdup(const char *s) {
    return fail_now() ? NULL : __real_strdup(s);
}
FILE *__wrap_open_memstream(char **buf, size_t *len) {
    return fail_now() ? NULL : __real_open_memstream(buf, len);
}
/* the library's large zeroed records (support/host_pages.c): an mmap */
void *__wrap_ccai_host_zalloc(size_t n) {
    return fail_now() ? NULL : __real_ccai_host_zalloc(n);
}

void tu_malloc_arm(long nth, bool sticky) {
    atomic_store(&failed, 0);
    atomic_store(&sticky_on, sticky);
    atomic_store(&countdown, nth);
}

long tu_malloc_disarm(void) {
    atomic_store(&countdown, 0);
    atomic_store(&sticky_on, false);
    return atomic_exchange(&failed, 0);
}

long tu_malloc_injected(void) {
    return atomic_load(&failed);
}

void tu_malloc_hold(bool on) {
    held += on ? 1 : -1;
}

long tu_malloc_calls(void) {
    return calls;
}

bool tu_malloc_fails_now(void) {
    return fail_now();
}
