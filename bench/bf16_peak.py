"""What bounds the bf16 micro-kernel: ``vdpbf16ps`` and f32 FMA peaks per core, and the kernel.

    python bench/bf16_peak.py [--seconds 0.3] [--rows 12] [--depth 384]

Compiles a small C harness (``-O3 -march=native``) and times, by thread CPU time, on one
thread:

* ``fma``: 24 independent ``vfmadd231ps`` zmm chains (registers only): f32 FLOP/s peak;
* ``dpbf16``: 24 independent ``vdpbf16ps`` zmm chains (registers only): 64 FLOP a
  instruction (16 lanes x 2 pairs x multiply-add);
* ``dpbf16 bcst``: the same with the left operand an embedded ``{1to16}`` broadcast from
  memory, the micro-kernel's form (12 rows x 2 vectors, each row's pair read twice);
* ``og_bf16_mk<rows>``: the generated micro-kernel itself (``codegen/bf16.py``) over a
  ``depth``-deep panel slice and ``rows`` rows of bf16 held in L1, 32 columns.

Each figure is printed in GFLOP/s and as a share of the ``dpbf16`` peak, with the load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opgraph.backends.cpu.codegen import bf16

_CHAINS = 24


def _chain_loop(name: str, instruction: str, operand: str) -> str:
    regs = ", ".join(f"x{i}" for i in range(_CHAINS))
    body = "\n".join(
        f'    __asm__("{instruction} {operand}, %1, %0" : "+v"(x{i}) : "v"(b){extra});'
        for i in range(_CHAINS)
        for extra in [', "m"(*p)' if "%2" in operand else ""]
    )
    return f"""static double {name}(long iters, const uint32_t* p) {{
  og_bv {regs.replace(", ", " = {1}, ")} = {{1}}, b = {{1}};
  (void)p;
  double t0 = now();
  for (long n = 0; n < iters; ++n) {{
{body}
  }}
  double t = now() - t0;
  og_bv s = {" + ".join(f"x{i}" for i in range(_CHAINS))};
  sink += s[0];
  return t;
}}"""


def _source(rows: int, depth: int, m: int, k: int, n: int) -> str:
    kp, M, K, N, CHAINS = depth // 2, m, k, n, _CHAINS
    return f"""#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
{bf16._gemm_bf16()}
static volatile float sink;
static double now(void) {{
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}}
{_chain_loop("f32_fma", "vfmadd231ps", "%1")}
{_chain_loop("dp", "vdpbf16ps", "%1")}
{_chain_loop("dp_bcst", "vdpbf16ps", "%2%{{1to16%}}")}
static double gemm(long iters, const float* A, const uint16_t* P, float* C) {{
  double t0 = now();
  for (long n = 0; n < iters; ++n) og_gemm_bf16_panels(A, {K}, P, C, {N}, {M}, {K}, 0, {N});
  double t = now() - t0;
  sink += C[0];
  return t;
}}
static double kernel(long iters, const uint16_t* a, const uint32_t* b, float* c) {{
  double t0 = now();
  for (long n = 0; n < iters; ++n) og_bf16_mk{rows}(a, {depth}, b, {kp}, c, 32, 32, 1);
  double t = now() - t0;
  sink += c[0];
  return t;
}}
int main(int argc, char** argv) {{
  (void)argc;
  double seconds = atof(argv[1]);
  static uint16_t a[{rows} * {depth}] __attribute__((aligned(64)));
  static uint32_t b[{kp} * 32] __attribute__((aligned(64)));
  static float c[{rows} * 32] __attribute__((aligned(64)));
  float* A = aligned_alloc(64, sizeof(float) * {M} * {K});
  uint16_t* P = aligned_alloc(64, 2 * (({N} + 31) / 32 * 32) * (({K} + 1) / 2 * 2));
  float* C = aligned_alloc(64, sizeof(float) * {M} * {N});
  for (long i = 0; i < {rows} * {depth}; ++i) a[i] = 0x3f80;
  for (long i = 0; i < {kp} * 32; ++i) b[i] = 0x3c003c00u;
  for (long i = 0; i < {M} * {K}; ++i) A[i] = 1.0f;
  for (long i = 0; i < ({N} + 31) / 32 * 32 * (({K} + 1) / 2 * 2); ++i) P[i] = 0x3c00;
  uint32_t one = 0x3f803f80u;
  const char* names[5] = {{"f32 fma", "dpbf16", "dpbf16 bcst", "og_bf16_mk{rows}",
                          "gemm {M}x{K}x{N}"}};
  double flop[5] = {{{CHAINS} * 32.0, {CHAINS} * 64.0, {CHAINS} * 64.0,
                     {rows} * 32.0 * {depth} * 2.0, 2.0 * {M} * {K} * {N}}};
  double best[5] = {{0, 0, 0, 0, 0}};
  for (int round = 0; round < 5; ++round) {{
    for (int w = 0; w < 5; ++w) {{
      long iters = w < 3 ? 1000000 : w == 3 ? 20000 : 1;
#define OG_RUN (w == 0 ? f32_fma(iters, &one) : w == 1 ? dp(iters, &one) \
               : w == 2 ? dp_bcst(iters, &one) : w == 3 ? kernel(iters, a, b, c) \
               : gemm(iters, A, P, C))
      double t = OG_RUN;
      long reps = (long)(seconds / 5 / t) + 1;
      t = 0;
      for (long r = 0; r < reps; ++r) t += OG_RUN;
      double g = flop[w] * iters * reps / t * 1e-9;
      if (g > best[w]) best[w] = g;
    }}
  }}
  for (int w = 0; w < 5; ++w)
    printf("%-22s %8.1f GFLOP/s  %5.3f of dpbf16\\n", names[w], best[w], best[w] / best[1]);
  return 0;
}}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--rows", type=int, default=bf16.ROWS)
    parser.add_argument("--depth", type=int, default=bf16.DEPTH)
    parser.add_argument("--gemm", type=int, nargs=3, default=(128, 768, 3072), metavar="M K N")
    parser.add_argument("--panel-depth", type=int, default=bf16.PANEL_DEPTH)
    args = parser.parse_args()
    bf16.PANEL_DEPTH = args.panel_depth
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp, "peak.c"), Path(tmp, "peak")
        source.write_text(_source(args.rows, args.depth, *args.gemm))
        subprocess.run(["gcc", "-O3", "-march=native", str(source), "-o", str(binary)], check=True)
        out = subprocess.run([str(binary), str(args.seconds)], check=True, capture_output=True)
    print(out.stdout.decode(), end="")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
