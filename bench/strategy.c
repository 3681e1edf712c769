/*
 * strategy.c — the strategies a trace is replayed through, by name: BASE
 * strategies (a small table of functions each, ccb_strategy_ops:
 * open/alloc/free/sample/peaks/empty_cache/device_free/close) and PRESETS
 * naming a base plus a config.
 *
 *   preset             base          config
 *   ccalloc-default    ccalloc       (none)                   (cca_config_default: as ccalloc-expandable here)
 *   ccalloc-growth     ccalloc       policy:growth,expandable:0 (classic segments, simulated device)
 *   ccalloc-greedy     ccalloc       policy:greedy,expandable:0 (arena = 0.9 x device)
 *   ccalloc-nosmall    ccalloc       small_pool:0,expandable:0  (one pool for all sizes)
 *   ccalloc-maxsplit   ccalloc       max_split:64M,expandable:0 (PyTorch's max_split_size_mb)
 *   ccalloc-onelarge   ccalloc       medium_pool:0,expandable:0 (PyTorch's pools: medium and large share)
 *   ccalloc-shared     ccalloc       policy:growth,domains:0,expandable:0 (a trace's domains ignored: one pool)
 *   ccalloc-expandable ccalloc       expandable:1             (pages of reserved ranges, growth: the default)
 *   ccalloc-expandable-greedy ccalloc policy:greedy,expandable:1 (the arena as pages: it can shrink)
 *   ccalloc-hold       ccalloc       policy:growth,hold_peak:1,expandable:0 (cached memory released before
 *                                                              the peak rises)
 *   ccalloc-expandable-hold ccalloc expandable:1,hold_peak:1 (the same, page by page)
 *   malloc             malloc                                 (host malloc/free floor)
 *   device-malloc      device-malloc                          (one upstream call per request: no cache)
 *   ccalloc-cuda       ccalloc-cuda  policy:growth,expandable:0 (GPU, classic segments over cudaMalloc)
 *   ccalloc-cuda-expandable ccalloc-cuda expandable:1         (GPU, over the driver's virtual memory;
 *                                                              refused with the reason on a GPU without it)
 *   cuda-malloc        cuda-malloc                            (GPU, raw cudaMalloc/cudaFree)
 *   cuda-async-t0      cuda-async    release_threshold:0      (GPU, cudaMallocAsync)
 *   cuda-async-tmax    cuda-async    release_threshold:max    (GPU)
 *   cub                cub                                    (GPU, cub::CachingDeviceAllocator)
 *
 * The allocator's default is expandable segments wherever the upstream has
 * virtual memory (the simulated device always has), so every preset named
 * for classic segments (growth, greedy and their variants, ccalloc-cuda)
 * says expandable:0 itself: a preset means what its name says whatever the
 * default. ccalloc-default takes no key at all, so it is whatever the
 * default is: on the simulated device it replays exactly as
 * ccalloc-expandable, which the suites run under that name.
 *
 * Any spec may also be written BASE=CONFIG ("ccalloc=max_split:128M,
 * expandable:0"); the config string of ccalloc bases is cca_config_parse's
 * syntax, on top of cca_config_default (so expandable segments unless it
 * says expandable:0; max_split needs classic segments).
 *
 * Where each base lives (this file only names them):
 *   ccalloc, ccalloc-cuda     strategy_ccalloc.c (ccalloc-cuda's upstream and
 *                             streams: strategy_cuda.cu / strategy_nocuda.c)
 *   malloc, device-malloc     strategy_baselines.c
 *   cuda-malloc, cuda-async,  strategy_cuda.cu with the CUDA toolkit, else
 *   cub                       strategy_nocuda.c (opened as "skipped"); their
 *                             configs are read in strategy_configs.c
 */
#include "ccbench.h"

#include <string.h>

