/*
 * run.c — ccrun's runs of models: MODEL... one after another, --resident
 * models kept beside them, and --sleep's turns (what main.c's comment
 * describes), each as numbered steps on one engine.
 *
 * Rules:
 * - Owns: ccrun_run, the dispatch to run_models, run_resident and
 *   run_sleeping, and the steps they share (open the engine, load, run the
 *   passes, unload, release, finish).
 * - Every failure leaves the allocator at zero live bytes and keeps its
 *   message whole (errbuf) for finish, which says it once and returns the
 *   exit code.
 * - A resident or woken model's outputs are hashed (FNV-1a over every
 *   output byte) and compared with its first run: a different hash is
 *   CHANGED in its row and an error (exit 1) naming both hashes.
 * - A trace the allocator could not open or write (CCALLOC_TRACE, found at
 *   the engine's creation or a phase mark: ccr_engine_trace_status) is an
 *   output that failed: exit 1, as
 *   for --timeline; known before the JSON document, it is the document's
 *   "error" when the run had no other.
 * - The device is --device's, or ccrun_options.upstream when a test gives
 *   one (borrowed: the engine does not destroy it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccai_open.h" /* common/: ccai_fopen_nowait */
#include "ccrun.h"

/* "ccrun: warning: model 'F' has N non-finite weights (NaN/Inf): tensor
 * '0.weight': 1, tensor '0.bias': 1" on stderr, whatever the output mode;
 * the tensors' names are the file's, escaped. */
static void warn_nonfinite(const ccr_model *m, const char *src) {
    fputs("ccrun: ", stderr);
    ccai_fprintf_escaped(stderr, "warning: model '%s' has %zu non-finite weights (NaN/Inf):", src,
                         ccr_model_nonfinite_weights(m));
    const char *name;
    size_t count;
    for (size_t i = 0; ccr_model_nonfinite_tensor(m, i, &name, &count) == CCR_OK; i++)
        ccai_fprintf_escaped(stderr, "%s tensor '%s': %zu", i ? "," : "", name, count);
    fputs("; its outputs may not be numbers (exit status 4)\n", stderr);
}

/* One ccrun invocation's state: what run_models' steps share. */
typedef struct run_state {
    const ccrun_options *o;
    ccr_timeline *tl;
    ccr_engine *e;
    ccrun_report rep;
    char *conf;   /* malloc'd allocator configuration */
    char *errbuf; /* malloc'd, whole: no user string is cut */
    float *x, *y; /* the current model's batch buffers */
    int nonfinite_seen;
    int domains; /* models get memory domains (on, and policy growth) */
} run_state;

/* Step 1: timeline, allocator configuration, engine, the device banner.
 * CCRUN_OK, or the exit code (the message is printed here). */
