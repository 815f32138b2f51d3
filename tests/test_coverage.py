"""Every registered op has a reference kernel (or a decomposition), an oracle entry, a
numeric test record and an adjoint (or a mark); and the pieces outside ops/ (CPU and GPU
lowerings, ONNX exporters and converters, ATen converters) are pinned in a table that only
grows (tests/coverage_table.txt)."""

import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

import opgraph.ops as ops_pkg
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.literals import Constant, Parameter
from opgraph.core.op import OP_REGISTRY
from opgraph.testing.oracle import ORACLE
from opgraph.testing.records import DATA_DEPENDENT_RECORDS, RECORDS

LEAVES = {Parameter, Constant}
TEST_ONLY_MODULE = "opgraph.testing.fake_ops"
#: Ops a bridge defines for itself, registered once it is imported (the ONNX bridge's
#: RunTimeOnnxNode: an ONNX node converted when the Function runs); not catalogue ops, so
#: their tests live with the bridge (tests/frontends/onnx/test_as_is_import.py).
BRIDGE_MODULES = ("opgraph.frontends.",)
OPS = sorted((n, c) for n, c in OP_REGISTRY.items() if not c.__module__.startswith(BRIDGE_MODULES))


def _ops_in_records() -> set[type]:
    seen: set[type] = set()
    for record in (*RECORDS, *DATA_DEPENDENT_RECORDS):
        fn = record.function(record.element_types[0])
        stack = list(fn.nodes)
        while stack:
            node = stack.pop()
            seen.add(type(node.op))
            function = getattr(node.op, "function", None)
            if function is not None:
                stack.extend(function.nodes)
    return seen


RECORDED = _ops_in_records()


@pytest.mark.parametrize(("name", "cls"), OPS, ids=[n for n, _ in OPS])
def test_op_is_complete(name, cls):
    if cls in LEAVES or cls.__module__ == TEST_ONLY_MODULE:
        return
    has_path = cls in KERNELS or cls.has_decomposition() or cls.lowered_by is not None
    assert has_path, f"{name}: no reference kernel, decomposition or lowering pass"
    assert cls in ORACLE, f"{name}: no oracle entry"
    assert cls in RECORDED, f"{name}: no numeric test record"
    assert cls.__doc__, f"{name}: no docstring"


@pytest.mark.parametrize("family", ops_pkg.FAMILIES)
def test_family_all_lists_every_public_name(family):
    # Import by name: a builder may share its family's name (ops.convolution).
    module = importlib.import_module(f"opgraph.ops.{family}")
    defined = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and v.__module__ == module.__name__
    }
    assert set(module.__all__) == defined


@pytest.mark.parametrize(("name", "cls"), OPS, ids=[n for n, _ in OPS])
def test_op_has_adjoint_or_mark(name, cls):
    if cls in LEAVES or cls.__module__ == TEST_ONLY_MODULE:
        return
    marked = not cls.differentiable or cls.lowered_by is not None
    assert marked or cls.has_vjp() or cls.has_decomposition(), (
        f"{name}: no vjp, no decomposition to differentiate through, and not marked "
        "differentiable = False"
    )


# ------------------------------------------------------------- the pinned table of pieces per op
# tests/coverage_table.txt says which op has which piece outside ops/: a CPU lowering, a GPU
# lowering, an ONNX exporter (per op class), an ONNX converter (per ONNX op type) and an ATen
# converter (per overload). A piece may not disappear; a new one must be added to the table,
# so the table only grows and every change to what the backends and bridges cover is reviewed.
TABLE = Path(__file__).with_name("coverage_table.txt")
OP_PIECES = ("cpu", "gpu", "onnx-export")


