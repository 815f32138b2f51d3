"""Numeric gradient checks (central differences in f64) for every applicable record."""

import pytest

from opgraph.core import element_type as et
from opgraph.testing.gradcheck import applicable, check_gradients
from opgraph.testing.records import RECORDS

CHECKED = [pytest.param(r, id=r.name) for r in RECORDS if applicable(r)]


@pytest.mark.parametrize("record", CHECKED)
def test_gradient_matches_central_differences(record):
    fn = record.function(et.f64)
    check_gradients(
        fn, record.arguments(et.f64), rtol=record.rtol or 1e-5, atol=record.atol or 1e-6
    )
