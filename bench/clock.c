/*
 * clock.c — the harness's clock for timing one allocator call.
 *
 * A cached alloc+free pair costs 20-60 ns, so the clock that times it
 * matters as much as the pair: its read cost (the median of back-to-back
 * reads) is subtracted, and its jitter stays in every per-pair figure. On
 * the reference VM clock_gettime(CLOCK_MONOTONIC) costs ~20 ns a read and
 * moves in steps of about 10 ns (back-to-back reads differ by 20, 21, 30 or
 * 31 ns), and the TSC there is no finer (it advances 26 ticks at a time, at
 * 2.6 GHz); on other machines clock_gettime costs up to ~50 ns a read while
 * the TSC counts every cycle. So per-operation latencies (ccbench micro,
 * the replay's median and p99) are taken in TICKS of one of two clocks:
 *
 *   clock  clock_gettime(CLOCK_MONOTONIC): ticks are nanoseconds.
 *   TSC    x86-64 with an invariant time-stamp counter (CPUID 0x80000007,
 *          EDX bit 8: constant rate, runs through sleep states, the same
 *          across cores; Linux uses it as its clock source on such
 *          machines). A read is rdtscp, which waits until every earlier
 *          instruction has executed, then lfence, so no later instruction
 *          starts before it: the interval covers the call and only the call.
 *          Its rate is calibrated against CLOCK_MONOTONIC over two 10 ms
 *          windows; if they disagree by more than 0.5% (a clock that is
 *          being adjusted, a counter that is not what CPUID says) the TSC is
 *          not used.
 *
 * The TSC is used where it is there and is cheaper to read than
 * clock_gettime by more than 0.5 ns (measured at calibration).
 * CCBENCH_CLOCK=clock_gettime or =tsc overrides the choice (tsc still only
 * where it is invariant and calibrates). Tables say which clock and its read
 * cost (ccb_clock_name, ccb_timer_overhead_ns).
 *
 * ccb_ticks_ns converts a difference of ticks to nanoseconds. A difference
 * is taken as signed (a thread moved between cores whose counters differ by
 * a few ticks may see a small negative one), and callers clamp at zero after
 * subtracting the read cost. ccb_now_ns (ccbench.h) stays the wall clock for
 * whole runs, where a read's cost and step do not matter.
 *
 * Cost: one calibration of ~20 ms at ccb_clock_init (under pthread_once;
 * every function here but ccb_ticks and ccb_ticks_ns calls it, and those two
 * must not be used before it), then a read is a call and the clock's read.
 */
#include "ccbench.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <x86intrin.h>
#define CCB_HAVE_TSC 1
#else
#define CCB_HAVE_TSC 0
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int use_tsc;
static double ns_per_tick = 1.0;
static double read_ns; /* the chosen clock's read cost */
static char description[128] = "clock_gettime(CLOCK_MONOTONIC)";

/* A clock's cost: the median difference of 2001 back-to-back pairs of
 * reads, in ns. */
static double cost_of(uint64_t (*read)(void), double scale) {
    enum { N = 2001 };
    double d[N];
    for (int i = 0; i < N; i++) {
        uint64_t a = read(), b = read();
        d[i] = (double)(int64_t)(b - a) * scale;
    }
    return ccb_quantile(d, N, 0.5);
}

static uint64_t read_clock(void) {
    return ccb_now_ns();
}

#if CCB_HAVE_TSC
static uint64_t read_tsc(void) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

static int invariant_tsc(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    if (!__get_cpuid(0x80000001u, &a, &b, &c, &d) || !(d & (1u << 27))) /* rdtscp */
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}

/* ns per TSC tick over a busy window of about `ms` milliseconds. */
static double window(double ms) {
    uint64_t n0 = ccb_now_ns(), t0 = read_tsc(), n1;
    do
        n1 = ccb_now_ns();
    while ((double)(n1 - n0) < ms * 1e6);
    uint64_t t1 = read_tsc();
    return t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 0;
}
#endif

static void calibrate(void) {
    read_ns = cost_of(read_clock, 1.0);
#if CCB_HAVE_TSC
    const char *force = getenv("CCBENCH_CLOCK");
    if (force && strcmp(force, "clock_gettime") == 0)
        return;
    if (!invariant_tsc())
        return;
    double a = window(10), b = window(10);
    if (a <= 0 || b <= 0 || fabs(a - b) > 0.005 * b)
        return;
    double cost = cost_of(read_tsc, (a + b) / 2);
    if (cost > read_ns - 0.5 && !(force && strcmp(force, "tsc") == 0))
        return;
    use_tsc = 1;
    ns_per_tick = (a + b) / 2;
    read_ns = cost;
    snprintf(description, sizeof description, "the TSC (invariant, %.3f GHz calibrated against CLOCK_MONOTONIC)",
             1.0 / ns_per_tick);
#endif
}

void ccb_clock_init(void) {
    pthread_once(&once, calibrate);
}

uint64_t ccb_ticks(void) {
#if CCB_HAVE_TSC
    if (use_tsc)
        return read_tsc();
#endif
    return ccb_now_ns();
}

double ccb_ticks_ns(uint64_t from, uint64_t to) {
    return (double)(int64_t)(to - from) * ns_per_tick;
}

double ccb_timer_overhead_ns(void) {
    ccb_clock_init();
    return read_ns;
}

const char *ccb_clock_name(void) {
    ccb_clock_init();
    return description;
}
