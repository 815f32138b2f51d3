#!/usr/bin/env bash
# docs/gpu.md's checklist on a machine with a CUDA device, one log per step under $OUT
# (at most 8 files: env, probe, gputests, records, graphs, bench logs, bench_table.md, summary).
#
#   OUT=/tmp/gpu-check STEPS="env probe gputests records graphs bench" bash tools/gpu_check.sh
#
# Each step runs under its own `timeout`; `records` runs in the background beside `probe`,
# `gputests` and `graphs` (it is mostly NVRTC compiles on the host's cores), and `bench` runs
# alone at the end so that nothing else uses the GPU while it times. Wheels in .whl/ (e.g.
# scipy-openblas32 for the CPU backend) are installed into /tmp/site first. Without a device,
# `STEPS="env probe" ... --fake` checks the script itself (PROBE_ARGS="--fake --skip-huge").
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
STEPS=${STEPS:-"env probe gputests records graphs suite bench"}
PROBE_ARGS=${PROBE_ARGS:-}
WORKERS=${WORKERS:-10}
BENCH_ARGS=${BENCH_ARGS:-"--workload all --rounds 3 --block 0.1"}
# Deadlines (seconds from the start): every test step ends by TESTS_END, the bench by BENCH_END.
TESTS_END=${TESTS_END:-290}
BENCH_END=${BENCH_END:-530}
DEADLINE=$TESTS_END
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export OPGRAPH_TEST_CACHE_DIR=${OPGRAPH_TEST_CACHE_DIR:-/tmp/opgraph-test-cache}
export PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site
fi
SUMMARY=$OUT/summary.log
PYTEST=(python3 -m pytest -q -rf --tb=short --timeout=120 -p no:cacheprovider)

step() { # step NAME LIMIT COMMAND...: append to $OUT/NAME.log, one summary line
  local name=$1 limit=$2
  shift 2
  local log=$OUT/$name.log started=$SECONDS
  if ((limit > DEADLINE - SECONDS)); then limit=$((DEADLINE - SECONDS)); fi
  if ((limit < 5)); then
    echo "== $(date +%T) $name skipped: past its deadline: ${*:1:12}" | tee -a "$log" >>"$SUMMARY"
    return 0
  fi
  echo "== $(date +%T) $name (limit ${limit}s): $*" >>"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $(date +%T) $name rc=$rc after $((SECONDS - started)) s: ${*:1:12}" | tee -a "$log" >>"$SUMMARY"
  tail -n 3 "$log" | grep -v "^==" | grep -E "passed|failed|error|probe" >>"$SUMMARY"
  return 0
}
wants() { [[ " $STEPS " == *" $1 "* ]]; }

if wants env; then
  step env 60 nvidia-smi
  step env 30 nproc
  step env 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  step env 60 python3 -c '
import platform, subprocess, sys, numpy, ml_dtypes
print("python", sys.version.split()[0], platform.machine(), "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__)
try:
    import cupy
    rt = cupy.cuda.runtime
    print("cupy", cupy.__version__, "runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion(),
          "nvrtc", cupy.cuda.nvrtc.getVersion(), "cuda path", cupy.cuda.get_cuda_path())
    p = rt.getDeviceProperties(0)
    print("device", p["name"], "sm", p["major"], p["minor"], "SMs", p["multiProcessorCount"])
except Exception as e:
    print("cupy: unavailable:", type(e).__name__, e)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())
except Exception as e:
    print("torch: unavailable:", e)
try:
    import onnxruntime
    print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
except Exception as e:
    print("onnxruntime: unavailable:", e)
print(subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1])
'
  # checklist item 1
  step env 60 python3 -c 'import opgraph as og; print("backends", og.backends()); print(og.backend_status())'
fi

if wants records; then # item 3, in the background (-v: a line per test, kept if killed)
  step records 280 "${PYTEST[@]}" -v -v -n "$WORKERS" tests/numerics/test_op_records.py -k GPU &
  RECORDS_PID=$!
fi
if wants probe; then # items 6-10, 12 and the hybrid placement
  step probe 150 python3 tools/gpu_probe.py $PROBE_ARGS
fi
if wants overhead; then # where the host time of a small call goes (cProfile)
  step probe 120 python3 tools/gpu_overhead.py ${OVERHEAD_ARGS:-}
fi
if wants gputests; then # items 2, 5, 9, 10: the device tests and the execution contract
  step gputests 150 "${PYTEST[@]}" -n 4 tests/backends/gpu -k "not test_record_sample" \
    --ignore=tests/backends/gpu/test_gpu_nvcc.py --ignore=tests/backends/gpu/test_gpu_host_run.py \
    --ignore=tests/backends/gpu/test_gpu_fake_records.py
  step gputests 90 "${PYTEST[@]}" -n 2 tests/runtime/test_execution_api.py -k GPU
fi
if wants graphs; then # item 4
  step graphs 150 "${PYTEST[@]}" tests/numerics/test_random_graphs.py
fi
if wants suite; then # the other backend-parametrized tests of the suite, on GPU
  step graphs 120 "${PYTEST[@]}" -n 4 -k GPU tests/numerics/test_symbolic_records.py \
    tests/runtime/test_call_by_name.py tests/runtime/test_call_buffers.py \
    tests/frontends/torch/test_converters.py tests/frontends/torch/test_models.py \
    tests/distributed/test_collective_ops.py tests/distributed/test_data_parallel.py \
    tests/training tests/frontends/onnx/test_session.py tests/frontends/onnx/test_onnx_zoo.py
fi
if [ -n "${RECORDS_PID:-}" ]; then
  wait "$RECORDS_PID"
fi
DEADLINE=$BENCH_END
if wants bench; then # item 11, alone on the GPU
  # shellcheck disable=SC2086
  step bench 240 python3 bench/gpu_bench.py --backend GPU $BENCH_ARGS --report "$OUT/bench_table.md"
fi
echo "== $(date +%T) done" >>"$SUMMARY"
cat "$SUMMARY"
