/*
 * test_domain_stats.c — allocator/src/domain.c: per-domain statistics against
 * a model, under threads, and as JSON (cca_get_domain_stats,
 * cca_domain_stats_write_json).
 * Most tests run twice (TEST_BOTH, domain_suite.h): with classic segments
 * and with expandable segments (expandable:1 over the simulated device's
 * vm ops, 64 KiB pages).
 *
 *   stats       a seeded random sequence over the default domain and three
 *               others (an arena in one; releases, forced releases, domains
 *               destroyed and created again, trims, peak resets): every
 *               domain's counters and peaks equal a model, and the sums
 *               over domains the allocator's totals, after every step.
 *   threads     six threads, five domains (one shared by two threads),
 *               releases, short-lived domains and JSON while the others
 *               run; totals exact afterwards.
 *   json        cca_domain_stats_write_json parses; names and numbers match
 *               cca_get_domain_stats, default first, then creation order.
 *
 * Readings of the contract where it leaves room (noted at each test):
 *   - the JSON keys are the cca_domain_stats field names.
 *
 * The other suites of domain.c: test_domain_lifecycle.c,
 * test_domain_release.c, test_domain_footprint.c.
 */
#include "domain_suite.h"

/* ---- per-domain statistics: a seeded random sequence -------------------------------- */

enum { RD = 4, RMAX = 40 };

typedef struct dmodel {
    size_t alloc, alloc_peak, req, req_peak, act, act_peak, res_peak;
    uint64_t calls;
} dmodel;

static void model_add(dmodel *d, size_t held, size_t req) {
    d->alloc += held, d->req += req, d->act++, d->calls++;
    if (d->alloc > d->alloc_peak)
        d->alloc_peak = d->alloc;
    if (d->req > d->req_peak)
        d->req_peak = d->req;
    if (d->act > d->act_peak)
        d->act_peak = d->act;
}

static void model_drop(dmodel *d, size_t held, size_t req) {
    cr_assert(d->alloc >= held && d->req >= req && d->act > 0, "model underflow");
    d->alloc -= held, d->req -= req, d->act--;
}

typedef struct rstate {
    cca_allocator *a;
    cca_upstream *u;
    cca_domain *D[RD]; /* D[0] = NULL: the default domain */
    dmodel M[RD];
    blk live[RMAX];
    int dk[RMAX]; /* the domain index of each live block */
    int n;
    retired ret;
} rstate;

/* Every domain's stats equal the model; every account agrees. */
static void rcheck(rstate *x, const char *what) {
    agree_r(x->a, x->u, x->D + 1, x->D[1] ? RD - 1 : 0, &x->ret, what);
    cca_stats s = tu_stats(x->a);
    cr_assert_eq(s.pending_blocks, 0, "%s", what);
    size_t total = 0;
    for (int k = 0; k < (x->D[1] ? RD : 1); k++) {
        cca_domain_stats d = dst(x->a, x->D[k]);
        dmodel *mo = &x->M[k];
        if (d.reserved_bytes > mo->res_peak)
            mo->res_peak = d.reserved_bytes;
#define MEQ(f, v)                                                                                                      \
    cr_assert_eq((uint64_t)d.f, (uint64_t)(v), "%s: domain %d '%s' " #f " %llu, expected %llu", what, k, d.name,      \
                 (unsigned long long)d.f, (unsigned long long)(v))
        MEQ(allocated_bytes, mo->alloc);
        MEQ(allocated_bytes_peak, mo->alloc_peak);
        MEQ(requested_bytes, mo->req);
        MEQ(requested_bytes_peak, mo->req_peak);
        MEQ(active_blocks, mo->act);
        MEQ(active_blocks_peak, mo->act_peak);
        MEQ(alloc_calls, mo->calls);
        MEQ(reserved_bytes_peak, mo->res_peak);
#undef MEQ
        total += mo->alloc;
    }
    cr_assert_eq(s.allocated_bytes, total, "%s: the model itself", what);
}

static void rpush(rstate *x, int k, blk b) {
    cr_assert_lt(x->n, RMAX);
    x->live[x->n] = b;
    x->dk[x->n] = k;
    x->n++;
    model_add(&x->M[k], b.held, b.size);
}

static void rremove(rstate *x, int i) {
    x->live[i] = x->live[x->n - 1];
    x->dk[i] = x->dk[x->n - 1];
    x->n--;
}

/* Drop every live block of domain k from the list and the model (a forced
 * release took them); returns one of their pointers (or NULL). */
