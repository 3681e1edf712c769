# free_index_v1.c is internal: the test includes allocator/src/core/internal.h.
# It runs v1 against v2 (core/free_index.c) with v2's tree nodes refused in
# phases (aligned_alloc) and v1's bins refused growth (realloc): both calls
# from the library reach __wrap_* in the test.
cca_add_test(NAME test_free_index_v1 SOURCES allocator/unit/test_free_index_v1.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_free_index_v1 PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_link_options(test_free_index_v1 PRIVATE -Wl,--wrap=aligned_alloc -Wl,--wrap=realloc)
