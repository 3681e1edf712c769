/*
 * comma_locale.h — switch the test process to a locale whose decimal point
 * is a comma (de_DE and the like), as a program does with
 * setlocale(LC_ALL, "") under LANG=de_DE.UTF-8, for the suites that check
 * that the library reads and writes numbers in C's format whatever the
 * program's locale (docs/allocator.md, "Options").
 *
 * - tu_comma_locale(): an installed locale with a decimal comma, else
 *   de_DE.UTF-8 built with localedef(1) into a temporary directory named by
 *   LOCPATH; the test is skipped (cr_skip_test) when neither can be had.
 * - Costs a few seconds the first time in a process when it builds the
 *   locale (Criterion runs each test in a process of its own: call it from
 *   one test, not many).
 */
#ifndef TU_COMMA_LOCALE_H
#define TU_COMMA_LOCALE_H

#include <criterion/criterion.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline int tu_decimal_comma(void) {
    return strcmp(localeconv()->decimal_point, ",") == 0;
}

static inline const char *tu_comma_locale(void) {
    static const char *names[] = {"de_DE.UTF-8", "de_DE.utf8",  "fr_FR.UTF-8", "fr_FR.utf8", "nl_NL.UTF-8",
                                  "es_ES.UTF-8", "it_IT.UTF-8", "ru_RU.UTF-8", "pt_BR.UTF-8"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (setlocale(LC_ALL, names[i]) && tu_decimal_comma())
            return names[i];
    char dir[] = "/tmp/cca-locale-XXXXXX";
    if (mkdtemp(dir)) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
        int rc = system(cmd);
        if (rc == 0 && setenv("LOCPATH", dir, 1) == 0 && setlocale(LC_ALL, "de_DE.UTF-8") && tu_decimal_comma()) {
            snprintf(cmd, sizeof cmd, "rm -rf %s", dir); /* loaded: the files may go */
            if (system(cmd) != 0)
                cr_log_warn("could not remove %s", dir);
            return "de_DE.UTF-8";
        }
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            cr_log_warn("could not remove %s", dir);
    }
    setlocale(LC_ALL, "C");
    cr_skip_test("no locale with a decimal comma is installed, and localedef could not build de_DE.UTF-8");
    return NULL;
}

#endif /* TU_COMMA_LOCALE_H */
