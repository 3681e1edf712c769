/*
 * numeric.c — numbers as text in C's format ("0.5", "1.50 MiB"), whatever
 * locale the program has set (docs/allocator.md, "Options", says why).
 *
 * - ccai_strtod reads a double with strtod_l in the C locale; every writer
 *   of a double (config.c's printed config and messages, stats.c's line
 *   and JSON, each domain's JSON, size.c's cca_format_bytes, so the OOM line)
 *   formats it between ccai_numeric_begin and ccai_numeric_end, which
 *   switch the calling thread alone to the C locale (uselocale).
 * - The C locale is made once (pthread_once) and never freed; if newlocale
 *   fails, the program's locale is used, as without this file.
 * - Cost: a uselocale pair per writer; no lock after the first call.
 */
#include "support.h"

#include <pthread.h>
#include <stdlib.h>

static locale_t c_locale; /* newlocale(.., "C", ..): glibc's built-in C locale, never freed */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_make(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static locale_t c_numeric(void) {
    pthread_once(&c_locale_once, c_locale_make);
    return c_locale; /* (locale_t)0 only if newlocale failed: then the program's locale */
}

double ccai_strtod(const char *s, char **end) {
    locale_t c = c_numeric();
    return c ? strtod_l(s, end, c) : strtod(s, end);
}

locale_t ccai_numeric_begin(void) {
    locale_t c = c_numeric();
    return c ? uselocale(c) : (locale_t)0;
}

void ccai_numeric_end(locale_t previous) {
    if (previous)
        uselocale(previous);
}
