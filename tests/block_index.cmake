# block_index.c is internal: the test includes allocator/src/internal.h.
cca_add_test(NAME test_block_index SOURCES test_block_index.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_block_index PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src)
