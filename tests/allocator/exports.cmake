# The shared library's exported symbols are its public API, exactly.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_test(NAME test_exports COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_exports.sh $<TARGET_FILE:ccalloc>
           ${PROJECT_SOURCE_DIR}/allocator/include/ccalloc.h)
  set_tests_properties(test_exports PROPERTIES LABELS cpu TIMEOUT 30)
endif()
