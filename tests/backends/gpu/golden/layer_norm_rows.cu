/* opgraph GPU module for function layer_norm_rows: 1 kernel(s) */

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

/* layer_norm_rows_k0_0: %3 = ReduceSum[axes=(1,), keep_dims=False](%0) : f32[16]; %6 = Div[floor_division=True](%3, %5) : f32[16]; %7 = Broadcast[shape=(16, 768), broadcast_axes=(1,)](%6) : f32[16,768]; %8 = Sub(%0, %7) : f32[16,768]; %11 = Mul(%8, %8) : f32[16,768]; %12 = ReduceSum[axes=(1,), keep_dims=False](%11) : f32[16]; %13 = Div[floor_division=True](%12, %5) : f32[16]; %16 = Add(%13, %15) : f32[16]; %17 = Sqrt(%16) : f32[16]; %18 = Div[floor_division=True](%10, %17) : f32[16]; %19 = Broadcast[shape=(16, 768), broadcast_axes=(1,)](%18) : f32[16,768]; %20 = Mul(%8, %19) : f32[16,768]; %22 = Mul(%20, %21) : f32[16,768]; %24 = Add(%22, %23) : f32[16,768] */
extern "C" __global__ void __launch_bounds__(256) layer_norm_rows_k0_0(const float* __restrict__ p0, const float* __restrict__ p16, const float* __restrict__ p18, float* __restrict__ q0) {
  const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;
  (void)lane_; (void)warp_;
  __shared__ float s1[8];
  __shared__ float s7[8];
  for (int r_ = blockIdx.x; r_ < 16; r_ += gridDim.x) {
    int t_ = r_;
    const int d0 = t_ % 16; t_ /= 16;
    const int o_p0 = d0 * 768;
    const int o_p16 = 0;
    const int o_p18 = 0;
    const int o_q0 = d0 * 768;
    float a1 = (0x0.0p+0f);
    for (int i_ = threadIdx.x; i_ < 768; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
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
        a1 = lane_ < 8 ? s1[lane_] : (0x0.0p+0f);
        for (int o_ = 4; o_ > 0; o_ >>= 1) {
          const float x1_ = og_shfl_xor(a1, o_);
          a1 += x1_;
        }
        if (lane_ == 0) { s1[0] = a1; }
      }
      __syncthreads();
      a1 = s1[0];
    }
    const float v1 = a1;
    const float v2 = (0x1.8000000000000p+9f);
    const float v3 = (v1 / v2);
    float a7 = (0x0.0p+0f);
    for (int i_ = threadIdx.x; i_ < 768; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      const float v5 = (v0 - v3);
      const float v6 = (v5 * v5);
      a7 += v6;
    }
    {
      for (int o_ = 16; o_ > 0; o_ >>= 1) {
        const float x7_ = og_shfl_xor(a7, o_);
        a7 += x7_;
      }
      if (lane_ == 0) { s7[warp_] = a7; }
      __syncthreads();
      if (warp_ == 0) {
        a7 = lane_ < 8 ? s7[lane_] : (0x0.0p+0f);
        for (int o_ = 4; o_ > 0; o_ >>= 1) {
          const float x7_ = og_shfl_xor(a7, o_);
          a7 += x7_;
        }
        if (lane_ == 0) { s7[0] = a7; }
      }
      __syncthreads();
      a7 = s7[0];
    }
    const float v7 = a7;
    const float v8 = (v7 / v2);
    const float v9 = (0x1.1979980000000p-40f);
    const float v10 = (v8 + v9);
    const float v11 = sqrtf(v10);
    const float v12 = (0x1.0000000000000p+0f);
    const float v13 = (v12 / v11);
    for (int i_ = threadIdx.x; i_ < 768; i_ += 256) {
      const int l0 = i_;
      const float v0 = p0[o_p0 + l0];
      const float v5 = (v0 - v3);
      const float v15 = (v5 * v13);
      const float v16 = p16[o_p16 + l0];
      const float v17 = (v15 * v16);
      const float v18 = p18[o_p18 + l0];
      const float v19 = (v17 + v18);
      q0[o_q0 + l0] = v19;
    }
    __syncthreads();  /* the next row reuses the shared memory */
  }
}