static void *rforget(rstate *x, int k) {
    void *one = NULL;
    for (int i = 0; i < x->n;)
        if (x->dk[i] == k) {
            one = x->live[i].p;
            model_drop(&x->M[k], x->live[i].held, x->live[i].size);
            rremove(x, i);
        } else {
            i++;
        }
    return one;
}

static size_t rsize(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 60)
        return 16 + tu_rand(rng) % (256 * KiB);
    if (r < 92)
        return 512 * KiB + tu_rand(rng) % (4 * MiB);
    return 10 * MiB + tu_rand(rng) % (2 * MiB);
}

static void random_sequence(const mode *m, uint64_t seed, int steps) {
    rstate x;
    memset(&x, 0, sizeof x);
    x.u = device(1 * GiB);
    x.a = make(m, x.u, NULL);
    cca_allocator *a = x.a;
    uint64_t rng = seed;
    char what[128];
    /* the default domain's blocks from before any domain exists count */
    for (int i = 0; i < 3; i++)
        rpush(&x, 0, mk(a, NULL, rsize(&rng), i ? S0 : NULL, tu_rand(&rng), false));
    tu_free(a, x.live[1].p);
    model_drop(&x.M[0], x.live[1].held, x.live[1].size);
    rremove(&x, 1);
    rcheck(&x, "before domains");
    static const char *const names[RD] = {NULL, "r1", "r2", "r3"};
    for (int k = 1; k < RD; k++)
        x.D[k] = dom(a, names[k]);
    rcheck(&x, "domains created");
    cr_assert_eq(cca_domain_reserve(a, x.D[3], 6 * MiB), CCA_OK, "%s", cca_last_error());
    rcheck(&x, "arena reserved");
    const cca_stream streams[3] = {NULL, S0, S1};
    for (int step = 0; step < steps; step++) {
        uint64_t r = tu_rand(&rng) % 100;
        int k = (int)(tu_rand(&rng) % RD);
        cca_status st;
        snprintf(what, sizeof what, "%s seed %llu step %d (op %llu, domain %d)", m->name, (unsigned long long)seed,
                 step, (unsigned long long)r, k);
        if ((r < 44 && x.n < RMAX) || x.n == 0) {
            blk b = mk(a, x.D[k], rsize(&rng), streams[tu_rand(&rng) % 3], tu_rand(&rng), false);
            rpush(&x, k, b);
        } else if (r < 80) {
            int i = (int)(tu_rand(&rng) % (uint64_t)x.n);
            ASSERT_INTACT(x.live[i], false, what);
            tu_free(a, x.live[i].p);
            model_drop(&x.M[x.dk[i]], x.live[i].held, x.live[i].size);
            rremove(&x, i);
            if (tu_stats(a).pending_blocks) { /* host events complete at once: a synchronize finishes them */
                cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s: %s", what, cca_last_error());
                cr_assert_eq(tu_stats(a).pending_blocks, 0, "%s", what);
            }
        } else if (r < 83) {
            int i = (int)(tu_rand(&rng) % (uint64_t)x.n);
            cr_assert_eq(cca_record_stream(a, x.live[i].p, x.live[i].s == S1 ? S0 : S1), CCA_OK, "%s", what);
        } else if (r < 86) {
            cr_assert_eq(cca_trim(a, (size_t)(tu_rand(&rng) % 64) * MiB, NULL), CCA_OK, "%s: %s", what,
                         cca_last_error());
        } else if (r < 87) {
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s: %s", what, cca_last_error());
        } else if (r < 93) {
            cca_domain_stats before = dst(a, x.D[k]);
            cca_stats sb = tu_stats(a);
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            st = cca_domain_release(a, x.D[k], 0, &rep);
            if (x.M[k].act) {
                cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s: %s", what, cca_status_string(st));
                cr_assert_eq(rep.live_blocks, x.M[k].act, "%s", what);
                cr_assert_eq(rep.live_bytes, x.M[k].alloc, "%s", what);
                cr_assert_eq(rep.bytes_released, 0, "%s", what);
                dstats_unchanged(a, x.D[k], &before, what);
                tu_assert_intact(a, &sb, what);
            } else {
                cr_assert_eq(st, CCA_OK, "%s: %s", what, cca_last_error());
                cr_assert_eq(rep.bytes_released, before.reserved_bytes, "%s", what);
                cr_assert_eq(dst(a, x.D[k]).reserved_bytes, 0, "%s", what);
                cr_assert_eq(dst(a, x.D[k]).segments, 0, "%s", what);
            }
        } else if (r < 95) {
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            size_t act = x.M[k].act, bytes = x.M[k].alloc;
            st = cca_domain_release(a, x.D[k], CCA_DOMAIN_FORCE, &rep);
            cr_assert_eq(st, CCA_OK, "%s: forced: %s", what, cca_last_error());
            cr_assert_eq(rep.live_blocks, act, "%s", what);
            cr_assert_eq(rep.live_bytes, bytes, "%s", what);
            void *gone = rforget(&x, k);
            if (gone)
                cr_assert_eq(cca_free(a, gone), CCA_ERR_INVALID_POINTER, "%s", what);
            cr_assert_eq(dst(a, x.D[k]).reserved_bytes, 0, "%s", what);
        } else if (r < 97) {
            cca_reset_peak_stats(a);
            for (int j = 0; j < RD; j++) {
                dmodel *mo = &x.M[j];
                mo->alloc_peak = mo->alloc, mo->req_peak = mo->req, mo->act_peak = mo->act, mo->res_peak = 0;
            }
        } else if (k > 0) { /* destroy (forced) and create again */
            cca_domain_stats before = dst(a, x.D[k]);
            uint64_t frees = tu_stats(a).upstream_frees;
            st = cca_domain_destroy(a, x.D[k], CCA_DOMAIN_FORCE, NULL);
            cr_assert_eq(st, CCA_OK, "%s: destroy: %s", what, cca_last_error());
            x.ret.alloc_calls += before.alloc_calls;
            x.ret.upstream_allocs += before.upstream_allocs;
            x.ret.upstream_frees += before.upstream_frees + (tu_stats(a).upstream_frees - frees);
            rforget(&x, k);
            memset(&x.M[k], 0, sizeof x.M[k]);
            x.D[k] = dom(a, names[k]);
            if (k == 3)
                cr_assert_eq(cca_domain_reserve(a, x.D[3], 6 * MiB), CCA_OK, "%s", cca_last_error());
        }
        rcheck(&x, what);
    }
    for (int i = 0; i < x.n; i++) {
        ASSERT_INTACT(x.live[i], false, "end");
        tu_free(a, x.live[i].p);
    }
    for (int k = 0; k < RD; k++)
        cr_assert_eq(cca_domain_release(a, x.D[k], 0, NULL), CCA_OK, "final release of %d: %s", k, cca_last_error());
    agree_r(a, x.u, x.D + 1, RD - 1, &x.ret, "end");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    finish(a, x.u);
}

