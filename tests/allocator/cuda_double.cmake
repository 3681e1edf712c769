# The CUDA upstream (allocator/src/upstream/cuda.c) on a machine without a
# GPU: the allocator's sources compiled with CUDA as for a GPU build, linked
# against tests/allocator/cuda/cuda_double.c (a test double of the runtime and driver calls
# it makes, over host memory, enforcing their documented rules) instead of
# cudart. Label cpu: it runs everywhere the toolkit's headers are, CI
# included, and under the sanitizers; it is no GPU and gives no GPU figure
# (the label gpu suites run the same code on a real device).
#   test_cuda_double          test_cuda_upstream.c's GPU checks, unchanged, on the double
#   test_cuda_double_faults   every driver call of map/unmap/reserve/release failing,
#                             sleep and wake's calls (pinned memory, async copies, the
#                             copy stream) failing, then every call of a sleeping script,
#                             every call of a script failing whatever its function,
#                             refused cleanup steps logged (never under a lock),
#                             contexts put back, order of synchronize and unmap
#   test_cuda_double_whole_maps   vm_backing CCA_VM_WHOLE_MAPS: one allocation per
#                             map, whole unmaps only, every driver call failing
# And the runtime found at run time (allocator/src/upstream/cudart.c,
# CCA_CUDA_RUNTIME=dlopen, as the Python wheel builds it), label cpu too:
#   test_cudart_dlopen        the search: CCALLOC_CUDART naming a missing file,
#                             nothing, a library that is no runtime (no device,
#                             the message says what to install); the toolkit's
#                             libcudart loaded (no GPU: the runtime's reason);
#                             the double already loaded under either soname,
#                             and in the NVIDIA wheels' places beside a copy
#                             of the test, taken before the toolkit's file
#   test_cuda_double_dlopen   test_cuda_upstream.c's checks again, the double
#                             built as a shared library that the upstream finds
#                             through CCALLOC_CUDART, as the wheel finds libcudart
if(NOT CCA_WITH_CUDA)
  find_package(CUDAToolkit QUIET) # headers only: the CUDA language stays off