const ccb_preset ccb_presets[] = {
    {"ccalloc-default", "ccalloc", "",
     "ccalloc with cca_config_default: growth over expandable segments where the device has virtual memory"},
    {"ccalloc-growth", "ccalloc", "policy:growth,expandable:0",
     "ccalloc, growth policy over classic segments, on the simulated device"},
    {"ccalloc-greedy", "ccalloc", "policy:greedy,expandable:0",
     "ccalloc, greedy arena of 0.9 x the simulated device, one classic segment"},
    {"ccalloc-nosmall", "ccalloc", "small_pool:0,expandable:0", "ccalloc classic growth without the small pool"},
    {"ccalloc-maxsplit", "ccalloc", "max_split:64M,expandable:0",
     "ccalloc classic growth, blocks > 64 MiB never split"},
    {"ccalloc-onelarge", "ccalloc", "medium_pool:0,expandable:0",
     "ccalloc classic growth, medium and large requests share one pool (PyTorch's layout)"},
    {"ccalloc-shared", "ccalloc", "policy:growth,domains:0,expandable:0",
     "ccalloc classic growth with a trace's domains ignored: every model's blocks share segments"},
    {"ccalloc-expandable", "ccalloc", "expandable:1",
     "ccalloc growth over expandable segments (the default): address ranges mapped as they grow, unmapped when free"},
    {"ccalloc-expandable-greedy", "ccalloc", "policy:greedy,expandable:1",
     "ccalloc greedy arena as an expandable segment: mapped whole, trim unmaps what is free of it"},
    {"ccalloc-hold", "ccalloc", "policy:growth,hold_peak:1,expandable:0",
     "ccalloc classic growth holding the peak: free segments go back before reserved bytes pass their peak"},
    {"ccalloc-expandable-hold", "ccalloc", "expandable:1,hold_peak:1",
     "ccalloc growth over expandable segments holding the peak: free memory is unmapped before the peak rises"},
    {"malloc", "malloc", "", "host malloc/free: the floor for bookkeeping cost"},
    {"device-malloc", "device-malloc", "",
     "one simulated-device alloc/free per request, no cache (cudaMalloc/cudaFree's analogue)"},
    {"ccalloc-cuda", "ccalloc-cuda", "policy:growth,expandable:0",
     "ccalloc growth over cudaMalloc: classic segments (GPU)"},
    {"ccalloc-cuda-expandable", "ccalloc-cuda", "expandable:1",
     "ccalloc growth over the driver's virtual memory: expandable segments, cuMemCreate/cuMemMap (GPU)"},
    {"cuda-malloc", "cuda-malloc", "", "raw cudaMalloc/cudaFree per op (GPU)"},
    {"cuda-async-t0", "cuda-async", "release_threshold:0", "cudaMallocAsync, default pool, threshold 0 (GPU)"},
    {"cuda-async-tmax", "cuda-async", "release_threshold:max",
     "cudaMallocAsync, default pool, threshold UINT64_MAX (GPU)"},
    {"cub", "cub", "", "cub::CachingDeviceAllocator with its defaults (GPU)"},
};
const size_t ccb_preset_count = sizeof ccb_presets / sizeof ccb_presets[0];

static const ccb_strategy_ops *const bases[] = {
    &ccb_strategy_ccalloc_host, &ccb_strategy_malloc,      &ccb_strategy_device_malloc, &ccb_strategy_ccalloc_cuda,
    &ccb_strategy_cuda_malloc,  &ccb_strategy_cuda_async,  &ccb_strategy_cub,
};

const ccb_strategy_ops *ccb_strategy_base(const char *base) {
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strcmp(bases[i]->base, base) == 0)
            return bases[i];
    return NULL;
}

void ccb_strategy_list(FILE *f) {
    fprintf(f, "  presets:\n");
    for (size_t i = 0; i < ccb_preset_count; i++)
        fprintf(f, "    %-18s %s%s%s\n", ccb_presets[i].name, ccb_presets[i].doc, *ccb_presets[i].config ? "; " : "",
                ccb_presets[i].config);
    fprintf(f, "  bases (use BASE=CONFIG):\n");
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        fprintf(f, "    %-18s %s\n", bases[i]->base, bases[i]->doc);
}

int ccb_strategy_resolve(const char *spec, const ccb_strategy_ops **ops, const char **config, char *label,
                         size_t labellen) {
    for (size_t i = 0; i < ccb_preset_count; i++) {
        if (strcmp(spec, ccb_presets[i].name) == 0) {
            *ops = ccb_strategy_base(ccb_presets[i].base);
            *config = ccb_presets[i].config;
            snprintf(label, labellen, "%s", spec);
            return *ops ? 0 : -1;
        }
    }
    const char *eq = strchr(spec, '=');
    size_t blen = eq ? (size_t)(eq - spec) : strlen(spec);
    char base[64];
    if (blen >= sizeof base)
        return -1;
    memcpy(base, spec, blen);
    base[blen] = '\0';
    *ops = ccb_strategy_base(base);
    *config = eq ? eq + 1 : "";
    snprintf(label, labellen, "%s", spec);
    return *ops ? 0 : -1;
}
