"""The workload table: names to case builders."""

from __future__ import annotations

from collections.abc import Callable

from bench import models
from bench.models import Case


def _w1() -> list[Case]:
    return [models.w1(n) for n in (32, 1024, 4096)]


def _w2() -> list[Case]:
    return [models.w2()]


def _w3() -> list[Case]:
    return [models.w3(1), models.w3(256)]


def _w4() -> list[Case]:
    from bench import resnet

    return [resnet.resnet18_imagenet(), resnet.resnet18_cifar()]


def _w5() -> list[Case]:
    from bench import bert

    return [bert.w5()]


WORKLOADS: dict[str, Callable[[], list[Case]]] = {
    "w1": _w1,
    "w2": _w2,
    "w3": _w3,
    "w4": _w4,
    "w5": _w5,
}


def build(name: str) -> list[Case]:
    """The cases of workload ``name`` (or of all of them)."""
    names = list(WORKLOADS) if name == "all" else [name]
    cases: list[Case] = []
    for n in names:
        cases.extend(WORKLOADS[n]())
    return cases
