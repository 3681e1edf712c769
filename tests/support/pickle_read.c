/*
 * pickle_read.c — the minimal unpickler of pickle_read.h: a stack machine
 * over the opcodes snapshot_torch.c writes, refusing every other.
 */
#include "pickle_read.h"

#include "ccai_utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const unsigned char *p, *end, *start;
    pr_value **stack;
    size_t depth, cap;
    char *why;
    size_t why_len;
    bool failed;
} reader;

static void fail(reader *r, const char *fmt, ...) {
    if (r->failed)
        return;
    r->failed = true;
    int at = snprintf(r->why, r->why_len, "offset %zu: ", (size_t)(r->p - r->start));
    va_list ap;
    va_start(ap, fmt);
    if (at >= 0 && (size_t)at < r->why_len)
        vsnprintf(r->why + at, r->why_len - (size_t)at, fmt, ap);
    va_end(ap);
}

void pr_free(pr_value *v) {
    if (!v)
        return;
    for (size_t i = 0; i < v->count; i++)
        pr_free(v->items[i]);
    free(v->items);
    free(v->s);
    free(v);
}

static pr_value *new_value(reader *r, pr_kind kind) {
    pr_value *v = calloc(1, sizeof *v);
    if (!v)
        fail(r, "out of memory");
    else
        v->kind = kind;
    return v;
}

static void push(reader *r, pr_value *v) {
    if (!v)
        return;
    if (r->depth == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        pr_value **bigger = realloc(r->stack, cap * sizeof *bigger);
        if (!bigger) {
            pr_free(v);
            fail(r, "out of memory");
            return;
        }
        r->stack = bigger;
        r->cap = cap;
    }
    r->stack[r->depth++] = v;
}

static bool take(reader *r, size_t n, const unsigned char **bytes) {
    if ((size_t)(r->end - r->p) < n) {
        fail(r, "truncated: %zu bytes wanted, %zu left", n, (size_t)(r->end - r->p));
        return false;
    }
    *bytes = r->p;
    r->p += n;
    return true;
}

