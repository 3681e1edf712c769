# scripts/gpu_session.sh: the gpu_tests step's table (Criterion and pytest
# suites, passing, failing, skipping, crashing) over made-up ctest -V logs,
# the pages step's commands, the torch_e2e step's skip flag and the planned
# --steps commands of docs/gpu.md; needs no GPU and no build.
add_test(NAME test_gpu_session COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/test_gpu_session.sh)
set_tests_properties(test_gpu_session PROPERTIES LABELS cpu TIMEOUT 60)