TEST_BOTH(per_domain_stats_match_a_model_and_sum_to_the_totals) {
    random_sequence(m, 0xd0a1, 700);
    random_sequence(m, 7, 300);
}

/* ---- threads --------------------------------------------------------------------------- */

enum { TH = 6, TH_OPS = 700, TH_LIVE = 24 };

typedef struct tw {
    cca_allocator *a;
    cca_domain *d;
    int id;
    bool exclusive;
    uint64_t allocs, frees, releases_ok, releases_refused;
    uint64_t tmp_allocs; /* in short-lived domains of its own (counted in allocs too) */
    FILE *sink;          /* /dev/null, for JSON written while the others run */
    char error[256]; /* first failure; no asserting off the main thread */
} tw;

static void tw_fail(tw *w, const char *what, cca_status st) {
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, "thread %d: %s: %s / %s", w->id, what, cca_status_string(st),
                 cca_last_error());
}

static void tw_free(tw *w, blk *b) {
    if (!intact(b, false))
        tw_fail(w, "block overwritten", CCA_OK);
    cca_status st = cca_free(w->a, b->p);
    if (st != CCA_OK)
        tw_fail(w, "cca_free", st);
    w->frees++;
}

static void *tw_main(void *arg) {
    tw *w = arg;
    uint64_t rng = 0x7700 + (uint64_t)w->id;
    cca_stream own = (cca_stream)(uintptr_t)(0x1000 * (w->id + 1));
    blk live[TH_LIVE];
    int n = 0;
    for (int op = 0; op < TH_OPS && !w->error[0]; op++) {
        uint64_t r = tu_rand(&rng) % 100;
        if ((r < 50 && n < TH_LIVE) || n == 0) {
            size_t size = tu_rand(&rng) % 10 == 0 ? 1 * MiB + tu_rand(&rng) % (3 * MiB) : 16 + tu_rand(&rng) % (64 * KiB);
            cca_stream s = tu_rand(&rng) % 2 ? own : NULL;
            void *p = NULL;
            cca_status st = cca_alloc_in(w->a, w->d, size, s, &p);
            if (st != CCA_OK || !p) {
                tw_fail(w, "cca_alloc_in", st);
                break;
            }
            cca_domain *d = NULL;
            st = cca_domain_of(w->a, p, &d);
            if (st != CCA_OK || d != w->d)
                tw_fail(w, "cca_domain_of names another domain", st);
            uint64_t seed = tu_rand(&rng);
            live[n] = (blk){.p = p, .size = size, .s = s, .d = w->d, .seed = seed};
            memcpy(live[n].p, &seed, sizeof seed);
            memcpy(live[n].p + size - sizeof seed, &seed, sizeof seed);
            n++;
            w->allocs++;
        } else if (r < 96) {
            int i = (int)(tu_rand(&rng) % (uint64_t)n);
            tw_free(w, &live[i]);
            live[i] = live[--n];
        } else if (r < 97) {
            cca_domain_stats s;
            cca_status st = cca_get_domain_stats(w->a, w->d, &s);
            if (st != CCA_OK || s.cached_bytes != s.reserved_bytes - s.allocated_bytes)
                tw_fail(w, "inconsistent domain stats", st);
            st = cca_domain_stats_write_json(w->a, w->sink);
            if (st != CCA_OK)
                tw_fail(w, "cca_domain_stats_write_json", st);
        } else if (r < 98) { /* a short-lived domain: created, used, destroyed while the others run */
            char name[32];
            snprintf(name, sizeof name, "tmp%d.%d", w->id, op);
            cca_domain *t = NULL;
            cca_status st = cca_domain_create(w->a, name, &t);
            if (st != CCA_OK) {
                tw_fail(w, "cca_domain_create", st);
                break;
            }
            void *x = NULL, *y = NULL;
            st = cca_alloc_in(w->a, t, 4096, own, &x);
            if (st == CCA_OK)
                st = cca_alloc_in(w->a, t, 2 * MiB, NULL, &y);
            if (st != CCA_OK)
                tw_fail(w, "cca_alloc_in(tmp)", st);
            w->allocs += 2, w->tmp_allocs += 2;
            cca_domain *d = NULL;
            if (cca_domain_of(w->a, y, &d) != CCA_OK || d != t)
                tw_fail(w, "cca_domain_of(tmp)", CCA_OK);
            if (cca_free(w->a, x) != CCA_OK || cca_free(w->a, y) != CCA_OK)
                tw_fail(w, "cca_free(tmp)", CCA_OK);
            w->frees += 2;
            st = cca_domain_destroy(w->a, t, 0, NULL);
            if (st != CCA_OK)
                tw_fail(w, "cca_domain_destroy(tmp)", st);
        } else { /* unload: free everything, release the domain */
            while (n > 0)
                tw_free(w, &live[--n]);
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            cca_status st = cca_domain_release(w->a, w->d, 0, &rep);
            if (st == CCA_OK && rep.live_blocks == 0)
                w->releases_ok++;
            else if (st == CCA_ERR_LIVE_BLOCKS && !w->exclusive)
                w->releases_refused++; /* the other thread of the shared domain has blocks */
            else
                tw_fail(w, "cca_domain_release", st);
        }
    }
    while (n > 0)
        tw_free(w, &live[--n]);
    return NULL;
}

