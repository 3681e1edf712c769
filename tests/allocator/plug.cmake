# The framework entry points (allocator/src/plug.c): PyTorch's alloc/free
# signatures, the per-device table, configuration and every error path, on
# the simulated device (the CUDA-without-GPU case skips where a GPU exists).
cca_add_test(NAME test_plug SOURCES allocator/unit/test_plug.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
# internal header: the held log lines of a creation (ccai_log_hold, status.c)
target_include_directories(test_plug PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
# fork() while other threads are inside calls, on a program's own allocators
# and upstreams (allocator/src/support/fork.c); internal header: the locks held
cca_add_test(NAME test_fork SOURCES allocator/unit/test_fork.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_fork PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