static uint64_t le(const unsigned char *b, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static void push_int(reader *r, __int128 v) {
    pr_value *x = new_value(r, PR_INT);
    if (x)
        x->i = v;
    push(r, x);
}

/* The items above the topmost MARK go into the container below it. */
static void collect(reader *r, pr_kind want, bool pairs) {
    size_t m = r->depth;
    while (m > 0 && r->stack[m - 1]->kind != PR_MARK)
        m--;
    if (m == 0 || m < 2 || r->stack[m - 2]->kind != want) {
        fail(r, "%s without its MARK and container", want == PR_DICT ? "SETITEMS" : "APPENDS");
        return;
    }
    size_t n = r->depth - m;
    if (pairs && n % 2) {
        fail(r, "SETITEMS with an odd number of items");
        return;
    }
    pr_value *c = r->stack[m - 2];
    pr_value **items = realloc(c->items, (c->count + n + 1) * sizeof *items);
    if (!items) {
        fail(r, "out of memory");
        return;
    }
    c->items = items;
    memcpy(c->items + c->count, r->stack + m, n * sizeof *items);
    c->count += n;
    pr_free(r->stack[m - 1]); /* the mark */
    r->depth = m - 1;
}

static void step(reader *r, unsigned char op) {
    const unsigned char *b;
    switch (op) {
    case 0x80: /* PROTO */
        if (take(r, 1, &b) && b[0] != 2)
            fail(r, "protocol %u, expected 2", b[0]);
        break;
    case '}':
        push(r, new_value(r, PR_DICT));
        break;
    case ']':
        push(r, new_value(r, PR_LIST));
        break;
    case '(':
        push(r, new_value(r, PR_MARK));
        break;
    case 'u':
        collect(r, PR_DICT, true);
        break;
    case 'e':
        collect(r, PR_LIST, false);
        break;
    case 0x86: { /* TUPLE2 */
        if (r->depth < 2 || r->stack[r->depth - 1]->kind == PR_MARK || r->stack[r->depth - 2]->kind == PR_MARK) {
            fail(r, "TUPLE2 on fewer than two values");
            break;
        }
        pr_value *t = new_value(r, PR_TUPLE);
        if (!t || !(t->items = malloc(2 * sizeof *t->items))) {
            free(t);
            fail(r, "out of memory");
            break;
        }
        t->items[0] = r->stack[r->depth - 2];
        t->items[1] = r->stack[r->depth - 1];
        t->count = 2;
        r->depth -= 2;
        push(r, t);
        break;
    }
    case 'K':
        if (take(r, 1, &b))
            push_int(r, b[0]);
        break;
    case 'M':
        if (take(r, 2, &b))
            push_int(r, (__int128)le(b, 2));
        break;
    case 'J':
        if (take(r, 4, &b))
            push_int(r, (int32_t)(uint32_t)le(b, 4));
        break;
    case 0x8a: { /* LONG1: two's complement, little-endian */
        if (!take(r, 1, &b))
            break;
        size_t n = b[0];
        if (n == 0 || n > 9) {
            fail(r, "LONG1 of %zu bytes", n);
            break;
        }
        if (!take(r, n, &b))
            break;
        unsigned __int128 u = 0;
        for (size_t i = 0; i < n; i++)
            u |= (unsigned __int128)b[i] << (8 * i);
        if (b[n - 1] & 0x80) /* negative: sign-extend */
            u |= ~(unsigned __int128)0 << (8 * n);
        push_int(r, (__int128)u);
        break;
    }
    case 'X': { /* BINUNICODE */
        if (!take(r, 4, &b))
            break;
        size_t n = (size_t)le(b, 4);
        if (!take(r, n, &b))
            break;
        pr_value *s = new_value(r, PR_STR);
        if (!s || !(s->s = malloc(n + 1))) {
            free(s);
            fail(r, "out of memory");
            break;
        }
        memcpy(s->s, b, n);
        s->s[n] = '\0';
        s->len = n;
        for (size_t i = 0; i < n;) { /* Python decodes it as UTF-8 */
            unsigned k = ccai_utf8_len((const unsigned char *)s->s + i);
            if (!k && s->s[i] == '\0')
                k = 1; /* U+0000 is well-formed, though ccai_utf8_len stops at it */
            if (!k) {
                fail(r, "string byte %zu (%#x) is not well-formed UTF-8", i, (unsigned char)s->s[i]);
                break;
            }
            i += k;
        }
        push(r, s);
        break;
    }
    case 0x88:
    case 0x89: {
        pr_value *v = new_value(r, PR_BOOL);
        if (v)
            v->i = op == 0x88;
        push(r, v);
        break;
    }
    case 'G': {
        if (!take(r, 8, &b))
            break;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | b[i];
        pr_value *v = new_value(r, PR_FLOAT);
        if (v)
            memcpy(&v->f, &bits, sizeof v->f);
        push(r, v);
        break;
    }
    default:
        r->p--;
        fail(r, "opcode %#x is not one the writer uses", op);
    }
}

pr_value *pr_read(const unsigned char *data, size_t n, char *why, size_t len) {
    reader r = {data, data + n, data, NULL, 0, 0, why, len, false};
    if (len)
        why[0] = '\0';
    bool stopped = false;
    while (!r.failed && r.p < r.end && !stopped) {
        unsigned char op = *r.p++;
        if (op == '.')
            stopped = true;
        else
            step(&r, op);
    }
    if (!r.failed && !stopped)
        fail(&r, "no STOP");
    else if (!r.failed && r.p != r.end)
        fail(&r, "%zu bytes after STOP", (size_t)(r.end - r.p));
    else if (!r.failed && (r.depth != 1 || r.stack[0]->kind == PR_MARK))
        fail(&r, "%zu values on the stack at STOP", r.depth);
    pr_value *v = NULL;
    if (!r.failed) {
        v = r.stack[0];
        r.depth = 0;
    }
    for (size_t i = 0; i < r.depth; i++)
        pr_free(r.stack[i]);
    free(r.stack);
    return v;
}

const pr_value *pr_get(const pr_value *d, const char *key) {
    if (!d || d->kind != PR_DICT)
        return NULL;
    for (size_t i = 0; i + 1 < d->count; i += 2)
        if (d->items[i]->kind == PR_STR && strcmp(d->items[i]->s, key) == 0)
            return d->items[i + 1];
    return NULL;
}
