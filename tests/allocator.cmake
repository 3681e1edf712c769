# Allocator suites (tests/test_<module>.c mirrors allocator/src/<module>.c).
# Declared here by the allocator tests; see tests/CMakeLists.txt. Every suite
# shares alloc_test_util.c (assertion short-hands and a test double upstream).
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)

foreach(suite pool stream check release stats config upstream fault_injection random threads trace)
  cca_add_test(NAME test_${suite} SOURCES test_${suite}.c alloc_test_util.c LIBS ccalloc_static LABEL cpu)
endforeach()
target_link_libraries(test_stats PRIVATE PkgConfig::CJSON)

# Skips with a reason where cca_upstream_cuda_create reports no device.
cca_add_test(NAME test_cuda_upstream SOURCES test_cuda_upstream.c alloc_test_util.c LIBS ccalloc_static LABEL gpu)

# The simulated device (upstream_host.c) held to its contract: placement, rounding, refusals, page release, latency.
cca_add_test(NAME test_upstream_host SOURCES test_upstream_host.c alloc_test_util.c LIBS ccalloc_static LABEL cpu)
