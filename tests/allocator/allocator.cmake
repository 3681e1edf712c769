# Allocator suites: some are named after the file they test (test_stream.c,
# allocator/src/core/stream.c), others cross files (random, threads, hostile, hold).
# Declared here by the allocator tests; see tests/CMakeLists.txt. Every suite
# shares alloc_test_util.c (assertion short-hands and a test double upstream).
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)

foreach(suite unit/pool unit/stream unit/check unit/release unit/stats unit/config unit/upstream hostile/fault_injection
              random/random threads/threads unit/trace hostile/trace_hostile unit/hold_peak hostile/hold_hostile
              unit/release_waits)
  get_filename_component(kind ${suite} DIRECTORY)
  get_filename_component(suite ${suite} NAME)
  cca_add_test(NAME test_${suite} SOURCES allocator/${kind}/test_${suite}.c support/alloc_test_util.c LIBS ccalloc_static
    LABEL cpu)
endforeach()
# internal header (allocator/src/core/internal.h): the invariant codes, the upstream's no-VM reason
target_include_directories(test_check PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_include_directories(test_upstream PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_link_libraries(test_stats PRIVATE PkgConfig::CJSON)
# test_pool and test_stream count host allocations: the cached pair's, a deferred free's
# (support/malloc_fault.h)
foreach(suite test_pool test_stream)
  target_sources(${suite} PRIVATE support/malloc_fault.c)
  target_link_options(${suite} PRIVATE ${CCA_MALLOC_FAULT_WRAP})
endforeach()

# Every public call from eight threads at once, checked exactly, and the framework entry points racing
# (tests/allocator/threads/threads_api.c, a plain program: also the TSan stage's). Its trace then reads back through ccbench's
# parser (pairing, domains, sections), and replays where the full invariant walk (CCA_DEBUG=2, minutes on
# this trace) is off.
cca_add_thread_program(threads_api)
# Shared allocators with held events, allocators created and destroyed beside them, forks, every writer,
# whole-block patterns (tests/allocator/threads/tsan_shared.c; also the TSan stage's).
cca_add_thread_program(tsan_shared)
# The upstream's refusals (every op, a few percent, seeded) while eight threads allocate, free, trim,
# sleep, wake and release domains, and sleep and wake the whole allocator; stats and the device checked
# exactly at barriers
# (tests/allocator/threads/threads_faults.c; also the TSan stage's).
cca_add_thread_program(threads_faults)
# The framework entry points (cca_plug_*) from eight threads while their calls fail: small devices out
# of memory, a device that failed, destroyed current domains, wrong-device frees, refused configure and
# reset; stats exact at barriers, the last reset leaves nothing
# (tests/allocator/threads/threads_plug.c; also the TSan stage's).
cca_add_thread_program(threads_plug)
if(TARGET ccbench)
  set_tests_properties(threads_api PROPERTIES FIXTURES_SETUP threads_api_trace)
  add_test(NAME threads_api_trace_reads COMMAND ccbench info ${CMAKE_CURRENT_BINARY_DIR}/threads_api_trace.csv)
  set_tests_properties(threads_api_trace_reads PROPERTIES LABELS cpu FIXTURES_REQUIRED threads_api_trace)
  if(NOT CCA_DEBUG STREQUAL "2")
    add_test(NAME threads_api_replay COMMAND ccbench replay --quick -s ccalloc-growth -s ccalloc-expandable
      --out ${CMAKE_CURRENT_BINARY_DIR}/threads_api_replay ${CMAKE_CURRENT_BINARY_DIR}/threads_api_trace.csv)
    set_tests_properties(threads_api_replay PROPERTIES LABELS cpu TIMEOUT 300 FIXTURES_REQUIRED threads_api_trace)
  endif()
endif()

# Skips with a reason where cca_upstream_cuda_create reports no device.
cca_add_test(NAME test_cuda_upstream SOURCES allocator/cuda/test_cuda_upstream.c support/alloc_test_util.c LIBS ccalloc_static LABEL gpu)
if(CCA_WITH_CUDA) # the VMM test writes and reads mapped memory with cudaMemset/cudaMemcpy
  target_compile_definitions(test_cuda_upstream PRIVATE CCA_TEST_CUDART=1)
  target_link_libraries(test_cuda_upstream PRIVATE CUDA::cudart)
endif()

# The CUDA upstream's record of ranges and mapped granules (vm_ranges.c, internal): its rules, on a CPU.
cca_add_test(NAME test_vm_ranges SOURCES allocator/unit/test_vm_ranges.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_vm_ranges PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)

# The simulated device (upstream/host.c) held to its contract: placement, rounding, refusals, page release, latency.
cca_add_test(NAME test_upstream_host SOURCES allocator/unit/test_upstream_host.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
# it counts the host allocations of a creation (support/malloc_fault.h)
target_sources(test_upstream_host PRIVATE support/malloc_fault.c)
target_link_options(test_upstream_host PRIVATE ${CCA_MALLOC_FAULT_WRAP})

# The simulated device's virtual memory (upstream/host.c, vm_* ops) held to CUDA's rules: ranges, maps, capacity, page release.
cca_add_test(NAME test_upstream_vm SOURCES allocator/unit/test_upstream_vm.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# A custom upstream that misbehaves (tests/allocator/hostile/test_upstream_hostile.c): ranges past the top of the address space,
# a huge granularity, mem_info and event queries that lie, ops that call back into their own allocator.
cca_add_test(NAME test_upstream_hostile SOURCES allocator/hostile/test_upstream_hostile.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# Expandable segments (kinds/pages.c, with core/release.c's page release) on the simulated device's vm ops,
# one suite per concern (allocator/unit/expandable_suite.h has what they share):
#   test_expandable_pages    accounting, release, growth, greedy, config, the page bitmap, snapshots, slack
#   test_expandable_limits   requests that cannot be served, the OOM retry, ranges of billions of pages
#   test_expandable_stress   a fault at every upstream call, seeded random sequences, threads
foreach(suite pages limits stress)
  cca_add_test(NAME test_expandable_${suite} SOURCES allocator/unit/test_expandable_${suite}.c support/alloc_test_util.c
    LIBS ccalloc_static LABEL cpu)
  target_link_libraries(test_expandable_${suite} PRIVATE PkgConfig::CJSON)
  target_include_directories(test_expandable_${suite} PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core) # the page bitmap's runs
endforeach()

# Sleep and wake (allocator/src/sleep.c) on the simulated device: exact figures, a touch of a sleeping
# block faults, frees while asleep, a wake refused on a full device, DISCARD, classic refused, greedy,
# cca_sleep / cca_wake all or nothing, a fault at every upstream call of a sleep and a wake, threads.
cca_add_test(NAME test_sleep SOURCES allocator/unit/test_sleep.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
cca_add_test(NAME test_copy_engine SOURCES allocator/unit/test_copy_engine.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu
  HOT) # its patterns over copied bytes
# Sleep and wake under attack (allocator/hostile/test_sleep_hostile.c): seeded random programs over three domains
# checked after every call (with and without injected upstream faults), frees while asleep in every order against
# the chunk rule, a refused unmap, and the simulated device's host memory and copy engine at their edges.
cca_add_test(NAME test_sleep_hostile SOURCES allocator/hostile/test_sleep_hostile.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu
  HOT) # its checks of slept and woken bytes
# Sleep and wake beside the rest of the allocator (allocator/hostile/test_sleep_interplay.c): the release report,
# hold_peak, and the other calls while a domain sleeps, each a case the random programs do not reach.
cca_add_test(NAME test_sleep_interplay SOURCES allocator/hostile/test_sleep_interplay.c support/pickle_read.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# Expandable segments over whole maps (vm_backing CCA_VM_WHOLE_MAPS): the device's rule, maps cut at
# the growth rule's largest map (128 MiB, or the test hook's), release map by map and the trapped
# bytes, greedy, the retry, invariant I9.
cca_add_test(NAME test_whole_maps SOURCES allocator/unit/test_whole_maps.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_whole_maps PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core) # a segment's start bits
# The OOM retry over whole maps: a request's new pages leave out those a live neighbour's map holds.
cca_add_test(NAME test_whole_maps_retry SOURCES allocator/unit/test_whole_maps_retry.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
# Seeded random sequences over whole maps with faults at random upstream calls: every chunk (0, 1, a page less
# one .. SIZE_MAX), granularities 4 KiB - 1 MiB, domains and arenas, greedy; the device checked after every step.
cca_add_test(NAME test_whole_maps_random SOURCES allocator/random/test_whole_maps_random.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
# What cca_empty_cache leaves, over random programs (three domains, streams, sleep and wake): every segment, map
# or page still held touches a live block of an awake domain; with pages, at most a page at each end of a run of them.
cca_add_test(NAME test_release_bound SOURCES allocator/random/test_release_bound.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
# Classic segments under growth held pointer for pointer to a model written from the docs (classic_model.c):
# every status, pointer, count and release report after every step of seeded random programs.
cca_add_test(NAME test_classic_oracle SOURCES allocator/random/test_classic_oracle.c allocator/random/classic_model.c
  allocator/random/oracle_harness.c allocator/random/model_blocks.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu
  HOT) # its model
# Expandable segments under growth held pointer for pointer and page for page to a model written from the
# docs (pages_model.c): every status, pointer, count, map and release report after every step.
cca_add_test(NAME test_pages_oracle SOURCES allocator/random/test_pages_oracle.c allocator/random/pages_model.c
  allocator/random/oracle_harness.c allocator/random/model_blocks.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu
  HOT) # its model
# cca_destroy over whole maps with maps mapped: one unmap per map, a refused unmap or synchronize.
cca_add_test(NAME test_whole_maps_destroy SOURCES allocator/unit/test_whole_maps_destroy.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# Memory domains (domain.c), classic and expandable, one suite per concern (allocator/unit/domain_suite.h has
# what they share):
#   test_domain_lifecycle   create, domain_of, isolation, release and its leak report, force, destroy
#   test_domain_stats       per-domain stats against a model, threads, JSON
#   test_domain_release     pending blocks and faults at every call of a release
#   test_domain_footprint   footprint arenas (cca_domain_reserve), cached memory released by trim and the retry
foreach(suite lifecycle stats release footprint)
  cca_add_test(NAME test_domain_${suite} SOURCES allocator/unit/test_domain_${suite}.c support/alloc_test_util.c
    LIBS ccalloc_static LABEL cpu TIMEOUT 120)
  target_link_libraries(test_domain_${suite} PRIVATE PkgConfig::CJSON)
endforeach()

# Domains and the VM record under attack (tests/allocator/hostile/test_domain_hostile.c): host malloc failures injected with --wrap.
cca_add_test(NAME test_domain_hostile SOURCES allocator/hostile/test_domain_hostile.c support/alloc_test_util.c support/malloc_fault.c LIBS ccalloc_static LABEL cpu
  TIMEOUT 600)
target_include_directories(test_domain_hostile PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_link_options(test_domain_hostile PRIVATE ${CCA_MALLOC_FAULT_WRAP})

# The public API's error paths held to ccalloc.h and docs/allocator.md (every function: NULLs, each error
# code, stats and out-parameters on failure, the message); host malloc failures injected with --wrap.
cca_add_test(NAME test_api_contract SOURCES allocator/contract/test_api_contract.c support/alloc_test_util.c
  support/malloc_fault.c LIBS ccalloc_static LABEL cpu)
target_link_options(test_api_contract PRIVATE ${CCA_MALLOC_FAULT_WRAP})

# Seeded random sequences over domains (create/release/destroy, forced, pending blocks, arenas, trims) with
# upstream faults at random steps, every account checked against a model after every step; classic and expandable.
cca_add_test(NAME test_random_domains SOURCES allocator/random/test_random_domains.c support/alloc_test_util.c
  allocator/random/device_books.c LIBS ccalloc_static LABEL cpu
  TIMEOUT 300)

# Every relation ccalloc.h states between the stats, the domains' stats and the upstream's counts, after every call
# of seeded random sequences mixing domains, arenas, sleep and wake, the hold, caps, greedy, streams and upstream faults.
cca_add_test(NAME test_random_relations SOURCES allocator/random/test_random_relations.c support/alloc_test_util.c
  LIBS ccalloc_static LABEL cpu TIMEOUT 600)

# Deferred frees against pages: seeded random sequences of alloc / free / record_stream on streams whose events
# are held or complete in order, trims, empty-cache and domains, with a fault at any upstream call (events
# included), checked against a model and the device after every step (and a sweep of every call index);
# classic and expandable (over pages and whole maps, under max_reserved caps), growth and greedy.
cca_add_test(NAME test_random_streams SOURCES allocator/random/test_random_streams.c support/alloc_test_util.c
  allocator/random/device_books.c LIBS ccalloc_static LABEL cpu
  TIMEOUT 300)

# A failure at every step (tests/allocator/hostile/test_fault_steps.c): host malloc (--wrap) and upstream refusals at every call
# of scripted sequences over expandable segments, domains and arenas, history, snapshots, tracing, stream
# bookkeeping (hostile stream handles among them) and the writers, in every configuration; each call's status, the invariants, exact stats and
# the device's own counts checked after every step.
cca_add_test(NAME test_fault_steps SOURCES allocator/hostile/test_fault_steps.c support/alloc_test_util.c
  support/malloc_fault.c LIBS ccalloc_static LABEL cpu)
target_link_options(test_fault_steps PRIVATE ${CCA_MALLOC_FAULT_WRAP})

# What the operating system lends, given back (tests/allocator/hostile/test_os_resources.c): descriptors,
# mappings and threads counted after every object's life (the device, allocators in each configuration, the
# trace, the plug, threads and forks), and after each host allocation (--wrap, the trace's fopencookie too) and
# upstream call refused in turn.
cca_add_test(NAME test_os_resources SOURCES allocator/hostile/test_os_resources.c support/alloc_test_util.c
  support/malloc_fault.c LIBS ccalloc_static LABEL cpu)
target_link_options(test_os_resources PRIVATE ${CCA_MALLOC_FAULT_WRAP} "LINKER:--wrap=fopencookie,--wrap=pthread_atfork")

# max_reserved and the OOM retry under attack (tests/allocator/hostile/test_cap.c): growth and greedy, classic and expandable
# segments, domains and footprint arenas, pending frees, caps at the edges of segment and page sizes; the cap
# never crossed, refusals that change nothing and release nothing for nothing, requests that fit once the
# cache is released served, exact stats against the upstream doubles.
cca_add_test(NAME test_cap SOURCES allocator/hostile/test_cap.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# Where features meet (tests/allocator/contract/test_interactions.c): max_reserved with the ahead mapping and footprint arenas,
# trim's budget and report, the greedy arena over pages, sizes at the edges of rounding, empty-cache's bound,
# and seeded random sequences of all of it against a model of the mapped pages.
cca_add_test(NAME test_interactions SOURCES allocator/contract/test_interactions.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)

# threads_api's --part K/N is refused (exit 2) unless 1 <= K <= N <= 12, digits only
foreach(bad "0/3" "4/3" "1/0" "1/13" "x" "1/3x" "+1/3" "1/+3" "01/3" "1")
  string(MAKE_C_IDENTIFIER "${bad}" id)
  add_test(NAME threads_api_bad_part_${id} COMMAND threads_api --part ${bad})
  set_tests_properties(threads_api_bad_part_${id} PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION "^usage: threads_api \\[--part K/N\\]")
endforeach()
