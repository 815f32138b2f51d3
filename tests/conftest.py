import pytest

import opgraph as og


@pytest.fixture(params=og.backends())
def backend(request: pytest.FixtureRequest) -> og.Backend:
    """Every registered backend."""
    return og.backend(request.param)