endif()
# CUDAToolkit_INCLUDE_DIRS may be a list (CUDA 13 puts CCCL's headers, and on
# some installs cudaTypedefs.h, in a second directory): look in each.
set(cca_have_typedefs FALSE)
foreach(cca_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  if(EXISTS "${cca_dir}/cudaTypedefs.h")
    set(cca_have_typedefs TRUE)
  endif()
endforeach()
if(CUDAToolkit_FOUND AND cca_have_typedefs)
  get_target_property(cca_double_srcs ccalloc_static SOURCES)
  list(TRANSFORM cca_double_srcs PREPEND ${PROJECT_SOURCE_DIR}/allocator/)
  add_library(ccalloc_cuda_double STATIC ${cca_double_srcs})
  target_include_directories(ccalloc_cuda_double
    PUBLIC ${PROJECT_SOURCE_DIR}/allocator/include ${CUDAToolkit_INCLUDE_DIRS}
    PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core ${PROJECT_SOURCE_DIR}/common)
  target_compile_definitions(ccalloc_cuda_double PRIVATE CCA_HAVE_CUDA=1)
  target_link_libraries(ccalloc_cuda_double PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  if(NOT CCA_DEBUG STREQUAL "")
    target_compile_definitions(ccalloc_cuda_double PRIVATE CCA_DEBUG=${CCA_DEBUG})
  endif()
  cca_add_test(NAME test_cuda_double SOURCES allocator/cuda/test_cuda_upstream.c allocator/cuda/cuda_double.c support/alloc_test_util.c
    LIBS ccalloc_cuda_double LABEL cpu)
  target_compile_definitions(test_cuda_double PRIVATE CCA_TEST_CUDART=1 CCA_TEST_CUDA_DOUBLE=1)
  target_include_directories(test_cuda_double PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  cca_add_test(NAME test_cuda_double_faults SOURCES allocator/cuda/test_cuda_double_faults.c allocator/cuda/cuda_double.c
    support/alloc_test_util.c support/malloc_fault.c LIBS ccalloc_cuda_double LABEL cpu)
  # internal header: the allocator's lock word (its log sink checks it is free); host malloc failures injected
  target_include_directories(test_cuda_double_faults PRIVATE ${CUDAToolkit_INCLUDE_DIRS}
    ${PROJECT_SOURCE_DIR}/allocator/src/core)
  target_link_options(test_cuda_double_faults PRIVATE ${CCA_MALLOC_FAULT_WRAP})
  cca_add_test(NAME test_cuda_double_whole_maps SOURCES allocator/cuda/test_cuda_double_whole_maps.c allocator/cuda/cuda_double.c
    support/alloc_test_util.c LIBS ccalloc_cuda_double LABEL cpu)
  target_include_directories(test_cuda_double_whole_maps PRIVATE ${CUDAToolkit_INCLUDE_DIRS})

  add_library(ccalloc_cudart_dlopen STATIC ${cca_double_srcs})
  target_include_directories(ccalloc_cudart_dlopen
    PUBLIC ${PROJECT_SOURCE_DIR}/allocator/include ${CUDAToolkit_INCLUDE_DIRS}
    PRIVATE ${PROJECT_SOURCE_DIR}/allocator/src/core ${PROJECT_SOURCE_DIR}/common)
  target_compile_definitions(ccalloc_cudart_dlopen PRIVATE CCA_HAVE_CUDA=1 CCA_CUDA_DLOPEN=1)
  target_link_libraries(ccalloc_cudart_dlopen PUBLIC Threads::Threads ${CMAKE_DL_LIBS})
  cca_add_test(NAME test_cudart_dlopen SOURCES allocator/cuda/test_cudart_dlopen.c support/alloc_test_util.c
    LIBS ccalloc_cudart_dlopen LABEL cpu)
  if(EXISTS "${CUDAToolkit_LIBRARY_DIR}/libcudart.so")
    target_compile_definitions(test_cudart_dlopen PRIVATE
      CCA_TEST_TOOLKIT_CUDART="${CUDAToolkit_LIBRARY_DIR}/libcudart.so")
  endif()
  add_library(cudart_double SHARED allocator/cuda/cuda_double.c)
  target_include_directories(cudart_double PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(cudart_double PRIVATE Threads::Threads)
  cca_add_test(NAME test_cuda_double_dlopen SOURCES allocator/cuda/test_cuda_upstream.c support/alloc_test_util.c
    LIBS ccalloc_cudart_dlopen cudart_double LABEL cpu)
  target_compile_definitions(test_cuda_double_dlopen PRIVATE CCA_TEST_CUDART=1 CCA_TEST_CUDA_DOUBLE=1)
  # test_cudart_dlopen's steps 2 and 3: the double as a file (copied where the
  # NVIDIA wheels go) and under the sonames of CUDA 13 and 12 (loaded first)
  foreach(v 13 12)
    add_library(cudart_double_so${v} SHARED allocator/cuda/cuda_double.c)
    target_include_directories(cudart_double_so${v} PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(cudart_double_so${v} PRIVATE Threads::Threads)
    set_target_properties(cudart_double_so${v} PROPERTIES NO_SONAME ON)
    target_link_options(cudart_double_so${v} PRIVATE -Wl,-soname,libcudart.so.${v})
  endforeach()
  target_compile_definitions(test_cudart_dlopen PRIVATE CCA_TEST_DOUBLE_FILE="$<TARGET_FILE:cudart_double>"
    CCA_TEST_DOUBLE_SO13="$<TARGET_FILE:cudart_double_so13>" CCA_TEST_DOUBLE_SO12="$<TARGET_FILE:cudart_double_so12>")
  add_dependencies(test_cudart_dlopen cudart_double cudart_double_so13 cudart_double_so12)
  # found through CCALLOC_CUDART (the link above only shares the double's counters with the test); no skip
  set_tests_properties(test_cuda_double_dlopen PROPERTIES ENVIRONMENT
    "CCA_SOURCE_DIR=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=1;CCALLOC_CUDART=$<TARGET_FILE:cudart_double>;CCA_REQUIRE_GPU=1")
else()
  message(STATUS "tests: no CUDA toolkit headers: the CUDA upstream's suites on the driver double are not built")
endif()
