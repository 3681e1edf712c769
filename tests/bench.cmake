# ccbench suites (bench/): the trace format (tests/test_trace_format.c
# mirrors bench/trace.c) and the harness (tests/test_bench.c: generators,
# replay, strategies, reports, a tiny suite), plus the program's own quick
# suite. Declared only when the benchmarks are built (CCA_BUILD_BENCH).
if(TARGET ccbench_core)
  cca_add_test(NAME test_trace_format SOURCES test_trace_format.c LIBS ccbench_core LABEL cpu)
  cca_add_test(NAME test_bench SOURCES test_bench.c alloc_test_util.c LIBS ccbench_core LABEL cpu) # tu_upstream
  # real work: tiny blocks, determinism, release events, driver cost, ideal arena, format v2
  cca_add_test(NAME test_replay SOURCES test_replay.c LIBS ccbench_core LABEL cpu)
  # hostile traces, files, call sequences and the recorder under threads
  cca_add_test(NAME test_bench_hostile SOURCES test_bench_hostile.c LIBS ccbench_core LABEL cpu)
  # the whole suite at --quick scale; under the sanitizer stage (CCA_DEBUG=2: an
  # invariant walk after every call) it took 233 s on the CI machine
  add_test(NAME ccbench_quick
    COMMAND ccbench --all --quick --out ${CMAKE_CURRENT_BINARY_DIR}/ccbench-quick)
  set_tests_properties(ccbench_quick PROPERTIES LABELS cpu TIMEOUT 600
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1")
  # bad driver-cost options are refused (exit 2), never taken as 0
  foreach(bad "x" "2s" "2000000us" "5us," "-1us" "1ms,x")
    string(MAKE_C_IDENTIFIER "${bad}" id)
    add_test(NAME ccbench_bad_latency_${id} COMMAND ccbench replay --upstream-latency ${bad} gen:uniform)
    set_tests_properties(ccbench_bad_latency_${id} PROPERTIES LABELS cpu WILL_FAIL TRUE)
  endforeach()
  # bench/scripts/record_torch.py's reconstruction (pairing, drops, totals,
  # marks, the v2 writer) on synthetic events: pytest, no torch needed
  if(CCA_PYTEST)
    add_test(NAME test_record_torch
      COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/test_record_torch.py)
    set_tests_properties(test_record_torch PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
    # bench/scripts/pytorch_replay.py over a stand-in for torch.cuda
    add_test(NAME test_pytorch_replay
      COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/test_pytorch_replay.py)
    set_tests_properties(test_pytorch_replay PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  else()
    message(STATUS "tests: python3 with pytest not found: test_record_torch not registered (scripts/deps.sh installs it)")
  endif()
  foreach(bad "0" "1001" "x")
    add_test(NAME ccbench_bad_driver_reps_${bad} COMMAND ccbench replay --driver-reps ${bad} gen:uniform)
    set_tests_properties(ccbench_bad_driver_reps_${bad} PROPERTIES LABELS cpu WILL_FAIL TRUE)
  endforeach()
  # a generated trace is held in memory: a --scale past CCB_GEN_MAX_SCALE (the
  # bound on generated events, bench/ccbench.h) is refused with a message before
  # anything is generated; 1e6 once grew to gigabytes and aborted
  foreach(cmd "info;gen:uniform" "gen;uniform" "replay;gen:models")
    list(GET cmd 0 sub)
    add_test(NAME ccbench_scale_too_large_${sub} COMMAND ccbench ${cmd} --scale 1e6)
    set_tests_properties(ccbench_scale_too_large_${sub} PROPERTIES LABELS cpu TIMEOUT 20
      PASS_REGULAR_EXPRESSION "--scale '1e6' is not a number > 0 and <= 100")
  endforeach()
  # the driver's real costs: measured on a GPU, a labelled skip without one
  add_test(NAME ccbench_driver COMMAND ccbench driver --reps 5)
  set_tests_properties(ccbench_driver PROPERTIES LABELS cpu
    PASS_REGULAR_EXPRESSION "^skipped: no GPU|cudaMalloc median")
endif()
