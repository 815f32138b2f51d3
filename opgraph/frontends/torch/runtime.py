"""Run a compiled opgraph Executable on torch tensors, zero-copy both ways.

Inputs are wrapped through ``Tensor.numpy()`` (a contiguous copy is made only for a
non-contiguous input); results are allocated as torch tensors and the Executable writes into
their memory, so no result is copied. A symbolic Function (dynamic shapes) binds its symbols
from each call's argument shapes, which give the result shapes to allocate.

:func:`compile_function` compiles a Function once; a symbolic Function on a backend that
compiles static shapes only (it raises ``UnsupportedOpError``) becomes a
:class:`~opgraph.runtime.specializing.SpecializingExecutable` (shared with the GPU backend):
one static compile per binding, cached, so the bridge compiles once as soon as the backend runs
symbols itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from opgraph.core.errors import GraphError, UnsupportedOpError
from opgraph.core.function import Function
from opgraph.core.tensor_type import TensorType
from opgraph.frontends.torch.types import as_numpy, to_torch
from opgraph.passes.specialize_shapes import is_symbolic
from opgraph.runtime.backend import Backend, Executable
from opgraph.runtime.specializing import SpecializingExecutable
from opgraph.runtime.tensor import Tensor

log = logging.getLogger("opgraph.torch")


def compile_function(
    backend: Backend, function: Function, example_shapes: Sequence[tuple[int, ...]] = ()
) -> Executable | SpecializingExecutable:
    """``backend.compile(function)``; for a symbolic Function the backend refuses
    (``UnsupportedOpError``), a :class:`SpecializingExecutable`, which compiles the binding of
    ``example_shapes`` (the traced argument shapes) right away, so that a backend that cannot
    compile the Function at all still fails here."""
    try:
        return backend.compile(function)
    except UnsupportedOpError as error:
        if not is_symbolic(function):
            raise
        log.debug(
            "%s: %s compiles static shapes only; specialising per binding (%s)",
            function.name,
            backend,
            str(error).splitlines()[0],
        )
    specialising = SpecializingExecutable(backend, function)
    if example_shapes:
        assert specialising.binder is not None
        specialising.specialised(specialising.binder.bind(example_shapes))
    return specialising


def wrap(backend: Backend, tensor: Any, expected: TensorType, index: int) -> Tensor:
    """An opgraph tensor sharing memory with ``tensor`` (made contiguous first if needed);
    a Python number (a run-time scalar) becomes a rank-0 tensor."""
    if not isinstance(tensor, torch.Tensor):
        value = np.array(tensor, dtype=expected.element_type.dtype)
        return backend.create_tensor(expected.element_type, expected.shape, buffer=value)
    if tensor.device.type != "cpu":
        raise GraphError(f"argument {index}: opgraph runs on the CPU, got a {tensor.device} tensor")
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.is_neg() or tensor.is_conj():
        tensor = tensor.resolve_neg().resolve_conj()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return backend.create_tensor(expected.element_type, expected.shape, buffer=as_numpy(tensor))


class ExecutableModule(torch.nn.Module):
    """A ``torch.nn.Module`` that runs an Executable (one fused partition of a graph).

    Args:
        backend: the opgraph backend the Executable came from (it creates the tensors).
        executable: the compiled Function.
        inputs: for each ``forward`` argument, the index of the Function parameter it feeds,
            or None when the argument was folded into the Function (a frozen weight, a
            specialised Python scalar).
        single: return one tensor instead of a tuple (the partition has one output).
        orders: for each ``forward`` argument, None, or the axis order its Function
            parameter takes it in (``arg.permute(order)``: a transposed weight passed as the
            contiguous weight, see :func:`~opgraph.frontends.torch.layouts.dense_order`).
    """

    def __init__(
        self,
        backend: Backend,
        executable: Executable | SpecializingExecutable,
        inputs: Sequence[int | None],
        single: bool,
        orders: Sequence[tuple[int, ...] | None] = (),
    ) -> None:
        super().__init__()
        self.orders = list(orders) if any(o is not None for o in orders) else None
        self.backend = backend
        self.executable = executable
        self.inputs = list(inputs)
        self.single = single
        self._params = tuple(executable.parameter_types)
        self._results = tuple(executable.result_types)
        self._dtypes = [to_torch(r.element_type) for r in executable.result_types]
        self._direct = _direct_signature(executable, self._params, self._results)
        self._call_addresses: Callable[[list[int]], None] | None = getattr(
            executable, "call_addresses", None
        )
        self._checks = _direct_checks(self._direct, self.inputs, self.orders)

    def forward(self, *args: Any) -> Any:
        if self._checks is not None:
            results = self._call_direct(args, self._checks)
            if results is not None:
                return results[0] if self.single else tuple(results)
        if self.orders is not None:
            args = tuple(
                a.permute(o) if o is not None and isinstance(a, torch.Tensor) else a
                for a, o in zip(args, self.orders, strict=True)
            )
        params, results_types = self._params, self._results
        binder = self.executable.binder
        if binder is not None:  # symbolic: the argument shapes bind the symbols
            shapes: list[tuple[int, ...]] = [()] * len(params)
            for arg, slot in zip(args, self.inputs, strict=True):
                if slot is not None:
                    shapes[slot] = tuple(arg.shape) if isinstance(arg, torch.Tensor) else ()
            params, results_types = binder.types(binder.bind(shapes))
        tensors: list[Tensor | None] = [None] * len(params)
        for arg, slot in zip(args, self.inputs, strict=True):
            if slot is not None:
                tensors[slot] = wrap(self.backend, arg, params[slot], slot)
        results = [
            torch.empty(t.shape, dtype=dtype)  # type: ignore[arg-type]
            for t, dtype in zip(results_types, self._dtypes, strict=True)
        ]
        outputs = [
            self.backend.create_tensor(t.element_type, t.shape, buffer=as_numpy(r))
            for t, r in zip(results_types, results, strict=True)
        ]
        self.executable.call(outputs, [t for t in tensors if t is not None])
        return results[0] if self.single else tuple(results)

    def _call_direct(self, args: Sequence[Any], checks: _Checks) -> list[torch.Tensor] | None:
        """The call on the tensors' addresses, checked here (dtype, shape, strides, CPU
        memory) instead of through opgraph Tensors; None when an argument needs the general
        path (a Python number, a copy to make dense, a conjugate or negative view).

        An argument passed permuted (``orders``) is checked against the strides of the
        permuted dense layout instead of being permuted: the view's address is the tensor's.
        """
        inputs, outputs = checks
        if len(args) != len(self.inputs):
            return None
        addresses = [0] * len(inputs)
        tensor = torch.Tensor
        for position, slot, dtype, shape, strides in inputs:
            arg = args[position]
            if (
                not isinstance(arg, tensor)
                or arg.dtype is not dtype
                or arg.shape != shape
                or not arg.is_cpu
                or (arg.stride() != strides if strides is not None else not arg.is_contiguous())
                or arg.is_neg()
                or arg.is_conj()
            ):
                return None
            addresses[slot] = arg.data_ptr()
        results = [torch.empty(shape, dtype=dtype) for dtype, shape in outputs]
        assert self._call_addresses is not None
        self._call_addresses(addresses + [r.data_ptr() for r in results])
        return results


#: What :meth:`ExecutableModule._call_direct` checks: for each argument feeding a parameter
#: (position, parameter slot, dtype, shape as passed, strides as passed or None for
#: contiguous), in argument order; and each result's (dtype, shape).
_Checks = tuple[
    list[tuple[int, int, torch.dtype, tuple[int, ...], tuple[int, ...] | None]],
    list[tuple[torch.dtype, tuple[int, ...]]],
]


def _direct_checks(
    direct: tuple[list[tuple[torch.dtype, tuple[int, ...]]], ...] | None,
    inputs: Sequence[int | None],
    orders: Sequence[tuple[int, ...] | None] | None,
) -> _Checks | None:
    """The checks of the direct call (None without one)."""
    if direct is None:
        return None
    params, results = direct
    checks: list[tuple[int, int, torch.dtype, tuple[int, ...], tuple[int, ...] | None]] = []
    for position, slot in enumerate(inputs):
        if slot is None:
            continue
        dtype, shape = params[slot]
        order = orders[position] if orders is not None else None
        if order is None:
            checks.append((position, slot, dtype, shape, None))
            continue
        dense = [1] * len(shape)  # the parameter's contiguous strides
        for axis in range(len(shape) - 2, -1, -1):
            dense[axis] = dense[axis + 1] * shape[axis + 1]
        passed_shape, passed_strides = [0] * len(shape), [0] * len(shape)
        for axis, source in enumerate(order):  # arg.permute(order) has the parameter's layout
            passed_shape[source], passed_strides[source] = shape[axis], dense[axis]
        checks.append((position, slot, dtype, tuple(passed_shape), tuple(passed_strides)))
    return checks, list(results)


def _direct_signature(
    executable: Any, params: Sequence[TensorType], results: Sequence[TensorType]
) -> tuple[list[tuple[torch.dtype, tuple[int, ...]]], ...] | None:
    """The torch dtype and static shape of each parameter and result when ``executable`` runs
    on raw addresses (``call_addresses``), no value is empty and no size is symbolic; else
    None."""
    if not callable(getattr(executable, "call_addresses", None)):
        return None
    found: list[list[tuple[torch.dtype, tuple[int, ...]]]] = []
    for types in (params, results):
        found.append([])
        for t in types:
            shape = t.shape
            if not all(type(d) is int for d in shape) or 0 in shape:
                return None
            found[-1].append((to_torch(t.element_type), tuple(int(d) for d in shape)))
    return tuple(found)
