# the free index (core/free_index.c, version 2) is internal: the test includes allocator/src/core/internal.h.
cca_add_test(NAME test_block_index SOURCES allocator/unit/test_block_index.c support/alloc_test_util.c
  LIBS ccalloc_static LABEL cpu HOT) # its linear-scan reference and allocation wrappers
target_include_directories(test_block_index PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
# The suite makes tree-node allocation and the streams' table and bins
# fail: the library's aligned_alloc, calloc and ccai_host_zalloc calls reach
# __wrap_aligned_alloc, __wrap_calloc and __wrap_ccai_host_zalloc in the test.
target_link_options(test_block_index PRIVATE -Wl,--wrap=aligned_alloc -Wl,--wrap=calloc -Wl,--wrap=ccai_host_zalloc)

# The deferred removal (the ghost) freed into the recent slot, then merged away by its predecessor's free.
cca_add_test(NAME test_ghost_merge SOURCES allocator/unit/test_ghost_merge.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