static int open_engine(run_state *rs) {
    const ccrun_options *o = rs->o;
    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &rs->tl) != CCR_OK) {
        ccrun_say("error: --timeline %s", ccr_last_error()); /* as its write failures are said */
        if (o->json) /* --json promises one document, failures included */
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return CCRUN_ERR_MODEL; /* an output that cannot be made: 1, as for --snapshot and --save */
    }
    rs->conf = ccrun_alloc_conf(o, NULL);
    if (rs->conf && o->snapshot_path && ccrun_ends_with(o->snapshot_path, ".pickle")) { /* --conf may change it */
        char *with = ccrun_format("history:%d%s%s", CCRUN_SNAPSHOT_HISTORY, *rs->conf ? "," : "", rs->conf);
        free(rs->conf);
        rs->conf = with;
    }
    if (!rs->conf) {
        ccrun_say("out of host memory");
        return CCRUN_ERR_MODEL;
    }
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.device = o->device;
    eo.host_capacity = o->capacity;
    eo.upstream = o->upstream; /* NULL: the engine opens --device's */
    eo.vm_granularity = o->vm_granularity;
    eo.vm_backing = o->vm_backing;
    eo.alloc_conf = rs->conf;
    eo.timeline = rs->tl;
    eo.domains = !o->no_domains && !o->keep_cache;
    eo.footprint_sidecar = o->footprint_sidecar;
    if (!o->json && isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_status st = ccr_engine_create(&eo, &rs->e);
    if (st != CCR_OK) {
        ccrun_say("%s", ccr_last_error());
        if (o->json)
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    cca_config cfg;
    rs->domains =
        eo.domains && cca_get_config(ccr_engine_allocator(rs->e), &cfg) == CCA_OK && cfg.policy == CCA_POLICY_GROWTH;
    ccr_device_info dev;
    ccr_engine_device_info(rs->e, &dev);
    char b0[32], b1[32];
    if (!o->json) {
        ccai_fprintf_escaped(
            stdout, "device %s (%s), %s total, %s free at start; allocator %s", dev.name,
            dev.simulated ? "SIMULATED on host memory" : "real GPU", cca_format_bytes(dev.total_bytes, b0, sizeof b0),
            cca_format_bytes(dev.free_baseline, b1, sizeof b1), *rs->conf ? rs->conf : "defaults (growth)");
        putchar('\n');
        ccrun_table_header(&rs->rep);
    }
    ccrun_phase(&rs->rep, rs->e, "start", "", 0, "device free before the allocator: %s (the baseline); %s",
                cca_format_bytes(dev.free_baseline, b0, sizeof b0),
                rs->domains ? "one memory domain per model" : "no memory domains (one shared pool)");
    return CCRUN_OK;
}

/* Keep the last error's message for the end; always CCRUN_ERR_MODEL. */
static int model_error(run_state *rs, ccr_model *m) {
    free(rs->errbuf);
    rs->errbuf = ccrun_format("%s", ccr_last_error());
    if (m)
        ccr_model_unload(m);
    return CCRUN_ERR_MODEL;
}

/* Upstream calls that take device memory (allocations and maps), counted by
 * the device: ccrun is its only tenant. */
static unsigned long long device_calls(run_state *rs) {
    cca_upstream_stats us;
    cca_upstream_get_stats(ccr_engine_upstream(rs->e), &us);
    return (unsigned long long)(us.alloc_calls + us.vm_map_calls);
}

/* Step 2a: load SRC (and save it when asked), warn on non-finite weights.
 * A load that reserved a remembered footprint says so, with the upstream
 * calls the load made beyond that one reservation (one allocation, or one
 * range mapped whole). */
static int load_model(run_state *rs, const char *src, const char *role, ccr_model **out) {
    char b0[32], b1[32], foot[128] = "";
    ccr_model *m = NULL;
    unsigned long long calls = device_calls(rs);
    double t = ccrun_now_ms();
    if (ccr_model_load(rs->e, src, &m) != CCR_OK)
        return model_error(rs, NULL);
    double ms = ccrun_now_ms() - t;
    const ccr_arch *a = ccr_model_arch(m);
    size_t nonfinite = ccr_model_nonfinite_weights(m);
    calls = device_calls(rs) - calls;
    if (ccr_model_footprint(m))
        snprintf(foot, sizeof foot, "; footprint %s reserved up front (1 upstream call), then %llu upstream calls",
                 cca_format_bytes(ccr_model_footprint(m), b1, sizeof b1), calls ? calls - 1 : 0);
    ccrun_phase(&rs->rep, rs->e, "load", src, ms, "%s%zu layers, %s of weights%s%s", role, a->n_layers,
                cca_format_bytes(ccr_arch_param_bytes(a), b0, sizeof b0), foot,
                nonfinite ? ", NON-FINITE weights (see the warning)" : "");
    if (nonfinite) {
        warn_nonfinite(m, src);
        rs->nonfinite_seen = 1;
    }
    if (rs->o->save_path) {
        t = ccrun_now_ms();
        if (ccr_model_save(m, rs->o->save_path) != CCR_OK)
            return model_error(rs, m);
        ccrun_phase(&rs->rep, rs->e, "save", src, ccrun_now_ms() - t, "wrote %s", rs->o->save_path);
    }
    *out = m;
    return CCRUN_OK;
}

/* --snapshot FILE: the allocator's state now (PyTorch's pickle or JSON),
 * replacing the file's earlier contents. */
static int write_snapshot(run_state *rs) {
    const char *path = rs->o->snapshot_path;
    FILE *f = ccai_fopen_nowait(path, CCAI_TRUNCATE); /* a FIFO nobody reads: refused, not waited for */
    cca_status st = CCA_ERR_IO;
    int why = errno; /* the reason of a failed write (the writers keep none) */
    if (f) {
        const cca_allocator *a = ccr_engine_allocator(rs->e);
        errno = 0;
        st = ccrun_ends_with(path, ".pickle") ? cca_write_snapshot_torch(a, 0, f) : cca_write_snapshot_json(a, f);
        why = st == CCA_ERR_IO ? errno : 0;
        errno = 0;
        if (fclose(f) != 0 && st == CCA_OK) {
            why = errno;
            st = cca_set_error(CCA_ERR_IO, "closing the file failed");
        }
    }
    if (st == CCA_OK)
        return CCRUN_OK;
    free(rs->errbuf);
    rs->errbuf = ccrun_format("--snapshot %s: %s%s%s", path, f ? cca_last_error() : "cannot create", why ? ": " : "",
                              why ? ccai_open_strerror(why) : "");
    return CCRUN_ERR_MODEL;
}

/* Step 2b: --iters passes of one batch. The batch is checked against the
 * device before host memory is taken for it (batch, in, out <= 2^24: the
 * products fit). M stays loaded either way. A resident model (role
 * "resident") or one of --sleep (role NULL) passes `hash`: a hash of every
 * output byte of the passes goes into *hash, shown in the row; with
 * `first`, the hash of its first run, a different one is an error: its
 * outputs changed while other models came and went (or while it slept). */
static int run_passes(run_state *rs, ccr_model *m, const char *src, const char *role, unsigned long long *hash,
                      const unsigned long long *first) {
    const ccrun_options *o = rs->o;
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    if (ccr_model_check_batch(m, o->batch, NULL) != CCR_OK)
        return model_error(rs, NULL);
    free(rs->x);
    free(rs->y);
    rs->x = malloc(o->batch * in * sizeof(float));
    rs->y = malloc(o->batch * out * sizeof(float));
    if (!rs->x || !rs->y) {
        free(rs->errbuf);
        rs->errbuf = ccrun_format("out of host memory for a batch of %zu", o->batch);
        return CCRUN_ERR_MODEL;
    }
    unsigned long long calls = device_calls(rs), h = CCRUN_FNV_BASIS;
    double t = ccrun_now_ms();
    for (size_t i = 0; i < o->iters; i++) {
        ccrun_fill_input(rs->x, o->batch * in, o->seed + i);
        if (ccr_model_run(m, rs->x, o->batch, rs->y) != CCR_OK)
            return model_error(rs, NULL);
        h = ccrun_fnv1a(h, rs->y, o->batch * out * sizeof(float));
    }
    double run_ms = ccrun_now_ms() - t;
    char note[64] = "", same[96] = "";
    if (ccr_model_domain(m))
        snprintf(note, sizeof note, ", %llu upstream calls", device_calls(rs) - calls);
    int changed = hash && first && h != *first;
    if (hash)
        snprintf(same, sizeof same, "; %s%soutputs %016llx%s", role ? role : "", role ? ", " : "", h,
                 !first    ? " (its first run)"
                 : changed ? " CHANGED"
                           : " = its first run");
    ccrun_phase(&rs->rep, rs->e, "run", src, run_ms, "%zu x batch %zu, %.2f ms/batch, y[0][0]=%.6g%s%s", o->iters,
                o->batch, run_ms / (double)o->iters, (double)rs->y[0], note, same);
    if (hash)
        *hash = h;
    if (changed) {
        free(rs->errbuf);
        rs->errbuf = ccrun_format("%s model '%s': outputs changed (hash %016llx, first run %016llx)",
                                  role ? role : "woken", src, h, *first);
        return CCRUN_ERR_MODEL;
    }
    return o->snapshot_path ? write_snapshot(rs) : CCRUN_OK;
}

/* Step 2c: unload. With a domain, the model's memory goes back now: the
 * row gives the device's free memory before and after against what the
 * domain held (exact on the simulated device); a sleeping model (--sleep)
 * held none. A leak at unload (blocks still live in the domain) is an
 * error. */
static int unload_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32];
    size_t before = 0, after = 0;
    int known = ccrun_device_free(ccr_engine_upstream(rs->e), &before);
    int asleep = ccr_model_asleep(m);
    double t = ccrun_now_ms();
    ccr_unload_info u;
    ccr_status st = ccr_model_release(m, &u);
    double ms = ccrun_now_ms() - t;
    known &= ccrun_device_free(ccr_engine_upstream(rs->e), &after);
    size_t rise = after > before ? after - before : 0;
    char rise_text[64];
    ccrun_rise_text(known, before, after, rise_text, sizeof rise_text);
    if (st != CCR_OK) {
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms, "domain NOT released: %zu live blocks", u.live_blocks);
        return model_error(rs, NULL);
    }
    if (asleep)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "asleep: domain released with its host copy, device free %s (nothing was mapped)", rise_text);
    else if (!u.domain)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms, "no domain: device free %s, its memory stays cached",
                    rise_text);
    else if (!known)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "domain released: device free %s, its reservation was %s (%zu B)", rise_text,
                    cca_format_bytes(u.reserved_at_unload, b1, sizeof b1), u.reserved_at_unload);
    else if (rise == u.reserved_at_unload)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "domain released: device free +%s, exactly its whole reservation (%zu B)",
                    cca_format_bytes(rise, b0, sizeof b0), u.reserved_at_unload);
    else
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "domain released: device free +%s (%zu B), its reservation was %s (%zu B)",
                    cca_format_bytes(rise, b0, sizeof b0), rise, cca_format_bytes(u.reserved_at_unload, b1, sizeof b1),
                    u.reserved_at_unload);
    return CCRUN_OK;
}

