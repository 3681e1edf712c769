/*
 * hostdevice.h — CCK_HD, the qualifier of code written once for the GPU and
 * for the CPU (softmax_online.h, activation.h).
 *
 * Under nvcc such a function is __host__ __device__ __forceinline__: the
 * kernels call it on the device, and host code in the same .cu file could
 * too. Compiled as C (the host library and the tests that run GPU code on
 * the CPU), it is a plain static inline function. Inside such a function,
 * #ifdef __CUDA_ARCH__ selects device-only instructions (LDG.128, __stcs).
 */
#ifndef CCK_HOSTDEVICE_H
#define CCK_HOSTDEVICE_H

#ifdef __CUDACC__
#define CCK_HD __host__ __device__ __forceinline__
#else
#define CCK_HD static inline
#endif

#endif /* CCK_HOSTDEVICE_H */
