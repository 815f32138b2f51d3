"""``opgraph run MODEL.onnx``: run an ONNX model on an opgraph backend, time it, save outputs.

Built on ``og.onnx.InferenceSession``. Inputs come from ``--input`` (``NAME=FILE.npy``,
``FILE.npy`` for a model with one input, or ``FILE.npz`` holding arrays by input name); the
others are random (seeded, of the input's element type: standard normal floats, integers in
``[0, 2)``, random booleans), shaped by the model or by ``--shape NAME=1x3x224x224`` where it
has symbolic dimensions. The model is imported and compiled for those shapes, called
``--warmup`` times untimed, then ``--repeat`` times timed; the report gives each output's type
and a min/max/mean summary, the import and compile times, and the median and minimum call
time. ``--save out.npz`` writes the outputs by name.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from opgraph.cli._common import (
    CliError,
    check_shape_names,
    check_writable_directory,
    input_item,
    non_negative_int,
    npz_path,
    positive_int,
    shape_item,
)
from opgraph.core.errors import OpgraphError


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "run",
        help="run an ONNX model on an opgraph backend, time it, save its outputs",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("model", help="an ONNX model file")
    parser.add_argument(
        "--backend", default=None, help="backend (default: CPU, or INTERPRETER without a compiler)"
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=input_item,
        metavar="NAME=FILE.npy|FILE.npy|FILE.npz",
        help="input values (repeatable); the others are random",
    )
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        type=shape_item,
        metavar="NAME=D0xD1x...",
        help="an input's shape, for symbolic dimensions (e.g. input=1x3x224x224 or 1,3,224,224)",
    )
    parser.add_argument("--repeat", type=positive_int, default=10, help="timed calls (10)")
    parser.add_argument("--warmup", type=non_negative_int, default=1, help="untimed calls (1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (0)")
    parser.add_argument("--save", type=npz_path, metavar="OUT.npz", help="write the outputs here")
    parser.add_argument(
        "--verbose", action="store_true", help="op counts, fallbacks, tracebacks of errors"
    )
    parser.add_argument(
        "--progress", action="store_true", help="show progress even when stderr is no terminal"
    )
    parser.set_defaults(run=run)


class Progress:
    """Import and compile progress on stderr: tqdm when installed, else a plain bar."""

    def __init__(self, enabled: bool, stream: TextIO = sys.stderr) -> None:
        self.enabled = enabled
        self.stream = stream
        self._bar: Any = None
        self._label = ""

    def stage(self, label: str, total: int) -> None:
        self.close()
        self._label = label
        if not self.enabled:
            return
        try:
            # deferred: tqdm is slow to import, and a plain bar stands in without it
            from tqdm import tqdm
        except ImportError:
            self._bar = None
            self._draw(0, total)
            return
        self._bar = tqdm(total=total, desc=label, file=self.stream, leave=False, unit="op")

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()
        else:
            self._draw(done, total)

    def _draw(self, done: int, total: int) -> None:
        width = 30
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self._label:<8} [{bar}] {done}/{total}")
        self.stream.flush()

    def __call__(self, stage: str, done: int, total: int) -> None:
        """The session's ``progress(stage, done, total)`` callback."""
        if stage != self._label:
            self.stage(stage, total)
        self.update(done, total)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._label:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()
        self._label = ""


def load_inputs(
    items: Sequence[tuple[str | None, str]], names: Sequence[str]
) -> dict[str, np.ndarray]:
    """The arrays of ``--input`` items by input name.

    Raises:
        CliError: an unreadable file, a name the model lacks, a bare .npy for a model with
            several inputs, or an input given twice.
        OSError: a file cannot be read.
    """
    values: dict[str, np.ndarray] = {}
    for name, path in items:
        for key, value in _load_file(name, path, names).items():
            if key not in names:
                raise CliError(
                    f"--input {path}: the model has no input {key!r}; its inputs: "
                    f"{', '.join(names)}"
                )
            if key in values:
                raise CliError(f"--input: input {key!r} is given twice")
            values[key] = value
    return values