/* Step 2d: release everything unless --keep-cache or the model's step 2b
 * failed (RC, returned unchanged then). */
static int release_all(run_state *rs, const char *src, int rc) {
    if (rc != CCRUN_OK || rs->o->keep_cache)
        return rc;
    ccr_release_info r;
    double t = ccrun_now_ms();
    if (ccr_engine_release(rs->e, &r) != CCR_OK)
        return model_error(rs, NULL);
    char b0[32], b1[64];
    ccrun_phase(&rs->rep, rs->e, "release", src, ccrun_now_ms() - t, "released %s; %s",
                cca_format_bytes(r.cache.bytes_released, b0, sizeof b0), ccrun_baseline_note(&r, b1, sizeof b1));
    return CCRUN_OK;
}

static size_t reserved_now(run_state *rs) {
    cca_stats st;
    cca_get_stats(ccr_engine_allocator(rs->e), &st);
    return st.reserved_bytes;
}

/* Step 2d with resident models still loaded and no domains: the engine's
 * release would unload them, so empty the cache instead, and compare what
 * the process holds afterwards with what it held before the model came
 * (`before`): more means the model's memory is trapped in segments the
 * residents' blocks pin (their own cached space is there either way). */
static void trim_around_residents(run_state *rs, const char *src, size_t before) {
    char b0[32], b1[32], b2[32];
    cca_release_report r;
    double t = ccrun_now_ms();
    ccr_engine_mark(rs->e, "trim", src);
    cca_empty_cache(ccr_engine_allocator(rs->e), &r);
    size_t after = reserved_now(rs);
    if (after > before)
        ccrun_phase(&rs->rep, rs->e, "trim", src, ccrun_now_ms() - t,
                    "released %s; the process still holds %s more than before the model came, in %zu segments "
                    "pinned by resident blocks",
                    cca_format_bytes(r.bytes_released, b0, sizeof b0), cca_format_bytes(after - before, b1, sizeof b1),
                    r.segments_pinned);
    else /* free_bytes_pinned counts free_bytes_trapped already (ccalloc.h) */
        ccrun_phase(&rs->rep, rs->e, "trim", src, ccrun_now_ms() - t,
                    "released %s; the process holds %s, %s before the model came (%s of it free in %zu segments "
                    "pinned by resident blocks)",
                    cca_format_bytes(r.bytes_released, b0, sizeof b0), cca_format_bytes(after, b1, sizeof b1),
                    after == before ? "as" : "less than", cca_format_bytes(r.free_bytes_pinned, b2, sizeof b2),
                    r.segments_pinned);
}

