cca_add_test(NAME test_docs SOURCES docs/test_docs.c LIBS ccalloc_static LABEL cpu)
target_include_directories(test_docs PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/support) # invariants.h
# every relative link and anchor of the Markdown files leads somewhere, and README.md's
# Layout names every top-level folder and every doc (tests/docs/docs_links.py)
if(Python3_Interpreter_FOUND)
  add_test(NAME docs_links COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/docs_links.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(docs_links PROPERTIES LABELS cpu TIMEOUT 60)
endif()
# tables a results folder's own script made are what it makes today (tests/docs/results_scripts.py)
if(Python3_Interpreter_FOUND)
  add_test(NAME results_scripts COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/results_scripts.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(results_scripts PROPERTIES LABELS cpu TIMEOUT 60)
endif()
# allocator/src/README.md's rules of the layout (tests/docs/layout.py)
if(Python3_Interpreter_FOUND)
  add_test(NAME src_layout COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/layout.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(src_layout PROPERTIES LABELS cpu TIMEOUT 60)
  # and its layer rule fails where it should (tests/docs/layout_catches.py)
  add_test(NAME src_layout_catches COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/layout_catches.py
                                           ${PROJECT_SOURCE_DIR})
  set_tests_properties(src_layout_catches PROPERTIES LABELS cpu TIMEOUT 60)
endif()
# the outputs docs/tuning.md shows for pinning_demo and ccbench replay (all but times) and docs/allocator.md for
# pool_demo are what they print, and every ccrun and ccbench option the docs write in a command is in its --help
# (tests/docs/doc_outputs.py)
if(Python3_Interpreter_FOUND)
  add_test(NAME docs_outputs COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/doc_outputs.py ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  set_tests_properties(docs_outputs PROPERTIES LABELS cpu TIMEOUT 120)
endif()