def read_table(path: Path = TABLE) -> dict[str, set[str]]:
    """``piece -> names`` from the table: ``[ops]`` rows are ``Name piece piece…``; the
    ``[onnx-import]`` and ``[aten]`` sections list one name per line."""
    pieces: dict[str, set[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "ops":
            name, *have = line.split()
            for piece in have:
                assert piece in OP_PIECES, f"{TABLE.name}: unknown piece {piece!r} for {name}"
                pieces.setdefault(piece, set()).add(name)
        else:
            pieces.setdefault(section, set()).add(line)
    return pieces


def _cpu_ops() -> set[str]:
    from opgraph.backends.fused.pipeline import is_native_class

    return {name for name, cls in OPS if is_native_class(cls)}


def _gpu_ops() -> set[str]:
    """Ops with a CPU lowering that run in a GPU kernel (the GPU backend reuses the CPU
    lowerings) for at least one record, rather than as a host fallback. Compiled for the fake
    device, so this needs neither CUDA nor CuPy."""
    from opgraph.backends.gpu.backend import GpuBackend
    from opgraph.backends.gpu.config import GpuConfig
    from opgraph.backends.gpu.fake import FakeDevice

    backend = GpuBackend(GpuConfig(), device=FakeDevice())
    on_device: set[str] = set()
    for record in RECORDS:
        fn = record.function(record.element_types[0])
        exe = backend.compile(fn)
        if not exe.compiled.placement.steps:
            continue  # nothing to run (an empty result): proves nothing either way
        on_device |= {node.op.name for node in fn.nodes} - set(exe.fallback_ops())
    return on_device & _cpu_ops()


def _onnx_pieces() -> dict[str, set[str]]:
    from opgraph.frontends.onnx.exporters import exported_ops
    from opgraph.frontends.onnx.registry import registered

    return {
        "onnx-export": {name for name, _ in exported_ops()},
        "onnx-import": {f"{d}::{n}" if d else n for d, n, _ in registered()},
    }


def _aten_pieces() -> set[str]:
    from opgraph.frontends.torch.registry import registered

    return set(registered())


def current_pieces() -> dict[str, set[str]]:
    """What the code registers now, piece by piece (bridges whose package is missing left out)."""
    pieces = {"cpu": _cpu_ops(), "gpu": _gpu_ops()}
    if importlib.util.find_spec("onnx") is not None:
        pieces.update(_onnx_pieces())
    if importlib.util.find_spec("torch") is not None:
        pieces["aten"] = _aten_pieces()
    return pieces


def write_table(pieces: dict[str, set[str]], path: Path = TABLE) -> None:
    """Write ``pieces`` in the table's format (for adding a new op's row by hand, compare)."""
    registered = {n for n, c in OPS if c not in LEAVES and c.__module__ != TEST_ONLY_MODULE}
    ops = sorted(registered.union(*(pieces.get(p, set()) for p in OP_PIECES)))
    width = max(map(len, ops)) + 2
    lines = [
        "# Pieces each op has outside ops/, pinned by tests/test_coverage.py: a piece may not",
        "# disappear, and a new one must be added here (the table only grows).",
        "# [ops]: op class, then its pieces: cpu (a native CPU lowering), gpu (runs in a GPU",
        "# kernel, not as a host fallback), onnx-export (an ONNX exporter); every registered",
        "# op has a row, so an empty one shows what is missing.",
        "[ops]",
        *(
            f"{name:<{width}}{' '.join(p for p in OP_PIECES if name in pieces.get(p, set()))}".rstrip()
            for name in ops
        ),
        "",
        "# ONNX op types with a converter (domain::type outside the default domain).",
        "[onnx-import]",
        *sorted(pieces.get("onnx-import", set())),
        "",
        "# ATen overloads (and FX targets) with a converter.",
        "[aten]",
        *sorted(pieces.get("aten", set())),
    ]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def pieces() -> dict[str, set[str]]:
    return current_pieces()


@pytest.mark.parametrize("piece", [*OP_PIECES, "onnx-import", "aten"])
def test_no_piece_disappears(pieces, piece):
    if piece not in pieces:
        pytest.skip(f"{piece}: its bridge's package is not installed")
    lost = sorted(read_table().get(piece, set()) - pieces[piece])
    assert not lost, (
        f"these lost their {piece} piece (a lowering, exporter or converter was removed or "
        f"stopped registering): {lost}; restore it, or if the removal is intended, change "
        f"{TABLE.name} in the same commit and say why"
    )


@pytest.mark.parametrize("piece", [*OP_PIECES, "onnx-import", "aten"])
def test_new_pieces_are_in_the_table(pieces, piece):
    if piece not in pieces:
        pytest.skip(f"{piece}: its bridge's package is not installed")
    new = sorted(pieces[piece] - read_table().get(piece, set()))
    where = "the op's row under [ops]" if piece in OP_PIECES else f"[{piece}]"
    assert not new, (
        f"new {piece} pieces: add {new} to {where} of tests/{TABLE.name} (or regenerate it "
        "with `PYTHONPATH=.:examples:tools python tests/test_coverage.py` and check that the "
        "diff only adds)"
    )


def test_the_table_format_round_trips(tmp_path):
    table = read_table()
    write_table(table, tmp_path / "table.txt")
    assert read_table(tmp_path / "table.txt") == table


def test_a_lost_piece_is_caught(tmp_path):
    """The check is real: a table that claims more than the code has fails it."""
    claimed = {"cpu": {"Abs", "NoSuchOp"}}
    write_table(claimed, tmp_path / "table.txt")
    assert read_table(tmp_path / "table.txt")["cpu"] - _cpu_ops() == {"NoSuchOp"}


if __name__ == "__main__":
    # Regenerate the table from the code (review the diff: it must only add lines).
    write_table(current_pieces())