/* Step 3: what the process still holds, the error, the JSON document, the
 * leak check; frees everything. Returns the exit code. */
static int finish(run_state *rs, int rc) {
    const ccrun_options *o = rs->o;
    char b0[32];
    cca_stats s = {0};
    if (rs->e) {
        cca_get_stats(ccr_engine_allocator(rs->e), &s);
        if (rc == CCRUN_OK && o->keep_cache)
            ccrun_phase(&rs->rep, rs->e, "keep", "", 0, "--keep-cache: the process still holds %s",
                        cca_format_bytes(s.reserved_bytes, b0, sizeof b0));
        /* CCALLOC_TRACE: an output, as --timeline; known before the JSON
         * document, so a run without another error has it as its error,
         * the document's "error" too (a run that failed keeps its own) */
        int trace_failed = ccr_engine_trace_status(rs->e) != CCR_OK;
        if (trace_failed && rc == CCRUN_OK) {
            free(rs->errbuf);
            rs->errbuf = ccrun_format("%s", ccr_last_error());
            rc = CCRUN_ERR_MODEL;
            trace_failed = 0; /* said below as the run's error */
        }
        if (rc == CCRUN_ERR_MODEL)
            ccrun_say("error: %s", rs->errbuf ? rs->errbuf : "(out of host memory for the message)");
        if (rc != CCRUN_OK && !o->json)
            ccrun_say("after the error the allocator holds %zu live bytes", s.allocated_bytes);
        if (o->json)
            ccrun_json_document(&rs->rep, rs->e,
                                rc == CCRUN_OK ? NULL
                                : rs->errbuf   ? rs->errbuf
                                               : "out of host memory",
                                s.allocated_bytes);
        if (rc == CCRUN_OK && rs->nonfinite_seen)
            rc = CCRUN_WARN_NONFINITE;
        if (s.allocated_bytes != 0) {
            ccrun_say("BUG: %zu bytes of device memory still allocated at exit", s.allocated_bytes);
            rc = CCRUN_ERR_LEAK;
        }
        if (trace_failed) {                       /* after the run's own error */
            (void)ccr_engine_trace_status(rs->e); /* its message again */
            ccrun_say("error: %s", ccr_last_error());
            rc = ccrun_output_failed(rc);
        }
    } else if (rc != CCRUN_OK && !o->json) { /* the message came from open_engine */
        ccrun_say("after the error the allocator holds 0 live bytes (none was created)");
    }
    free(rs->x);
    free(rs->y);
    free(rs->errbuf);
    free(rs->conf);
    ccrun_report_free(&rs->rep);
    ccr_engine_destroy(rs->e); /* its last rows go to the timeline: close it after */
    if (ccr_timeline_close(rs->tl) != CCR_OK) {
        ccrun_say("error: --timeline %s", ccr_last_error());
        rc = ccrun_output_failed(rc);
    }
    return rc;
}

