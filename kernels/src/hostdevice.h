/*
 * hostdevice.h — CCK_HD, the qualifier of code written once for the GPU and
 * for the CPU (softmax_online.h, activation.h).
 *
 * Under nvcc such a function is __host__ __device__ __forceinline__: the
 * kernels call it on the device, and host code in the same .cu file could
 * too. Compiled as C (the host library and the tests that run GPU code on
 * the CPU), it is a plain static inline function. Inside such a function,
 * #ifdef __CUDA_ARCH__ selects device-only instructions (LDG.128, __stcs).
 *
 * CCK_UNROLL before a loop asks nvcc to unroll it fully. On a loop whose
 * bound is a parameter, that happens once the function is inlined into a
 * kernel that passes a compile-time constant (a template argument): then an
 * array indexed by the loop counter lives in registers, not local memory
 * (bench/kernels/kernel_resources.sh checks: no stack frame). GCC does not
 * know the pragma, so on the host, nvcc's host pass included, it expands to
 * nothing.
 */
#ifndef CCK_HOSTDEVICE_H
#define CCK_HOSTDEVICE_H

#ifdef __CUDACC__
#define CCK_HD __host__ __device__ __forceinline__
#else
#define CCK_HD static inline
#endif

#ifdef __CUDA_ARCH__ /* nvcc's device pass; its host pass hands the code to GCC */
#define CCK_UNROLL _Pragma("unroll")
#else
#define CCK_UNROLL
#endif

#endif /* CCK_HOSTDEVICE_H */
