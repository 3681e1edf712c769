/*
 * ccrun — run models one after another in one process, with the memory
 * figures of every phase, and release in between.
 *
 *     ccrun [options] MODEL...        MODEL: file.safetensors or mlp:... spec
 *     ccrun --resident R MODEL...     R stays loaded while each MODEL is swapped
 *     ccrun --sleep A B A B           each turn ends with a sleep, a return wakes
 *     ccrun --demo                    greedy vs growth, fragmentation, release,
 *                                     memory domains, sleep and wake
 *
 * For each model: load, run --iters batches of --batch rows, unload (with
 * memory domains, the default, the unload itself gives the model's memory
 * back), then release (unless --keep-cache): cca_empty_cache and the
 * device's free memory compared with its value before the first load.
 *
 * With --resident, the resident models are loaded first and stay loaded:
 * each MODEL is loaded, run and unloaded while they keep running, and every
 * resident runs again after each unload, its outputs compared (a hash of
 * their bytes) with its first run. The unload row shows the device's free
 * memory rising by the unloaded model's whole reservation; with
 * --no-domains, the unload leaves it cached and a trim gives back only
 * segments no resident block pins.
 *
 * With --sleep, a model's turn ends with ccr_model_sleep instead of an
 * unload (its device memory given back, the model kept loaded), and a
 * model that comes again in the sequence (the same MODEL text) is woken
 * instead of loaded: "sleep" and "wake" rows give the time and the device's
 * free memory (after a sleep: up by the model's whole reservation), and each
 * woken model's outputs are compared (a hash) with its first run, a
 * different hash an error. The last turn's model and the sleeping ones are
 * unloaded at the end, then everything is released.
 *
 * Errors name the problem, leave the allocator at zero live bytes, and exit
 * non-zero (see --help). An output that could not be written whole
 * (standard output, --timeline, --save, --snapshot, and the allocator's
 * CCALLOC_TRACE recording, a file the library would not open included, as
 * the engine's creation and its phase marks find it) is an error too, said
 * with the file and the reason, and two outputs on one file (or an output
 * on a MODEL) are refused before the run (output.c).
 *
 * This file parses the command line (options.c) and dispatches: the demo
 * (demo.c) or the runs (run.c).
 */
#include "ccai_stdfds.h" /* common/: ccai_hold_std_fds */
#include "ccrun.h"

int main(int argc, char **argv) {
    ccai_hold_std_fds(); /* `>&-`: no file ccrun opens becomes standard output */
    ccrun_options o;
    int rc = ccrun_parse_options(argc, argv, &o);
    if (rc == -1) /* --help */
        return ccrun_close_stdout(CCRUN_OK);
    if (rc == 0)
        rc = ccrun_check_outputs(&o);
    if (rc)
        return rc;
    rc = o.demo ? ccrun_demo(&o) : ccrun_run(&o);
    return ccrun_close_stdout(rc);
}