def _load_file(name: str | None, path: str, names: Sequence[str]) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as error:
        raise CliError(f"--input {path}: not a .npy or .npz file ({error})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            arrays = {key: loaded[key] for key in loaded.files}
        if name is None:
            return arrays
        if name not in arrays:
            raise CliError(f"--input {name}={path}: the archive holds no array {name!r}")
        return {name: arrays[name]}
    if name is None:
        if len(names) != 1:
            raise CliError(
                f"--input {path}: a bare .npy file feeds a model's only input, but this model "
                f"has {len(names)} ({', '.join(names)}); write --input NAME={path}"
            )
        name = names[0]
    return {name: np.asarray(loaded)}


def input_shapes(
    inputs: Sequence[Any], given: Mapping[str, np.ndarray], shapes: Mapping[str, tuple[int, ...]]
) -> dict[str, tuple[int, ...]]:
    """Each input's shape: of its ``--input`` array, from ``--shape``, or the model's own.

    Raises:
        CliError: a ``--shape`` for an input the model lacks, or contradicting the model or
            the ``--input`` array, or an input with symbolic dimensions and neither flag.
    """
    check_shape_names(inputs, shapes)
    result = {}
    for arg in inputs:
        result[arg.name] = _input_shape(arg, given.get(arg.name), shapes.get(arg.name))
    return result


def _input_shape(arg: Any, value: np.ndarray | None, shape: tuple[int, ...] | None) -> Any:
    model = arg.shape
    if value is not None:
        if shape is not None and tuple(value.shape) != shape:
            raise CliError(
                f"--shape {arg.name}={_dims(shape)} contradicts the --input array's shape "
                f"{_dims(value.shape)}"
            )
        return tuple(value.shape)
    if shape is not None:
        if model is not None and (
            len(shape) != len(model)
            or any(isinstance(m, int) and m != s for m, s in zip(model, shape, strict=False))
        ):
            raise CliError(
                f"--shape {arg.name}={_dims(shape)} contradicts the model's shape {model}"
            )
        return shape
    if model is not None and all(isinstance(d, int) for d in model):
        return tuple(model)
    example = "D0xD1x..." if model is None else _dims(d if isinstance(d, int) else 1 for d in model)
    what = "an unknown rank" if model is None else f"shape {model}"
    raise CliError(
        f"input {arg.name!r} has {what}: give its shape with --shape {arg.name}={example} or "
        f"its value with --input {arg.name}=FILE.npy"
    )


def _dims(dims: Any) -> str:
    return "x".join(str(int(d)) for d in dims)


def random_input(element_type: Any, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """A seeded random array of ``element_type``'s dtype (an ElementType or numpy dtype)."""
    dtype = np.dtype(getattr(element_type, "dtype", element_type))
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def run(args: argparse.Namespace) -> int:
    # deferred: the ONNX bridge needs onnx, an optional dependency
    from opgraph.frontends.onnx.session import InferenceSession, default_backend, numpy_dtype

    if args.save:
        check_writable_directory(args.save, "--save")
    backend = args.backend
    if backend is None:
        backend = default_backend()
        if backend != "CPU":
            print(f"note: no C compiler found; running on {backend}", file=sys.stderr)
    progress = Progress(args.progress or sys.stderr.isatty())
    session = InferenceSession(args.model, backend=backend, progress=progress)
    inputs = session.get_inputs()
    given = load_inputs(args.input, [i.name for i in inputs])
    shapes = input_shapes(inputs, given, dict(args.shape))
    rng = np.random.default_rng(args.seed)
    feed = {
        i.name: given[i.name]
        if i.name in given
        else random_input(numpy_dtype(i.type), shapes[i.name], rng)
        for i in inputs
    }
    try:
        compiled = _prepare(session, feed, set(given))
    finally:
        progress.close()
    arguments = [feed[p.node.name or ""] for p in compiled.function.parameters]
    try:
        outputs, times = _time(compiled.executable, arguments, args.warmup, args.repeat)
    except OpgraphError as error:
        # Shape-valued inputs may be run-time tensors: a random one fails when it runs.
        random = [i.name for i in inputs if i.name not in given and feed[i.name].dtype.kind in "iu"]
        if not random:
            raise
        raise CliError(
            f"{error} (the model may need the value of input(s) {', '.join(random)}, which "
            f"was random: give it with --input {random[0]}=FILE.npy)"
        ) from error
    _report(session, compiled, outputs, args, times)
    if args.save:
        names = [o.name for o in session.get_outputs()]
        save_npz(args.save, dict(zip(names, outputs, strict=True)))
        print(f"saved    {len(outputs)} output(s) to {args.save}")
    return 0


def _prepare(session: Any, feed: Mapping[str, np.ndarray], given: set[str]) -> Any:
    """Import and compile; says so when an input whose value decides shapes was random."""

    try:
        compiled = session.prepare(feed)
    except OpgraphError as error:
        random = [name for name in session.value_inputs if name not in given]
        if not random:
            raise
        raise CliError(
            f"{error} (the import needs the value of input(s) {', '.join(random)}, which was "
            f"random: give it with --input {random[0]}=FILE.npy)"
        ) from error
    for name in session.value_inputs:
        if name not in given:
            print(
                f"note: the model is specialised on input {name!r}'s random value", file=sys.stderr
            )
    return compiled


def _time(
    executable: Any, arguments: Sequence[np.ndarray], warmup: int, repeat: int
) -> tuple[list[np.ndarray], list[float]]:
    """The outputs of the last call, and the seconds of each timed call."""
    outputs: list[np.ndarray] = []
    for _ in range(warmup):
        outputs = executable(*arguments)
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        outputs = executable(*arguments)
        times.append(time.perf_counter() - begin)
    return outputs, times


def _report(
    session: Any,
    compiled: Any,
    outputs: Sequence[np.ndarray],
    args: argparse.Namespace,
    times: list[float],
) -> None:
    fn, exe = compiled.function, compiled.executable
    print(f"model    {args.model}  ({len(fn.nodes)} nodes, backend {session.backend})")
    for arg, value in zip(session.get_outputs(), outputs, strict=True):
        summary = _summary(np.asarray(value))
        print(f"output   {arg.name}: {value.dtype}{list(value.shape)}  {summary}")
    print(f"import   {compiled.import_seconds * 1e3:.1f} ms")
    print(f"compile  {compiled.compile_seconds * 1e3:.1f} ms")
    print(
        f"run      median {statistics.median(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
        f"({len(times)} timed call(s) after {args.warmup} warm-up)"
    )
    if args.verbose:
        _details(fn, exe)


def _details(fn: Any, exe: Any) -> None:
    counts = Counter(node.op.name for node in fn.nodes)
    print("ops:")
    width = max((len(name) for name in counts), default=0)
    for name, count in counts.most_common():
        print(f"  {name:<{width}}  {count}")
    fallbacks = getattr(exe, "fallback_ops", None)
    if callable(fallbacks):
        names = fallbacks()
        print("reference-kernel fallbacks: " + (", ".join(names) if names else "none"))
    placement = getattr(exe, "placement", None)
    if callable(placement):
        print("placement:")
        print(placement())


def _summary(value: np.ndarray) -> str:
    if value.size == 0:
        return "(empty)"
    numbers = value.astype(np.float64)
    return f"min {numbers.min():.6g}  max {numbers.max():.6g}  mean {numbers.mean():.6g}"


def save_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """What ``np.savez(path, **arrays)`` writes, for any names: an output called
    ``allow_pickle`` or ``file`` would otherwise be taken for savez's own argument."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
