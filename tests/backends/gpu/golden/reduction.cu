/* opgraph GPU module for function reduction: 2 kernel(s) */

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define OG_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
OG_HD float og_inf_f32() { return __int_as_float(0x7f800000); }
OG_HD float og_nan_f32() { return __int_as_float(0x7fc00000); }
OG_HD double og_inf_f64() { return __longlong_as_double(0x7ff0000000000000LL); }
OG_HD double og_nan_f64() { return __longlong_as_double(0x7ff8000000000000LL); }
#else
OG_HD float og_inf_f32() { return __builtin_huge_valf(); }
OG_HD float og_nan_f32() { return __builtin_nanf(""); }
OG_HD double og_inf_f64() { return __builtin_huge_val(); }
OG_HD double og_nan_f64() { return __builtin_nan(""); }
#endif

OG_HD float og_copysign_f32(float x, float y) { return copysignf(x, y); }
OG_HD double og_copysign_f64(double x, double y) { return copysign(x, y); }

/* A failed run-time check: set its bit in the kernel's error word. */
OG_HD void og_flag(int* err, int bit) {
#ifdef __CUDA_ARCH__
  atomicOr(err, bit);
#else
  *err |= bit;
#endif
}

/* Four consecutive elements, aligned so that one vector instruction moves them. */
template <typename T> struct alignas(4 * sizeof(T)) og_v4 { T v[4]; };
template <typename T> __device__ __forceinline__ bool og_aligned4(const T* p) {
  return ((unsigned long long)p & (4 * sizeof(T) - 1)) == 0;
}

/* Butterfly step of a warp reduction; sub-word types travel as int. */
template <typename T> __device__ __forceinline__ T og_shfl_xor(T v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
#define OG_SHFL_NARROW(T) \
  template <> __device__ __forceinline__ T og_shfl_xor<T>(T v, int m) { \
    return (T)__shfl_xor_sync(0xffffffffu, (int)v, m); \
  }
OG_SHFL_NARROW(int8_t)
OG_SHFL_NARROW(uint8_t)
OG_SHFL_NARROW(int16_t)
OG_SHFL_NARROW(uint16_t)

/* reduction_k0_0: %1 = ReduceSum[axes=(0,), keep_dims=False](%0) : f32[16] */
extern "C" __global__ void __launch_bounds__(128) reduction_k0_0(const float* __restrict__ p0, float* __restrict__ q0) {
  const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;
  (void)lane_; (void)warp_;
  __shared__ float s1[4];
  for (int r_ = blockIdx.x; r_ < 16; r_ += gridDim.x) {
    int t_ = r_;
    const int d0 = t_ % 16; t_ /= 16;
    const int o_p0 = d0 * 1;
    const int o_q0 = d0 * 1;
    float a1 = (0x0.0p+0f);
    for (int i_ = threadIdx.x; i_ < 512; i_ += 128) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0 * 16];
      a1 += v0;
    }
    {
      for (int o_ = 16; o_ > 0; o_ >>= 1) {
        const float x1_ = og_shfl_xor(a1, o_);
        a1 += x1_;
      }
      if (lane_ == 0) { s1[warp_] = a1; }
      __syncthreads();
      if (warp_ == 0) {
        a1 = lane_ < 4 ? s1[lane_] : (0x0.0p+0f);
        for (int o_ = 2; o_ > 0; o_ >>= 1) {
          const float x1_ = og_shfl_xor(a1, o_);
          a1 += x1_;
        }
        if (lane_ == 0) { s1[0] = a1; }
      }
      __syncthreads();
      a1 = s1[0];
    }
    const float v1 = a1;
    if (threadIdx.x == 0) { q0[o_q0] = v1; }
    __syncthreads();  /* the next row reuses the shared memory */
  }
}

/* reduction_k1_0: %2 = ReduceMax[axes=(1,), keep_dims=False](%0) : f32[512] */
extern "C" __global__ void __launch_bounds__(256) reduction_k1_0(const float* __restrict__ p0, float* __restrict__ q0) {
  for (int r_ = (int)blockIdx.x * blockDim.x + threadIdx.x; r_ < 512; r_ += (int)gridDim.x * blockDim.x) {
    int t_ = r_;
    const int d0 = t_ % 512; t_ /= 512;
    const int o_p0 = d0 * 16;
    const int o_q0 = d0 * 1;
    float a1 = (-og_inf_f32());
    int n1 = 0;
    for (int i_ = 0; i_ < 16; ++i_) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      a1 = v0 > a1 ? v0 : a1;
      n1 |= (v0 != v0);
    }
    const float v1 = (n1 ? og_nan_f32() : a1);
    { q0[o_q0] = v1; }
  }
}
