import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# The demos (examples/opgraph_examples) and the tools (tools/) are not part of the library;
# tests import them from this checkout, and so do the commands tests start in subprocesses.
_ROOT = Path(__file__).resolve().parents[1]
_OUTSIDE_THE_LIBRARY = [str(_ROOT / "examples"), str(_ROOT / "tools")]
sys.path[:0] = _OUTSIDE_THE_LIBRARY
# bench/ lives beside the library too: tests of its scripts import it as ``bench`` (this
# process only; the commands they start run from the checkout's root).
if str(_ROOT) not in sys.path:
    sys.path.append(str(_ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [*_OUTSIDE_THE_LIBRARY, *filter(None, [os.environ.get("PYTHONPATH")])]
)

# The test run never writes to the user's compile cache: every run gets a private temporary
# cache directory (inherited by the subprocesses tests start), removed when the run ends. A
# developer may keep one between runs with OPGRAPH_TEST_CACHE_DIR (never the user's cache).
# This must happen before opgraph reads its configuration, hence at import time.
# Under pytest-xdist the controller (the first process) makes the directory and its workers,
# started after this import with its environment, find it in _RUN_CACHE and share it: modules
# one worker compiled are hits for the others, and the cache's cross-process locking and
# atomic installs are exercised by every parallel run. Only the process that made it removes it.
_RUN_CACHE = "OPGRAPH_TEST_RUN_CACHE_DIR"
_KEPT_CACHE = os.environ.get("OPGRAPH_TEST_CACHE_DIR")
_INHERITED_CACHE = os.environ.get(_RUN_CACHE)
_TEST_CACHE = Path(
    _KEPT_CACHE or _INHERITED_CACHE or tempfile.mkdtemp(prefix="opgraph-test-cache-")
)
_OWNS_CACHE = not (_KEPT_CACHE or _INHERITED_CACHE)
os.environ[_RUN_CACHE] = str(_TEST_CACHE)
for _name in ("OPGRAPH_CACHE_DIR", "OPGRAPH_CPU_CACHE_DIR"):
    os.environ[_name] = str(_TEST_CACHE)

import opgraph as og  # noqa: E402
from opgraph.distributed import SingleProcessCommunicator, set_communicator  # noqa: E402


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _OWNS_CACHE:
        shutil.rmtree(_TEST_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo ONNX model (``opgraph_examples.onnx_mlp``) written to a file."""
    pytest.importorskip("onnx", reason="the onnx extra is not installed")
    from opgraph_examples.onnx_mlp import write

    return write(tmp_path_factory.mktemp("demo_onnx") / "mlp.onnx")


@pytest.fixture(params=og.backends())
def backend(request: pytest.FixtureRequest) -> og.Backend:
    """Every registered backend."""
    return og.backend(request.param)


@pytest.fixture(autouse=True)
def single_process_communicator():
    """The test run is one process and says so, as a single-process program does with
    ``og.distributed.init("single")``: collectives in the op records run over one rank. (A
    collective with no communicator set up is an error; tests of that deselect this one.)"""
    previous = set_communicator(SingleProcessCommunicator())
    yield
    set_communicator(previous)
