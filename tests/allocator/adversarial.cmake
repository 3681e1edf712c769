# Adversarial tests of the free index and the public API around it
# (hostile/test_adversarial_index.c). Internal header access, and the library's
# aligned_alloc calls reach the test's __wrap_aligned_alloc (as in
# block_index.cmake), so tree-node allocation can fail at random.
cca_add_test(NAME test_adversarial_index SOURCES allocator/hostile/test_adversarial_index.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu
  HOT) # its malloc wrappers
target_include_directories(test_adversarial_index PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
target_link_options(test_adversarial_index PRIVATE -Wl,--wrap=aligned_alloc -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)

# Adversarial tests of the `unmapped` mark of expandable segments' free
# blocks (hostile/test_adversarial_mark.c): internal header access for the audit.
cca_add_test(NAME test_adversarial_mark SOURCES allocator/hostile/test_adversarial_mark.c support/alloc_test_util.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_adversarial_mark PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core)
