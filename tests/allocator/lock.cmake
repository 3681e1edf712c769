# lock.c is internal: the test includes allocator/src/core/internal.h.
cca_add_test(NAME test_lock SOURCES allocator/unit/test_lock.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_lock PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
