# Runtime (engine + ccrun) tests. Host suites always run on the simulated
# device; the gpu suite skips without a GPU; test_ccrun.sh drives the ccrun
# binary (bad inputs, --json, --keep-cache, --timeline, --resident, --demo,
# outputs on a full device);
# test_runtime_domains: one memory domain per model, leaks, footprints;
# test_runtime_text: text from model files escaped for a terminal, and
# error.c: status names, the last-error message, warnings cut or whole;
# test_runtime_sleep: a model asleep and woken (sleep.c);
# test_runtime_device: which borrowed device is a GPU (device.c's name rule).
if(TARGET ccr)
  foreach(suite test_runtime_fixture test_runtime_engine test_runtime_loader test_runtime_domains test_runtime_text
                test_runtime_device test_runtime_calls)
    cca_add_test(NAME ${suite} SOURCES runtime/${suite}.c LIBS ccr LABEL cpu)
    target_include_directories(${suite} PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
  endforeach()
  target_link_libraries(test_runtime_loader PRIVATE PkgConfig::CJSON) # its hooks: host memory refused inside the parser
  # The engine when the device or the host refuses memory, at every call index of a model's life
  # (tests/runtime/test_runtime_faults.c): host malloc failures injected with --wrap (tests/support/malloc_fault.h).
  cca_add_test(NAME test_runtime_faults SOURCES runtime/test_runtime_faults.c support/alloc_test_util.c support/malloc_fault.c
    LIBS ccr LABEL cpu)
  target_include_directories(test_runtime_faults PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
  target_link_options(test_runtime_faults PRIVATE ${CCA_MALLOC_FAULT_WRAP} "LINKER:--wrap=fdopen") # its FILE, in libc
  # What an engine's life takes from the system given back, descriptors, mappings, threads and files, with
  # each host allocation refused in turn (tests/runtime/test_runtime_os_resources.c, tests/support/os_counts.h)
  cca_add_test(NAME test_runtime_os_resources SOURCES runtime/test_runtime_os_resources.c support/alloc_test_util.c
    support/malloc_fault.c LIBS ccr LABEL cpu)
  target_include_directories(test_runtime_os_resources PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
  target_link_options(test_runtime_os_resources PRIVATE ${CCA_MALLOC_FAULT_WRAP} "LINKER:--wrap=fdopen")
  # Sleep and wake of a model (runtime/src/sleep.c), the device's refusals through tu_faulty.
  cca_add_test(NAME test_runtime_sleep SOURCES runtime/test_runtime_sleep.c support/alloc_test_util.c LIBS ccr LABEL cpu)
  target_include_directories(test_runtime_sleep PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
  # ccrun's compare of a woken model's outputs with its first run fires: --sleep A B A B and the
  # demo's act 5 on a double that inverts a byte of A's wake exit 1 naming the hashes; clean, they pass
  if(TARGET ccrun_core)
    cca_add_test(NAME test_ccrun_sleep SOURCES runtime/test_ccrun_sleep.c support/alloc_test_util.c LIBS ccrun_core
      LABEL cpu) # tu_faulty
    target_compile_definitions(test_ccrun_sleep PRIVATE CCRUN_PATH="$<TARGET_FILE:ccrun>")
    add_dependencies(test_ccrun_sleep ccrun)
    # ccrun's own runs (--save, --sleep, --timeline, --snapshot, sidecars) give back descriptors, mappings,
    # threads and files; a child timed by child.c inherits nothing close-on-exec and is reaped
    cca_add_test(NAME test_ccrun_os_resources SOURCES runtime/test_ccrun_os_resources.c support/alloc_test_util.c
      LIBS ccrun_core LABEL cpu)
    target_compile_definitions(test_ccrun_os_resources PRIVATE CCRUN_PATH="$<TARGET_FILE:ccrun>")
    # every figure ccrun shows when the device refuses mem_info from each call on (ccrun_double.h)
    cca_add_test(NAME test_ccrun_mem_info SOURCES runtime/test_ccrun_mem_info.c support/alloc_test_util.c
      LIBS ccrun_core LABEL cpu)
    target_compile_definitions(test_ccrun_mem_info PRIVATE CCRUN_PATH="$<TARGET_FILE:ccrun>")
    add_dependencies(test_ccrun_mem_info ccrun)
    # report.c's baseline note and allocator config, child.c's sum of a child's run phases: exact figures
    # (and child.c's message when host memory is short for the child's output: malloc_fault.h)
    cca_add_test(NAME test_ccrun_parts SOURCES runtime/test_ccrun_parts.c support/malloc_fault.c LIBS ccrun_core
      LABEL cpu)
    target_link_options(test_ccrun_parts PRIVATE ${CCA_MALLOC_FAULT_WRAP})
  endif()
  # Engines of four threads on one shared device and on a device each (a plain program, as
  # tests/allocator/threads: Criterion's runner cannot start under TSan; the TSan build runs it too)
  cca_add_thread_program(ccr_threads DIR runtime/threads LIBS ccr)
  cca_add_test(NAME test_runtime_gpu SOURCES runtime/test_runtime_gpu.c LIBS ccr LABEL gpu)
  target_include_directories(test_runtime_gpu PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)

  add_test(NAME test_ccrun COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/runtime/test_ccrun.sh $<TARGET_FILE:ccrun>)
  # COST: started first by a parallel ctest of a fresh build (one without
  # costs recorded), not last: about 50 s, the longest suite of CI's stage 1,
  # which ran alone at its end
  set_tests_properties(test_ccrun PROPERTIES LABELS cpu TIMEOUT 300 COST 50
    ENVIRONMENT "CCA_SOURCE_DIR=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=1")
endif()
