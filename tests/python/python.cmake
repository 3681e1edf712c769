# The Python package (allocator/python): pytest suites over the simulated
# device, given the library this build made through CCALLOC_LIBRARY:
#   test_python_api       ccalloc.Allocator end to end, exact stats, domains,
#                         snapshot; the ctypes mirror of ccalloc.h
#   test_python_plug      cca_plug_alloc/free called through pointers with
#                         PyTorch's exact C signatures; every error path
#   test_python_adapters  torch/cupy/numba adapters: ImportError without the
#                         framework, stand-in frameworks end to end
#   test_python_domains   ccalloc.torch.domain / cupy.domain: the thread's
#                         current domain (cca_plug_set_domain) with the
#                         stand-in frameworks of test_adapters.py
#   test_python_install   the wheel built from a clean copy of the tree
#                         (scikit-build-core, no network), installed into a
#                         fresh venv, used from outside the checkout with no
#                         CCALLOC_LIBRARY: the docs' quick start, the suites
#                         above on the installed package, the bundled
#                         library's hostile cases (test_install.py)
#   test_python_figures   docs/figures/expandable_pages.py runs (to a temporary
#                         prefix) and its summary holds together;
#                         expandable_frontier.py draws its run's own table
#   test_python_hostile   the package and the plug ABI attacked: copies of
#                         owners, library paths that are not files, locales,
#                         close racing calls (test_hostile.py)
#   test_python_gpu       real PyTorch/CuPy/Numba on ccalloc (label gpu;
#                         skips with the reason without a GPU or framework)
# Not in sanitizer builds: an ASan-built library cannot be loaded into an
# uninstrumented python without preloading the runtime.
if(CCA_SANITIZE)
  message(STATUS "tests: sanitizer build: the Python suites (tests/python) are not registered")
elseif(NOT CCA_PYTEST)
  message(STATUS "tests: python3 with pytest not found: the Python suites (tests/python) are not registered (scripts/deps.sh installs pytest)")
else()
  set(CCA_PY_ENV "PYTHONDONTWRITEBYTECODE=1;CCALLOC_LIBRARY=$<TARGET_FILE:ccalloc>")
  foreach(suite api plug_abi adapters domains install figures hostile gpu)
    string(REPLACE "_abi" "" name "${suite}")
    set(label cpu)
    if(suite STREQUAL "gpu")
      set(label gpu)
    endif()
    add_test(NAME test_python_${name}
      COMMAND ${Python3_EXECUTABLE} -m pytest -q -p no:cacheprovider -rs ${CMAKE_CURRENT_SOURCE_DIR}/python/test_${suite}.py)
    set(timeout 300)
    if(suite STREQUAL "install") # builds libccalloc once more, in the wheel
      set(timeout 900)
    endif()
    set_tests_properties(test_python_${name} PROPERTIES LABELS ${label} TIMEOUT ${timeout} ENVIRONMENT "${CCA_PY_ENV}")
  endforeach()
endif()
