/*
 * main.c — ccbench, the allocation-strategy benchmark: the process set-up
 * and the dispatch to a sub-command. Each job lives in its own file:
 *
 *   ccbench gen NAME [-o FILE]          cmd_gen.c     write a generated trace
 *   ccbench info TRACE...               cmd_info.c    what a trace holds (peaks, counts)
 *   ccbench replay [opts] TRACE...      cmd_replay.c  strategies x traces -> table, CSV, plots
 *   ccbench micro [opts]                cmd_micro.c   cached alloc+free pair cost
 *   ccbench driver [opts]               cmd_driver.c  the GPU driver's real cudaMalloc/cudaFree cost
 *   ccbench switch [opts]               switch.c      model switching: in-process vs process
 *   ccbench sleep [opts]                sleep.c       domain sleep/wake vs the plain copy
 *   ccbench --all [--out DIR] [TRACE..] suite.c       all of the above, bounded time
 *   ccbench --list | --help             cli.c         strategies and generators | usage
 *
 * The options (one table, getopt_long) are parsed in cli.c; switch and
 * sleep parse their own. A TRACE argument is a file in the recorder's format or gen:NAME
 * for a generated one (seed and scale from --seed/--scale). What the output
 * directory holds: report.c; which command takes --out DIR and which -o
 * FILE: the table below (another's is bad usage, exit 2, as are micro's
 * own options given to another command). Exit status: 0 ok, 1 a run
 * failed, 2 bad usage; 1 also when any output could not be written whole
 * (a file, or standard output, flushed and closed at exit: `> /dev/full`
 * fails), said on stderr.
 * Standard output closed (`>&-`) is a failure only when something was
 * printed there (common/ccai_stdfds.h: `gen -o FILE >&-` succeeds).
 */
#include "ccbench.h"

#include <limits.h>
#include <malloc.h>
#include <string.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */
#include "ccai_stdfds.h" /* common/: a standard stream closed at start */
#include "ccalloc.h"

/* Where a command writes: an output option it does not take (replay -o
 * FILE, gen --out DIR) is bad usage, said before anything runs, never a
 * file silently not written. */
enum writes { WRITES_OUT_DIR, WRITES_FILE, WRITES_STDOUT };
static const char *const writes_words[] = {
    [WRITES_OUT_DIR] = "writes its files into --out DIR",
    [WRITES_FILE] = "writes its trace to -o FILE or standard output",
    [WRITES_STDOUT] = "prints to standard output only",
};

typedef struct command {
    const char *name;
    int (*run)(ccb_options *o);
    enum writes writes; /* which of --out and -o it takes */
} command;

static const command commands[] = {
    {"gen", ccb_cmd_gen, WRITES_FILE},          {"info", ccb_cmd_info, WRITES_STDOUT},
    {"replay", ccb_cmd_replay, WRITES_OUT_DIR}, {"micro", ccb_cmd_micro, WRITES_OUT_DIR},
    {"driver", ccb_cmd_driver, WRITES_OUT_DIR},
};
static const command all_command = {"--all", ccb_cmd_all, WRITES_OUT_DIR};

/* 2 (said) when o has an output option that c does not take, or one of
 * micro's own options and c is neither micro nor --all; else 0. */
static int outputs_refused(const command *c, const ccb_options *o) {
    const char *cmd = c == &all_command ? NULL : c->name, *words = writes_words[c->writes];
    if (o->output_file && c->writes != WRITES_FILE)
        return ccb_usage_error(cmd, "-o/--output '%s' is not %s's: %s %s", o->output_file, c->name, c->name, words);
    if (o->out && c->writes != WRITES_OUT_DIR)
        return ccb_usage_error(cmd, "--out '%s' is not %s's: %s %s", o->out, c->name, c->name, words);
    /* micro's own options (--help: "micro: ..."), which no other command reads */
    if (o->micro_option && c->run != ccb_cmd_micro && c != &all_command)
        return ccb_usage_error(cmd, "%s is micro's option: %s does not read it", o->micro_option, c->name);
    return 0;
}

/* The library's lines: OOM lines are counted in the results instead; the
 * recorder's (a CCALLOC_TRACE refused: nothing is recorded) are said, as
 * the library's own sink would. */
static void silence(void *user, const char *line) {
    (void)user;
    if (!strncmp(line, "CCALLOC_TRACE:", 14))
        ccai_fprintf_escaped(stderr, "ccalloc: %s\n", line); /* a path from the environment */
}

static void list(void) {
    ccb_strategy_list(stdout);
    for (size_t i = 0; i < ccb_generator_count; i++)
        printf("    gen:%-14s %s\n", ccb_generators[i].name, ccb_generators[i].doc);
}

/* Parse argv[first..] (argv[first - 1] is the command) and run c. */
static int parse_and_run(const command *c, int argc, char **argv, int first, const char *command_line) {
    ccb_options o;
    ccb_options_init(&o, command_line);
    int rc = ccb_options_parse(&o, argc - first + 1, argv + first - 1);
    if (rc)
        return rc == 1 ? 0 : rc;
    return outputs_refused(c, &o) ? 2 : c->run(&o);
}

/* The command argv names; its exit status. */
static int dispatch(int argc, char **argv, const char *command_line) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        ccb_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--list")) {
        list();
        return 0;
    }
    if (!strcmp(argv[1], "switch"))
        return ccb_cmd_switch(argc - 1, argv + 1);
    if (!strcmp(argv[1], "sleep"))
        return ccb_cmd_sleep(argc - 1, argv + 1, command_line);
    const command *named = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            named = &commands[i];
    /* --all anywhere among the options: the suite, every other argument its
     * options and TRACE operands (a command named before it is not one:
     * `replay --all x.csv`); an option's value "--all" (--scripts --all), or
     * an operand after "--" (a trace named --all), is not it */
    const char *word = argv[1]; /* getopt's pass below may move it (GNU getopt permutes argv) */
    int first = named ? 2 : 1;
    if (ccb_options_all_wanted(argc - first + 1, argv + first - 1))
        return parse_and_run(&all_command, argc, argv, first, command_line);
    if (named)
        return parse_and_run(named, argc, argv, 2, command_line);
    if (word[0] == '-' && ccb_options_help_wanted(argc, argv)) { /* --help anywhere, a command or not */
        ccb_usage(stdout);
        return 0;
    }
    ccai_fprintf_escaped(stderr, "ccbench: unknown command '%s' (see ccbench --help)\n", word);
    return 2;
}

int main(int argc, char **argv) {
    ccai_hold_std_fds(); /* `>&-`: no file we open becomes standard output */
    ccb_track_stdout();  /* a failed write's reason kept for the message at exit */
    char *command_line = ccb_command_line(argc, argv); /* quoted in README.md */
    if (!command_line) {
        fprintf(stderr, "ccbench: out of host memory for the command line\n");
        return 1;
    }
    cca_set_log_callback(silence, NULL);
    /* glibc: no heap trimming and a fixed 32 MiB mmap threshold, so that the
     * malloc floor (and the simulated device's aligned_alloc) measure
     * bookkeeping rather than mmap/munmap/brk system calls. */
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);

    int rc = dispatch(argc, argv, command_line);
    free(command_line);
    /* what it printed is written now, or said and counted; an output that
     * could not be written fails the run */
    ccb_close_stdout();
    return rc == 0 && ccb_out_failures() ? 1 : rc;
}
