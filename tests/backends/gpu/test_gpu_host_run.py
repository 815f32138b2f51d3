"""The generated CUDA's numbers without a GPU: nvcc compiles the element functions of the
generated kernels (``__host__ __device__``) and each kernel's scalar path as a serial host
function (``CudaLoopEmitter.render_host``), and a small host program replays, on the CPU, every
launch the fake device recorded while it ran the numeric record table — same buffers, same
addresses and offsets — and the results must match what the reference kernels computed.

Covered: every pointwise kernel and every thread-per-row reduction kernel of the table (the
element code, literals, helpers, 16-bit conversions, indexing and strides, run-time checks,
reduction identities and NaN flags). Not covered: the vector path and block-per-row
reductions (they need a GPU's threads), and device math precision (host libm runs instead).
"""

import contextlib
import shutil
import struct
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest

import opgraph as og
from opgraph.backends.fused.program import LoopKernel
from opgraph.backends.gpu import GpuBackend, GpuConfig
from opgraph.backends.gpu.cuda import dialect
from opgraph.backends.gpu.cuda.kernel import CudaKernel
from opgraph.backends.gpu.cuda.loops import CudaLoopEmitter
from opgraph.backends.gpu.cuda.module import assemble
from opgraph.backends.gpu.device import Strided
from opgraph.backends.gpu.fake import FakeDevice
from opgraph.testing.compare import assert_close
from opgraph.testing.records import RECORDS

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")


@dataclass
class Launch:
    """One recorded launch: the allocations its pointers reach, before and after."""

    kernel: CudaKernel
    tolerance: tuple[float, float]
    memory: list[np.ndarray]  # each allocation's bytes before the launch
    after: list[np.ndarray]  # and after (the reference's results)
    pointers: list[tuple[int, int]]  # (allocation, byte offset) per argument


class RecordingDevice(FakeDevice):
    """A fake device that keeps what each host-runnable loop kernel read and wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: list[Launch] = []
        self.tolerance = (0.0, 0.0)
        self.host_source: dict[str, str] = {}

    def launch(self, module, kernel, grid, args, stream):
        source = self._host_source(kernel)
        if source is None:
            return super().launch(module, kernel, grid, args, stream)
        buffers = list({id(b): b for b in (self.buffer_at(p) for p in args)}.values())
        index = {id(b): i for i, b in enumerate(buffers)}
        pointers = [(index[id(b)], p - b.ptr) for b, p in ((self.buffer_at(p), p) for p in args)]
        before = [b.data[: b.nbytes].copy() for b in buffers]
        super().launch(module, kernel, grid, args, stream)
        after = [b.data[: b.nbytes].copy() for b in buffers]
        self.recorded.append(Launch(kernel, self.tolerance, before, after, pointers))
        return None

    def _host_source(self, kernel):
        if not isinstance(kernel.spec, LoopKernel):
            return None
        if kernel.name not in self.host_source:
            renderer = CudaLoopEmitter(kernel.spec, kernel.name, kernel.label, False, kernel.block)
            self.host_source[kernel.name] = renderer.render_host()
        return self.host_source[kernel.name]


def _element_functions(kernel: CudaKernel) -> str:
    """The kernel's source without its ``__global__`` function (keeps ``<name>_body``)."""
    return kernel.source.split('extern "C" __global__')[0]


def _dispatch(kernels: list[CudaKernel]) -> str:
    cases = []
    for i, k in enumerate(kernels):
        args = []
        for j, p in enumerate(k.params):
            t = dialect.storage_type(p.view.element_type)
            args.append(f"({'' if p.store else 'const '}{t}*)(a[{j}])")
        if k.checks:
            args.append(f"(int*)(a[{len(k.params)}])")
        cases.append(f"    case {i}: {k.name}_host({', '.join(args)}); break;")
    return "\n".join(
        ["static void og_dispatch(int id, char** a) {", "  switch (id) {", *cases, "  }", "}"]
    )


MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
static long og_read(FILE* f) { long v; if (fread(&v, 8, 1, f) != 1) exit(3); return v; }
int main(int argc, char** argv) {
  FILE* in = fopen(argv[1], "rb"); FILE* out = fopen(argv[2], "wb");
  long jobs = og_read(in);
  for (long j = 0; j < jobs; ++j) {
    long id = og_read(in), nbuf = og_read(in);
    char** bufs = (char**)malloc(nbuf * sizeof(char*)); long* sizes = (long*)malloc(nbuf * 8);
    for (long b = 0; b < nbuf; ++b) {
      sizes[b] = og_read(in); bufs[b] = (char*)malloc(sizes[b] + 64);
      if (fread(bufs[b], 1, sizes[b], in) != (size_t)sizes[b]) exit(4);
    }
    long nargs = og_read(in); char* args[64];
    for (long a = 0; a < nargs; ++a) { long b = og_read(in); args[a] = bufs[b] + og_read(in); }
    og_dispatch((int)id, args);
    for (long b = 0; b < nbuf; ++b) { fwrite(bufs[b], 1, sizes[b], out); free(bufs[b]); }
    free(bufs); free(sizes);
  }
  fclose(out); return 0;
}
"""


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """Record the table on the fake device, build the host program, replay every launch."""
    device = RecordingDevice()
    backend = GpuBackend(GpuConfig(), device=device)
    for record in RECORDS:
        for t in record.element_types:
            device.tolerance = record.tolerance(t)
            # a run-time error (integer division by zero…): its launch is recorded all the same
            with contextlib.suppress(og.ExecutionError):
                backend.compile(record.function(t))(*record.arguments(t))
    launches = device.recorded
    kernels = list({launch.kernel.name: launch.kernel for launch in launches}.values())
    ids = {k.name: i for i, k in enumerate(kernels)}
    head = assemble([], "host replay")
    helpers = dict.fromkeys(h for k in kernels for h in k.helpers)
    parts = [head, *(dialect.helper_code(h) for h in helpers)]
    parts += [_element_functions(k) + "\n" + device.host_source[k.name] for k in kernels]
    work = tmp_path_factory.mktemp("host_replay")
    source = work / "replay.cu"
    source.write_text("\n\n".join([*parts, _dispatch(kernels), MAIN]))
    binary = work / "replay"
    done = subprocess.run(
        [NVCC, "-O0", "-std=c++17", "-arch=sm_90", str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    jobs = work / "jobs.bin"
    with jobs.open("wb") as f:
        f.write(struct.pack("<q", len(launches)))
        for launch in launches:
            f.write(struct.pack("<qq", ids[launch.kernel.name], len(launch.memory)))
            for memory in launch.memory:
                f.write(struct.pack("<q", memory.nbytes) + memory.tobytes())
            f.write(struct.pack("<q", len(launch.pointers)))
            for buffer, offset in launch.pointers:
                f.write(struct.pack("<qq", buffer, offset))
    results = work / "results.bin"
    subprocess.run([str(binary), str(jobs), str(results)], check=True, timeout=120)
    data = results.read_bytes()
    replayed, at = [], 0
    for launch in launches:
        memory = []
        for before in launch.memory:
            memory.append(np.frombuffer(data, np.uint8, before.nbytes, at))
            at += before.nbytes
        replayed.append(memory)
    assert at == len(data)
    return launches, replayed


def _view(memory: list[np.ndarray], launch: Launch, index: int) -> np.ndarray:
    param = launch.kernel.params[index]
    buffer, offset = launch.pointers[index]
    s = Strided(0, param.view.element_type, param.view.shape, param.view.strides)
    return np.ndarray(s.shape, s.element_type.dtype, memory[buffer], offset, s.byte_strides)


def test_the_replay_covers_pointwise_and_row_kernels(replay):
    launches, _ = replay
    kernels = {launch.kernel.name: launch.kernel for launch in launches}
    assert len(kernels) > 1000
    assert any(k.spec.axes for k in kernels.values())  # thread-per-row reductions
    assert any(k.checks for k in kernels.values())  # integer division checks
    assert any(p.view.element_type.name == "bf16" for k in kernels.values() for p in k.params)


def test_host_compiled_cuda_matches_the_reference(replay):
    launches, replayed = replay
    failures = []
    for launch, memory in zip(launches, replayed, strict=True):
        kernel = launch.kernel
        for i, param in enumerate(kernel.params):
            if not param.store:
                continue
            got, want = _view(memory, launch, i), _view(launch.after, launch, i)
            try:
                assert_close(got, want, *launch.tolerance, f"{kernel.name} {param.name}")
            except AssertionError as error:
                failures.append(str(error).strip().split("\n")[0] + f" ({kernel.label[:120]})")
        if kernel.checks:  # the error word: the same checks fail
            buffer, offset = launch.pointers[-1]
            got_flag = memory[buffer][offset : offset + 4].view(np.int32)[0]
            want_flag = launch.after[buffer][offset : offset + 4].view(np.int32)[0]
            if bool(got_flag) != bool(want_flag):
                failures.append(f"{kernel.name}: error word {got_flag} vs {want_flag}")
    assert not failures, f"{len(failures)} mismatch(es):\n" + "\n".join(failures[:30])