TEST_BOTH(threads_allocate_and_release_their_domains_at_once) {
    cca_upstream *u = device(1 * GiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *D[5];
    for (int k = 0; k < 5; k++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", k);
        D[k] = dom(a, name);
    }
    tw w[TH];
    pthread_t th[TH];
    for (int i = 0; i < TH; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].a = a, w[i].id = i;
        w[i].d = D[i < 4 ? i : 4]; /* threads 4 and 5 share a domain */
        w[i].exclusive = i < 4;
        w[i].sink = fopen("/dev/null", "w");
        cr_assert_not_null(w[i].sink);
        cr_assert_eq(pthread_create(&th[i], NULL, tw_main, &w[i]), 0);
    }
    for (int i = 0; i < TH; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        fclose(w[i].sink);
    }
    uint64_t allocs = 0, frees = 0, releases = 0, tmp = 0;
    for (int i = 0; i < TH; i++) {
        cr_assert_eq(w[i].error[0], '\0', "%s", w[i].error);
        allocs += w[i].allocs, frees += w[i].frees, releases += w[i].releases_ok, tmp += w[i].tmp_allocs;
    }
    cr_assert_gt(tmp, 0, "short-lived domains came and went");
    cr_assert_gt(releases, 4, "releases ran while other threads allocated");
    /* the short-lived domains are gone: their calls are in the allocator's
     * totals only (their memory was released by their destroy) */
    cca_stats st0 = tu_stats(a);
    uint64_t in_domains = 0;
    for (int k = 0; k < 5; k++)
        in_domains += dst(a, D[k]).alloc_calls;
    cr_assert_eq(in_domains + dst(a, NULL).alloc_calls + tmp, st0.alloc_calls);
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 6, "default and t0..t4 only");
    cJSON_Delete(json);
    const retired gone = {.unknown = true};
    agree_r(a, u, D, 5, &gone, "after the threads");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_calls, allocs);
    cr_assert_eq(s.free_calls, frees);
    cr_assert_eq(s.active_blocks, 0);
    for (int k = 0; k < 5; k++) {
        cca_domain_stats d = dst(a, D[k]);
        uint64_t mine = k < 4 ? w[k].allocs - w[k].tmp_allocs
                              : w[4].allocs - w[4].tmp_allocs + w[5].allocs - w[5].tmp_allocs;
        cr_assert_eq(d.alloc_calls, mine, "domain %d: %llu alloc calls, its threads made %llu", k,
                     (unsigned long long)d.alloc_calls, (unsigned long long)mine);
        cr_assert_eq(d.active_blocks, 0);
        cr_assert_eq(d.allocated_bytes, 0);
        cca_domain_report r;
        memset(&r, 0, sizeof r);
        cr_assert_eq(cca_domain_release(a, D[k], 0, &r), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(r.bytes_released, d.reserved_bytes);
    }
    agree_r(a, u, D, 5, &gone, "released");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cr_assert_eq(dst(a, NULL).alloc_calls, 0);
    for (int k = 0; k < 5; k++)
        cr_assert_eq(cca_domain_destroy(a, D[k], 0, NULL), CCA_OK);
    finish(a, u);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void check_json_domain(const cJSON *obj, const cca_domain_stats *s) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    cr_assert(cJSON_IsString(name), "\"name\" missing");
    cr_assert_str_eq(name->valuestring, s->name);
#define KEY(f) cr_assert_eq(json_number(obj, #f), (double)s->f, "'%s' " #f, s->name)
    KEY(allocated_bytes);
    KEY(allocated_bytes_peak);
    KEY(requested_bytes);
    KEY(requested_bytes_peak);
    KEY(reserved_bytes);
    KEY(reserved_bytes_peak);
    KEY(active_blocks);
    KEY(active_blocks_peak);
    KEY(cached_bytes);
    KEY(largest_free_block);
    KEY(segments);
    KEY(alloc_calls);
    KEY(upstream_allocs);
    KEY(upstream_frees);
#undef KEY
    cr_assert_float_eq(json_number(obj, "fragmentation"), s->fragmentation, 1e-6);
}

