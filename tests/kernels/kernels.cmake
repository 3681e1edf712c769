# kernels/ (libcck): host kernels and argument checks run everywhere (cpu);
# the CUDA suite skips each test with a reason when no GPU is present (gpu).
# The GPU suite takes its device memory, cuBLAS workspace included, from a
# ccalloc allocator over the CUDA upstream.
if(TARGET cck)
  cca_add_test(NAME test_kernels_host SOURCES kernels/test_kernels_host.c LIBS cck LABEL cpu)
  # exp_host.h is tested directly
  target_include_directories(test_kernels_host PRIVATE ${PROJECT_SOURCE_DIR}/kernels/src)
  # softmax v2-v5's per-thread code (kernels/src/softmax_strided.h,
  # softmax_online.h, softmax_v5.h) and the epilogue's activations on the CPU
  cca_add_test(NAME test_kernels_emulated SOURCES kernels/test_kernels_emulated.c LIBS cck LABEL cpu)
  target_include_directories(test_kernels_emulated PRIVATE ${PROJECT_SOURCE_DIR}/kernels/src)
  # the dispatch table (kernels/src/softmax_dispatch.c) against the results
  # file it cites, and each choice through its version's emulation
  cca_add_test(NAME test_softmax_dispatch SOURCES kernels/test_softmax_dispatch.c LIBS cck LABEL cpu)
  target_include_directories(test_softmax_dispatch PRIVATE ${PROJECT_SOURCE_DIR}/kernels/src)
  if(CCK_HAVE_OPENBLAS)
    target_compile_definitions(test_kernels_host PRIVATE CCK_EXPECT_OPENBLAS=1)
  endif()
  if(CCA_WITH_CUDA)
    # where cuBLAS comes from (kernels/src/cublas.c): needs the library, not a GPU
    cca_add_test(NAME test_cublas_load SOURCES kernels/test_cublas_load.c LIBS cck ${CMAKE_DL_LIBS} LABEL cpu)
    target_compile_definitions(test_cublas_load PRIVATE CCK_CUBLAS_TOOLKIT_DIR="${CUDAToolkit_LIBRARY_DIR}")
    # stand-ins for cuBLAS (kernels/cublas_double.c), never linked, each
    # opened by the test by its path: the major version built against under
    # cuBLAS's own soname, one saying it is the major version before, and a
    # library with one function of the six
    set(cck_double_major ${CUDAToolkit_VERSION_MAJOR})
    set(cck_double_current_major ${cck_double_major})
    math(EXPR cck_double_older_major "${cck_double_major} - 1")
    set(cck_double_partial_major ${cck_double_major})
    foreach(kind current older partial)
      add_library(cublas_double_${kind} SHARED kernels/cublas_double.c)
      target_include_directories(cublas_double_${kind} PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
      target_compile_definitions(cublas_double_${kind} PRIVATE CCK_DOUBLE_MAJOR=${cck_double_${kind}_major})
      target_compile_definitions(test_cublas_load
        PRIVATE CCK_CUBLAS_DOUBLE_${kind}="$<TARGET_FILE:cublas_double_${kind}>")
      add_dependencies(test_cublas_load cublas_double_${kind})
    endforeach()
    set_target_properties(cublas_double_current PROPERTIES NO_SONAME ON)
    target_link_options(cublas_double_current PRIVATE "LINKER:-soname,libcublas.so.${cck_double_major}")
    target_compile_definitions(cublas_double_partial PRIVATE CCK_DOUBLE_PARTIAL=1)
  endif()
  if(TARGET ccalloc_static)
    cca_add_test(NAME test_kernels_cuda SOURCES kernels/test_kernels_cuda.c LIBS cck ccalloc_static LABEL gpu)
  endif()
endif()

# What ptxas and the PTX say about the CUDA kernels (no GPU needed): no spills,
# no stack frame, 16-byte accesses exactly where softmax.cu and dense.cu say.
if(CCA_WITH_CUDA)
  string(REPLACE ";" " " _cck_archs "${CMAKE_CUDA_ARCHITECTURES}")
  add_test(NAME kernels_static_check
    COMMAND ${PROJECT_SOURCE_DIR}/bench/kernels/kernel_resources.sh --check --nvcc ${CMAKE_CUDA_COMPILER}
            --arch "${_cck_archs}")
  set_tests_properties(kernels_static_check PROPERTIES LABELS cpu TIMEOUT 300)
endif()
