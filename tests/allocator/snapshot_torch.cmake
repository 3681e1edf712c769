# Snapshots in PyTorch's format: the history ring (allocator/src/support/history.c)
# and the pickle writer's error paths (allocator/src/observe/snapshot_torch.c) as a
# Criterion suite; the pickle's structure field by field, against the JSON
# snapshot and, where torch is installed, through torch.cuda._memory_viz, as
# a pytest file (tests/python/test_snapshot_torch.py) over a writer program
# and ccrun --snapshot. No torch needed: the pytest part skips only what
# needs it.
cca_add_test(NAME test_history SOURCES allocator/unit/test_history.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_history PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)

add_executable(snapshot_torch_writer python/snapshot_torch_writer.c)
target_link_libraries(snapshot_torch_writer PRIVATE ccalloc_static Threads::Threads)

if(CCA_PYTEST)
  set(CCA_SNAP_ENV "PYTHONDONTWRITEBYTECODE=1;CCA_SNAPSHOT_WRITER=$<TARGET_FILE:snapshot_torch_writer>")
  if(TARGET ccrun)
    list(APPEND CCA_SNAP_ENV "CCA_CCRUN=$<TARGET_FILE:ccrun>")
  endif()
  add_test(NAME test_snapshot_torch
    COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python/test_snapshot_torch.py)
  set_tests_properties(test_snapshot_torch PROPERTIES LABELS cpu TIMEOUT 300 ENVIRONMENT "${CCA_SNAP_ENV}")
else()
  message(STATUS "tests: python3 with pytest not found: test_snapshot_torch not registered (scripts/deps.sh installs it)")
endif()

# Both snapshots, the stats, the release reports and the history ring held to
# one another and to a model after every step of seeded random sequences
# (random/test_snapshot_model.c; tests/support/pickle_read.c decodes the pickle).
cca_add_test(NAME test_snapshot_model SOURCES allocator/random/test_snapshot_model.c support/pickle_read.c support/alloc_test_util.c
             LIBS ccalloc_static LABEL cpu HOT) # its model and readers
target_link_libraries(test_snapshot_model PRIVATE PkgConfig::CJSON)

# The recorders and writers under hostile conditions: huge snapshots, the
# history ring at its limits, snapshots taken while threads allocate, the JSON
# snapshot with host malloc refused (--wrap) (hostile/test_writers_hostile.c).
cca_add_test(NAME test_writers_hostile SOURCES allocator/hostile/test_writers_hostile.c support/pickle_read.c
             support/alloc_test_util.c support/malloc_fault.c
             LIBS ccalloc_static LABEL cpu)
target_link_options(test_writers_hostile PRIVATE ${CCA_MALLOC_FAULT_WRAP})
target_include_directories(test_writers_hostile PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_link_libraries(test_writers_hostile PRIVATE PkgConfig::CJSON Threads::Threads)
# at CCA_DEBUG=2 every call walks every segment: 40,000 segments would make
# the setup quadratic (minutes under ASan); the suite then builds fewer
if(CCA_DEBUG STREQUAL "2")
  target_compile_definitions(test_writers_hostile PRIVATE TU_WALK_EVERY_CALL=1)
endif()