TEST_BOTH(json_names_every_domain_in_creation_order) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    char n63[CCA_DOMAIN_NAME_MAX + 1];
    memset(n63, 'q', CCA_DOMAIN_NAME_MAX), n63[CCA_DOMAIN_NAME_MAX] = '\0';
    const char *names[] = {"alpha", "beta gamma", "alpha", "~!#$%&'()*+-./:;<=>?@[]^_`{|}", n63};
    enum { ND = 5 };
    cca_domain *D[ND];
    for (int k = 0; k < ND; k++)
        D[k] = dom(a, names[k]);
    void *keep0 = in(a, D[0], 4096, S0);
    void *f1 = in(a, D[1], 3 * MiB, S1);
    void *keep3 = in(a, D[3], 12 * MiB, S0);
    void *keepd = tu_alloc(a, 1000, S0);
    tu_free(a, f1);
    cca_domain_reserve(a, D[4], 2 * MiB);
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 1 + ND);
    cca_domain_stats s = dst(a, NULL);
    check_json_domain(cJSON_GetArrayItem(json, 0), &s);
    for (int k = 0; k < ND; k++) {
        s = dst(a, D[k]);
        cr_assert_str_eq(s.name, names[k]);
        check_json_domain(cJSON_GetArrayItem(json, 1 + k), &s);
    }
    cJSON_Delete(json);
    /* destroyed domains leave the list, the order stays */
    cr_assert_eq(cca_domain_destroy(a, D[1], 0, NULL), CCA_OK, "%s", cca_last_error());
    json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), ND);
    const int order[] = {0, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        s = dst(a, D[order[i]]);
        check_json_domain(cJSON_GetArrayItem(json, 1 + i), &s);
    }
    cJSON_Delete(json);
    /* the snapshot names the domains too, and stays JSON */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    json = cJSON_Parse(buf);
    cr_assert_not_null(json, "snapshot with domains is not JSON: %s", buf);
    cJSON_Delete(json);
    free(buf);
    tu_free(a, keep0), tu_free(a, keep3), tu_free(a, keepd);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}
