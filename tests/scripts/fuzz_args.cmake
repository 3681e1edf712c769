# scripts/fuzz.sh: a target list or SECONDS it cannot run is refused before
# anything is configured or built; needs no build and no clang.
add_test(NAME test_fuzz_args COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/test_fuzz_args.sh)
set_tests_properties(test_fuzz_args PROPERTIES LABELS cpu TIMEOUT 60)
