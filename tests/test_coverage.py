"""Every registered op has a reference kernel (or a decomposition), an oracle entry and a
numeric test record. Later issues extend this with serialization and adjoints."""

import importlib
import inspect

import pytest

import opgraph.ops as ops_pkg
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.literals import Constant, Parameter
from opgraph.core.op import OP_REGISTRY
from opgraph.testing.oracle import ORACLE
from opgraph.testing.records import RECORDS

LEAVES = {Parameter, Constant}
TEST_ONLY_MODULE = "opgraph.testing.fake_ops"
OPS = sorted(OP_REGISTRY.items())


def _ops_in_records() -> set[type]:
    seen: set[type] = set()
    for record in RECORDS:
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