/* ccrun MODEL...: open the engine, then per model load, run, unload and
 * release (steps 1-3 above); the first failure stops the sequence. */
static int domains_policy_ok(run_state *rs, const char *what); /* below, with --sleep's other needs */

static int run_models(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    if (o->footprint_sidecar && domains_policy_ok(&rs, "--footprint-sidecar") != CCRUN_OK)
        return CCRUN_ERR_USAGE;
    int rc = open_engine(&rs); /* on failure rs.e is NULL: finish only frees */
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        ccr_model *m = NULL;
        const char *src = o->models[k];
        rc = load_model(&rs, src, "", &m);
        if (rc == CCRUN_OK) {
            int run_rc = run_passes(&rs, m, src, NULL, NULL, NULL);
            rc = unload_model(&rs, m, src);
            rc = release_all(&rs, src, run_rc != CCRUN_OK ? run_rc : rc);
        }
    }
    return finish(&rs, rc);
}

/* ccrun --resident R... MODEL...: the residents are loaded and run first and
 * stay loaded; then each MODEL is loaded, run and unloaded (with domains its
 * whole reservation goes back at the unload; without, a trim gives back what
 * the residents do not pin, unless --keep-cache), and every resident runs
 * again, its outputs compared with its first run. At the end the residents
 * are unloaded and everything released, as for MODEL runs. */
