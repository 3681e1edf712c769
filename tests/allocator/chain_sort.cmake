# support/chain_sort.c: a chain sorted in place is the stable sort of its nodes.
cca_add_test(NAME test_chain_sort SOURCES allocator/unit/test_chain_sort.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_chain_sort PRIVATE ${PROJECT_SOURCE_DIR}/common)
