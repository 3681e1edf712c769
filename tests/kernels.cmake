# kernels/ (libcck): host kernels and argument checks run everywhere (cpu);
# the CUDA suite skips each test with a reason when no GPU is present (gpu).
# The GPU suite takes its device memory, cuBLAS workspace included, from a
# ccalloc allocator over the CUDA upstream.
if(TARGET cck)
  cca_add_test(NAME test_kernels_host SOURCES test_kernels_host.c LIBS cck LABEL cpu)
  if(TARGET ccalloc_static)
    cca_add_test(NAME test_kernels_cuda SOURCES test_kernels_cuda.c LIBS cck ccalloc_static LABEL gpu)
  endif()
endif()
