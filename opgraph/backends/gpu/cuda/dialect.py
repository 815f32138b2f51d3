"""The CUDA dialect: element types as CUDA C++ types, literals, math calls, and the C helper
functions of the CPU dialect translated for the device.

The scalar semantics are written once, as C expression templates (``backends/cpu/lowering``)
over a :class:`~opgraph.backends.fused.lowering.ScalarContext`. Most of the C they produce is
valid CUDA C++; what differs is confined to this module:

* 16-bit floats are ``__half`` / ``__nv_bfloat16`` (``cuda_fp16.h``, ``cuda_bf16.h``), loaded
  into ``float``, and rounded back with ``__float2half_rn`` / ``__float2bfloat16_rn`` after
  every op (the CPU dialect uses ``_Float16`` and bit tricks);
* math functions are CUDA's device functions of the same names (``expf``, ``fabsf``,
  ``rintf``…): no ``__builtin_`` prefix, no libmvec declarations;
* infinities and NaNs are helper calls (``og_inf_f32()``…), not GCC builtins;
* the CPU helpers (integer division, power, modulo, float-to-integer conversion) are reused as
  text: :func:`to_cuda` turns ``static inline`` into ``__host__ __device__`` and each GCC
  builtin into its CUDA counterpart;
* fixed-width integer types come from ``<stdint.h>`` under nvcc and are declared here under
  NVRTC (which has no system headers).
"""

from __future__ import annotations

import math
import re

from opgraph.backends.cpu.codegen import dialect as c_dialect
from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType

_STORAGE = {
    et.boolean: "uint8_t",
    et.f16: "__half",
    et.bf16: "__nv_bfloat16",
    et.f32: "float",
    et.f64: "double",
    et.i8: "int8_t",
    et.i16: "int16_t",
    et.i32: "int32_t",
    et.i64: "int64_t",
    et.u8: "uint8_t",
    et.u16: "uint16_t",
    et.u32: "uint32_t",
    et.u64: "uint64_t",
}

_NARROW_FLOATS = (et.f16, et.bf16)


def storage_type(t: ElementType) -> str:
    """The CUDA type of one stored element."""
    return _STORAGE[t]


def compute_type(t: ElementType) -> str:
    """The CUDA type values of ``t`` are computed in (``float`` for f16 and bf16)."""
    return "float" if t in _NARROW_FLOATS else _STORAGE[t]


def load(t: ElementType, expr: str) -> str:
    """A stored element (``expr``) as a compute value."""
    if t is et.f16:
        return f"__half2float({expr})"
    if t is et.bf16:
        return f"__bfloat162float({expr})"
    return expr


def store(t: ElementType, expr: str) -> str:
    """A compute value as a stored element (round to nearest even for 16-bit floats)."""
    if t is et.f16:
        return f"__float2half_rn({expr})"
    if t is et.bf16:
        return f"__float2bfloat16_rn({expr})"
    return expr


def round_to(t: ElementType, expr: str) -> str:
    """A compute value rounded to the precision of ``t`` (16-bit floats), else unchanged."""
    if t in _NARROW_FLOATS:
        return load(t, store(t, expr))
    return expr


def math_call(name: str, t: ElementType, *args: str) -> str:
    """``name(args)`` in the precision of ``t``: ``expf`` for f32/f16/bf16, ``exp`` for f64."""
    suffix = "" if t is et.f64 else "f"
    return f"{name}{suffix}({', '.join(args)})"


def literal(value: bool | int | float, t: ElementType) -> str:
    """An exact literal of ``value`` in the compute type of ``t``."""
    if t.is_real and not math.isfinite(float(value)):
        width = "f64" if t is et.f64 else "f32"
        if math.isnan(float(value)):
            return f"og_nan_{width}()"
        return f"og_inf_{width}()" if float(value) > 0 else f"(-og_inf_{width}())"
    return c_dialect.literal(value, t)


def lowest(t: ElementType) -> str:
    """The smallest value of ``t`` (-inf for floats)."""
    return to_cuda(c_dialect.lowest(t))


def highest(t: ElementType) -> str:
    """The largest value of ``t`` (+inf for floats)."""
    return to_cuda(c_dialect.highest(t))


# --------------------------------------------------------------------- C text -> CUDA text
_SPECIAL = {
    '__builtin_nanf("")': "og_nan_f32()",
    '__builtin_nan("")': "og_nan_f64()",
    "__builtin_inff()": "og_inf_f32()",
    "__builtin_inf()": "og_inf_f64()",
}
_BUILTIN = re.compile(r"__builtin_(\w+)\(")
#: Builtins whose plain CUDA name would be ambiguous with integer arguments (``copysign(0, b)``
#: picks a host-only template): fixed-precision helpers of the prelude instead.
_RENAMED = {"copysignf": "og_copysign_f32", "copysign": "og_copysign_f64"}


def to_cuda(c_text: str) -> str:
    """C produced by the CPU dialect as CUDA C++: helpers become ``__host__ __device__``
    functions, GCC builtins their CUDA math-library counterparts (``__builtin_trunc`` →
    ``trunc``, ``__builtin_fmodf`` → ``fmodf``, ``__builtin_inff()`` → ``og_inf_f32()``)."""
    text = c_text.replace("static inline ", "OG_HD ")
    for c_form, cuda_form in _SPECIAL.items():
        text = text.replace(c_form, cuda_form)
    return _BUILTIN.sub(lambda m: f"{_RENAMED.get(m.group(1), m.group(1))}(", text)


def helper_code(name: str) -> str:
    """The CUDA text of the CPU dialect's helper ``name`` (``"div_i32"``, ``"f2i_u8"``…)."""
    return to_cuda(c_dialect.HELPERS[name]())


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