static int run_resident(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    ccr_model *res[CCRUN_MAX_RESIDENT] = {0};
    unsigned long long first[CCRUN_MAX_RESIDENT] = {0};
    size_t loaded = 0;
    if (o->footprint_sidecar && domains_policy_ok(&rs, "--footprint-sidecar") != CCRUN_OK)
        return CCRUN_ERR_USAGE;
    int rc = open_engine(&rs);
    while (rc == CCRUN_OK && loaded < o->n_resident) {
        const char *src = o->resident[loaded];
        rc = load_model(&rs, src, "resident: ", &res[loaded]);
        if (rc != CCRUN_OK)
            break;
        loaded++;
        rc = run_passes(&rs, res[loaded - 1], src, "resident", &first[loaded - 1], NULL);
    }
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        ccr_model *m = NULL;
        const char *src = o->models[k];
        size_t before = reserved_now(&rs);
        rc = load_model(&rs, src, "", &m);
        if (rc != CCRUN_OK)
            break;
        int run_rc = run_passes(&rs, m, src, NULL, NULL, NULL);
        rc = unload_model(&rs, m, src);
        if (run_rc != CCRUN_OK)
            rc = run_rc;
        if (rc == CCRUN_OK && !rs.domains && !o->keep_cache)
            trim_around_residents(&rs, src, before);
        for (size_t i = 0; i < loaded && rc == CCRUN_OK; i++) {
            unsigned long long h;
            rc = run_passes(&rs, res[i], o->resident[i], "resident", &h, &first[i]);
        }
    }
    /* the residents go last, whatever happened: an error leaves zero live bytes */
    for (size_t i = loaded; i-- > 0;) {
        if (rc == CCRUN_OK)
            rc = unload_model(&rs, res[i], o->resident[i]);
        else
            ccr_model_unload(res[i]);
    }
    rc = release_all(&rs, "", rc);
    return finish(&rs, rc);
}

/* --sleep, the end of a turn: M to sleep. The row gives the device's free
 * memory rising by the domain's reservation (exactly, on the simulated
 * device) and what went to the host. */
static int sleep_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32], b2[32];
    cca_domain_stats ds = {0};
    if (ccr_model_domain(m))
        cca_get_domain_stats(ccr_engine_allocator(rs->e), ccr_model_domain(m), &ds);
    ccr_sleep_info s;
    if (ccr_model_sleep(m, &s) != CCR_OK)
        return model_error(rs, NULL);
    size_t rise = s.device_free_after > s.device_free_before ? s.device_free_after - s.device_free_before : 0;
    if (!s.device_free_read)
        ccrun_phase(&rs->rep, rs->e, "sleep", src, s.ms,
                    "asleep: device free unknown (mem_info refused), its reservation was %s (%zu B); %s copied to "
                    "host",
                    cca_format_bytes(ds.reserved_bytes, b1, sizeof b1), ds.reserved_bytes,
                    cca_format_bytes(s.bytes_copied, b2, sizeof b2));
    else if (rise == ds.reserved_bytes)
        ccrun_phase(&rs->rep, rs->e, "sleep", src, s.ms,
                    "asleep: device free +%s, exactly its whole reservation (%zu B); %s copied to host",
                    cca_format_bytes(rise, b0, sizeof b0), ds.reserved_bytes,
                    cca_format_bytes(s.bytes_copied, b1, sizeof b1));
    else
        ccrun_phase(&rs->rep, rs->e, "sleep", src, s.ms,
                    "asleep: device free +%s (%zu B), its reservation was %s (%zu B); %s copied to host",
                    cca_format_bytes(rise, b0, sizeof b0), rise, cca_format_bytes(ds.reserved_bytes, b1, sizeof b1),
                    ds.reserved_bytes, cca_format_bytes(s.bytes_copied, b2, sizeof b2));
    return CCRUN_OK;
}

/* --sleep, a model's return: wake it (a wake without room is an error,
 * the message saying how much is missing). */
static int wake_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32];
    ccr_sleep_info w;
    if (ccr_model_wake(m, &w) != CCR_OK)
        return model_error(rs, NULL);
    ccrun_phase(&rs->rep, rs->e, "wake", src, w.ms, "woken: %s mapped again, %s copied back, same addresses",
                cca_format_bytes(w.device_bytes, b0, sizeof b0), cca_format_bytes(w.bytes_copied, b1, sizeof b1));
    return CCRUN_OK;
}

