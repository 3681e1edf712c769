cca_add_test(NAME test_docs SOURCES docs/test_docs.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_docs PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/support) # invariants.h
# every relative link and anchor of the Markdown files leads somewhere (tests/docs/docs_links.py)
if(Python3_Interpreter_FOUND)
  add_test(NAME docs_links COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/docs_links.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_links PROPERTIES LABELS cpu TIMEOUT 60)
endif()
