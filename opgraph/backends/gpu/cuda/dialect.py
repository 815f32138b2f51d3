"""The CUDA dialect: the fused compiler's :class:`~opgraph.backends.fused.dialect.Dialect`
for CUDA C++, and the prelude every generated module starts with.

What differs from C (``backends/cpu/codegen/dialect.py``) is confined to this module:

* 16-bit floats are ``__half`` / ``__nv_bfloat16`` (``cuda_fp16.h``, ``cuda_bf16.h``), loaded
  into ``float``, and rounded back with ``__float2half_rn`` / ``__float2bfloat16_rn`` after
  every op (the CPU dialect uses ``_Float16`` and bit tricks);
* math functions are CUDA's device functions of the same names (``expf``, ``fabsf``,
  ``rintf``…): no ``__builtin_`` prefix, no libmvec declarations; ``copysign`` is a
  fixed-precision helper of the prelude (the plain name is ambiguous with integer
  arguments);
* infinities and NaNs are helper calls (``og_inf_f32()``…), not GCC builtins;
* helpers are ``__host__ __device__`` functions (``OG_HD``), and a failed check sets a bit
  of the kernel's error word (``og_flag``);
* fixed-width integer types come from ``<stdint.h>`` under nvcc and are declared here under
  NVRTC (which has no system headers).
"""

from __future__ import annotations

import math
from typing import ClassVar

from opgraph.backends.fused.dialect import CStyleDialect
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType


class CudaDialect(CStyleDialect):
    """CUDA C++ as NVRTC and nvcc compile it."""

    narrow_types: ClassVar[dict[ElementType, str]] = {et.f16: "__half", et.bf16: "__nv_bfloat16"}
    loads: ClassVar[dict[ElementType, str]] = {
        et.f16: "__half2float({})",
        et.bf16: "__bfloat162float({})",
    }
    stores: ClassVar[dict[ElementType, str]] = {
        et.f16: "__float2half_rn({})",
        et.bf16: "__float2bfloat16_rn({})",
    }
    rounds: ClassVar[dict[ElementType, str]] = {
        et.f16: "__half2float(__float2half_rn({}))",
        et.bf16: "__bfloat162float(__float2bfloat16_rn({}))",
    }
    inline = "OG_HD"

    def narrow(self, t: ElementType, expr: str) -> str:
        assert t is et.f16, f"no one-rounding narrowing to {t}"
        return f"__half2float(__double2half({expr}))"

    def math_call(self, name: str, t: ElementType, *args: str) -> str:
        if name == "copysign":
            return f"og_copysign_{'f64' if t is et.f64 else 'f32'}({', '.join(args)})"
        return super().math_call(name, t, *args)

    def special(self, value: float, wide: bool) -> str:
        width = "f64" if wide else "f32"
        if math.isnan(value):
            return f"og_nan_{width}()"
        return f"og_inf_{width}()" if value > 0 else f"(-og_inf_{width}())"

    def flag(self, condition: str, mask: int) -> str:
        return f"if ({condition}) og_flag(og_err, {mask});"


#: The CUDA dialect.
CUDA = CudaDialect()
storage_type = CUDA.storage_type
compute_type = CUDA.compute_type
load = CUDA.load
store = CUDA.store
round_to = CUDA.round_to
math_call = CUDA.math_call
literal = CUDA.literal
lowest = CUDA.lowest
highest = CUDA.highest
helper_code = CUDA.helper_code


#: Everything a generated module starts with: headers, integer types, special values,
#: vector access, and warp shuffles for every accumulator type.
PRELUDE = r"""#if defined(__CUDACC_RTC__)
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
"""