/* ccrun --sleep MODEL...: MODEL k's turn: woken when the same MODEL text
 * came before (it is asleep), else loaded; run, its outputs compared with
 * its first run; then put to sleep, unless it is the last turn. At the
 * end every model is unloaded (the last one awake, the others asleep) and
 * everything released. first[j]/m[j]: the model whose text first appears
 * at position j. */
/* What --sleep and --footprint-sidecar (`what`) need: memory domains,
 * before anything is made: policy greedy in the allocator config --policy
 * and --conf make (--conf after --policy: either may set it, or undo the
 * other's) is exit 2; a config that does not parse is left to the
 * engine's message. --sleep also needs expandable segments,
 * checked once the engine is open and before the first model loads
 * (can_sleep): expandable:0, or a device without virtual-memory ops
 * (exit 1). */
static int domains_policy_ok(run_state *rs, const char *what) {
    const ccrun_options *o = rs->o;
    cca_config cfg;
    char *conf = ccrun_alloc_conf(o, NULL);
    cca_config_default(&cfg);
    int greedy = conf && cca_config_parse(&cfg, conf) == CCA_OK && cfg.policy == CCA_POLICY_GREEDY;
    char *why = greedy ? ccrun_format("%s needs memory domains, which policy greedy cannot have (allocator config "
                                      "'%s')",
                                      what, conf)
                       : NULL;
    free(conf);
    if (!greedy)
        return CCRUN_OK;
    ccrun_say("%s", why ? why : "memory domains needed");
    if (o->json) /* as for a --conf the engine refuses: one document, no device */
        ccrun_json_document(&rs->rep, NULL, why ? why : "memory domains needed", 0);
    free(why);
    return CCRUN_ERR_USAGE;
}

static int can_sleep(run_state *rs) {
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(rs->e), &s);
    if (s.page_size == 0) {
        rs->errbuf = ccrun_format("%s", "cannot sleep: the allocator has classic segments (expandable:0, or a device "
                                        "without virtual-memory ops); --sleep keeps a model's addresses while it "
                                        "unmaps its pages, which needs expandable segments");
        return CCRUN_ERR_MODEL;
    }
    return CCRUN_OK;
}

static int run_sleeping(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    if (domains_policy_ok(&rs, "--sleep") != CCRUN_OK)
        return CCRUN_ERR_USAGE;
    ccr_model **m = calloc(o->n_models, sizeof *m);
    unsigned long long *first = calloc(o->n_models, sizeof *first);
    int rc = open_engine(&rs);
    if (rc == CCRUN_OK && (!m || !first)) {
        rs.errbuf = ccrun_format("out of host memory for %zu models", o->n_models);
        rc = CCRUN_ERR_MODEL;
    }
    if (rc == CCRUN_OK)
        rc = can_sleep(&rs);
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        const char *src = o->models[k];
        size_t j = 0;
        while (strcmp(o->models[j], src)) /* ends at k at the latest */
            j++;
        int again = m[j] != NULL;
        rc = again ? wake_model(&rs, m[j], src) : load_model(&rs, src, "", &m[j]);
        if (rc == CCRUN_OK) {
            unsigned long long h;
            rc = run_passes(&rs, m[j], src, NULL, again ? &h : &first[j], again ? &first[j] : NULL);
        }
        if (rc == CCRUN_OK && k + 1 < o->n_models)
            rc = sleep_model(&rs, m[j], src);
    }
    /* every model goes, asleep or awake, whatever happened: an error leaves zero live bytes */
    for (size_t j = o->n_models; m && j-- > 0;) {
        if (!m[j])
            continue;
        if (rc == CCRUN_OK)
            rc = unload_model(&rs, m[j], o->models[j]);
        else
            ccr_model_unload(m[j]);
    }
    free(m);
    free(first);
    rc = release_all(&rs, "", rc);
    return finish(&rs, rc);
}

int ccrun_run(const ccrun_options *o) {
    return o->n_resident ? run_resident(o) : o->sleep ? run_sleeping(o) : run_models(o);
}
