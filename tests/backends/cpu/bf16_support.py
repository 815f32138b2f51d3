"""Whether this test run can compile ``precision="bf16"``: the CPU has AVX512-BF16 and the
configured build can use it (``check_precision`` refuses ``OPGRAPH_CPU_ISA=avx2``, which forces
AVX2 code on an AVX-512 CPU)."""

import pytest

from opgraph.backends.cpu import CpuConfigError
from opgraph.backends.cpu import config as cpu_config


def _bf16_compiles() -> bool:
    try:
        cpu_config.check_precision("bf16", cpu_config.default_config().isa)
    except CpuConfigError:
        return False
    return True


HAS_BF16 = _bf16_compiles()
#: Skips a test that compiles bf16 where it cannot be compiled here.
needs_bf16 = pytest.mark.skipif(
    not HAS_BF16, reason="no AVX512-BF16 on this CPU, or OPGRAPH_CPU_ISA=avx2 forces AVX2"
)
