/*
 * ccai_trace_limits.h — what one trace file (format v3, CCALLOC_TRACE) may
 * hold: one set of limits for the recorder (allocator/src/observe/trace.c) and the
 * reader (bench/trace.c), so that the recorder never writes a file the
 * reader refuses.
 *
 *   domains   declared in the whole file, every section together (the
 *             default domain, 0, not counted); a section numbers its own
 *             from 1, so a number is at most this too
 *   streams   a section numbers its streams 1, 2, .. in order of first use
 *             (0: the default stream); the largest number
 *   sections  column header lines in the file (one per recording process
 *             lifetime of the trace: all allocators closed, then reopened)
 *   ids       an allocation's id, the largest
 *   sizes     the largest size a line holds (larger trims and reservations
 *             are written as this: they keep or reserve everything)
 *
 * Past a limit the recorder stops: it writes nothing more to the file and
 * logs once why (trace.c); what it wrote before reads back whole.
 */
#ifndef CCAI_TRACE_LIMITS_H
#define CCAI_TRACE_LIMITS_H

#define CCAI_TRACE_MAX_DOMAINS 65534         /* per file */
#define CCAI_TRACE_MAX_STREAM 255            /* per section */
#define CCAI_TRACE_MAX_SECTIONS (1ull << 19) /* per file */
#define CCAI_TRACE_MAX_ID ((1ull << 44) - 1) /* per section */
#define CCAI_TRACE_MAX_SIZE (1ull << 60)     /* per line */

#endif
