/*
 * text.c — text from outside the program, written for a person at a
 * terminal: the runtime's public name for the project's one escaper.
 *
 * A model file's tensor names, dtypes and metadata keys (in error
 * messages: "unexpected tensor '...'"), a footprint sidecar's lines (in
 * warnings), a path or a --conf value may hold ESC sequences, newlines that
 * forge a line of their own, invisible or reordering characters and bytes
 * that are not UTF-8. ccr_fputs_escaped, which ccrun's messages, its table
 * and the engine's default warning sink all use, writes them as \xNN and
 * keeps printable UTF-8. The rule and the writer live in
 * common/ccai_escape.h (header-only), where ccbench uses the same ones: its
 * table says which characters are escaped and why.
 */
#include "ccai_escape.h" /* common/: the escaper, on the one UTF-8 decoder */
#include "internal.h"

int ccr_fputs_escaped(const char *s, FILE *f) {
    return f ? ccai_fputs_escaped(s, f) : EOF; /* no stream: a write that failed */
}
