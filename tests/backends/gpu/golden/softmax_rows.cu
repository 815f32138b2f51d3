/* opgraph GPU module for function softmax_rows: 1 kernel(s) */

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

/* softmax_rows_k0_0: %1 = ReduceMax[axes=(1,), keep_dims=False](%0) : f32[32]; %2 = Broadcast[shape=(32, 1000), broadcast_axes=(1,)](%1) : f32[32,1000]; %3 = Sub(%0, %2) : f32[32,1000]; %4 = Exp(%3) : f32[32,1000]; %5 = ReduceSum[axes=(1,), keep_dims=False](%4) : f32[32]; %6 = Broadcast[shape=(32, 1000), broadcast_axes=(1,)](%5) : f32[32,1000]; %7 = Div[floor_division=True](%4, %6) : f32[32,1000] */
extern "C" __global__ void __launch_bounds__(256) softmax_rows_k0_0(const float* __restrict__ p0, float* __restrict__ q0) {
  const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;
  (void)lane_; (void)warp_;
  __shared__ float s1[8];
  __shared__ int m1[8];
  __shared__ float s5[8];
  for (int r_ = blockIdx.x; r_ < 32; r_ += gridDim.x) {
    int t_ = r_;
    const int d0 = t_ % 32; t_ /= 32;
    const int o_p0 = d0 * 1000;
    const int o_q0 = d0 * 1000;
    float a1 = (-og_inf_f32());
    int n1 = 0;
    for (int i_ = threadIdx.x; i_ < 1000; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      a1 = v0 > a1 ? v0 : a1;
      n1 |= (v0 != v0);
    }
    {
      for (int o_ = 16; o_ > 0; o_ >>= 1) {
        const float x1_ = og_shfl_xor(a1, o_);
        a1 = x1_ > a1 ? x1_ : a1;
        n1 |= og_shfl_xor(n1, o_);
      }
      if (lane_ == 0) { s1[warp_] = a1; m1[warp_] = n1; }
      __syncthreads();
      if (warp_ == 0) {
        a1 = lane_ < 8 ? s1[lane_] : (-og_inf_f32());
        n1 = lane_ < 8 ? m1[lane_] : 0;
        for (int o_ = 4; o_ > 0; o_ >>= 1) {
          const float x1_ = og_shfl_xor(a1, o_);
          a1 = x1_ > a1 ? x1_ : a1;
          n1 |= og_shfl_xor(n1, o_);
        }
        if (lane_ == 0) { s1[0] = a1; m1[0] = n1; }
      }
      __syncthreads();
      a1 = s1[0]; n1 = m1[0];
    }
    const float v1 = (n1 ? og_nan_f32() : a1);
    float a5 = (0x0.0p+0f);
    for (int i_ = threadIdx.x; i_ < 1000; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      const float v3 = (v0 - v1);
      const float v4 = expf(v3);
      a5 += v4;
    }
    {
      for (int o_ = 16; o_ > 0; o_ >>= 1) {
        const float x5_ = og_shfl_xor(a5, o_);
        a5 += x5_;
      }
      if (lane_ == 0) { s5[warp_] = a5; }
      __syncthreads();
      if (warp_ == 0) {
        a5 = lane_ < 8 ? s5[lane_] : (0x0.0p+0f);
        for (int o_ = 4; o_ > 0; o_ >>= 1) {
          const float x5_ = og_shfl_xor(a5, o_);
          a5 += x5_;
        }
        if (lane_ == 0) { s5[0] = a5; }
      }
      __syncthreads();
      a5 = s5[0];
    }
    const float v5 = a5;
    for (int i_ = threadIdx.x; i_ < 1000; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      const float v3 = (v0 - v1);
      const float v4 = expf(v3);
      const float v7 = (v4 / v5);
      q0[o_q0 + l0] = v7;
    }
    __syncthreads();  /* the next row reuses the shared memory */
  }
}
