"""Every Python block in README.md and docs/*.md runs as written.

Each block runs on its own, in a fresh Python process whose working directory is an empty
temporary directory, so a block must import and define everything it uses. A block that cannot
run here is marked on the line just before its fence::

    <!-- no-test: needs a CUDA GPU -->

and is reported as skipped with that reason. A block that needs an optional extra (torch,
onnx, …) is skipped, naming the extra, where that extra is not installed; a block that uses the
GPU backend is skipped, with the backend's own reason, where no GPU is registered.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import opgraph as og

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
NO_TEST = re.compile(r"^<!--\s*no-test:\s*(.+?)\s*-->\s*$")
#: Seconds one block may take; blocks are meant to be small examples.
BLOCK_TIMEOUT = 180

#: Optional modules a block may use: how a block shows it uses one, and the extra providing it.
OPTIONAL = {
    "torch": (r"^\s*(import|from) torch\b|opgraph\.frontends\.torch", "torch"),
    "onnx": (r"^\s*(import|from) onnx\b|og\.onnx\b|opgraph\.frontends\.onnx", "onnx"),
    "onnxruntime": (r"^\s*(import|from) onnxruntime\b", "onnx"),
    "mpi4py": (r"^\s*(import|from) mpi4py\b|\b(dist|distributed)\.init\(", "dist"),
    "sklearn": (r"^\s*(import|from) sklearn\b", "train"),
    "matplotlib": (r"^\s*(import|from) matplotlib\b", "train"),
}


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None  # the no-test reason, or None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def python_blocks(path: Path) -> list[Block]:
    """The ```python blocks of ``path``, each with the no-test reason written above it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    start: int | None = None
    language = ""
    for number, line in enumerate(lines):
        match = FENCE.match(line)
        if match is None:
            continue
        if start is None:
            start, language = number, match.group(1)
            continue
        if language == "python":
            marker = NO_TEST.match(lines[start - 1]) if start > 0 else None
            code = "\n".join(lines[start + 1 : number]) + "\n"
            blocks.append(Block(path, start + 1, code, marker.group(1) if marker else None))
        start = None
    return blocks


BLOCKS = [block for path in DOCUMENTS for block in python_blocks(path)]


def test_every_document_is_scanned() -> None:
    """The scan finds the blocks (a changed fence style would otherwise test nothing)."""
    assert len(BLOCKS) >= 20, [block.id for block in BLOCKS]
    assert any(block.path.name == "README.md" for block in BLOCKS)


def test_markers_sit_on_python_blocks() -> None:
    """A no-test marker is followed by a Python fence, so it cannot silently skip prose."""
    for path in DOCUMENTS:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if NO_TEST.match(line):
                following = lines[number + 1] if number + 1 < len(lines) else ""
                where = f"{path.relative_to(ROOT)}:{number + 1}"
                assert following.startswith("```python"), f"{where}: marker before {following!r}"


def test_blocks_and_markers_are_read(tmp_path: Path) -> None:
    """The scanner takes Python fences only, with the marker just above one as its reason."""
    page = tmp_path / "page.md"
    page.write_text(
        "text\n<!-- no-test: needs a GPU -->\n```python\nprint(1)\n```\n"
        "```bash\nls\n```\n\n```python\nx = 2\n```\n",
        encoding="utf-8",
    )
    first, second = python_blocks(page)
    assert (first.line, first.code, first.skip) == (3, "print(1)\n", "needs a GPU")
    assert (second.line, second.code, second.skip) == (10, "x = 2\n", None)


def unmet_need(code: str) -> str | None:
    """Why ``code`` cannot run here (an optional module missing, no GPU), or None."""
    for module, (pattern, extra) in OPTIONAL.items():
        if re.search(pattern, code, re.M) and importlib.util.find_spec(module) is None:
            return f"needs {module} (pip install -e '.[{extra}]')"
    if re.search(r"""backend\(["']GPU["']\)""", code) and "GPU" not in og.backends():
        try:
            og.backend("GPU")
        except og.OpgraphError as error:  # says why: no CuPy, no device, …
            return f"needs the GPU backend: {error}"
        return "needs the GPU backend"
    return None


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    if block.skip is not None:
        pytest.skip(block.skip)
    reason = unmet_need(block.code)
    if reason is not None:
        pytest.skip(reason)
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"{block.id} failed (exit {result.returncode}):\n{block.code}\n"
            f"--- stdout\n{result.stdout[-2000:]}\n--- stderr\n{result.stderr[-4000:]}",
            pytrace=False,
        )


def test_readme_example_computes() -> None:
    """The README's main example computes the same result through both calling conventions."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Example", 1)[1]
    code = next(block.code for block in BLOCKS if block.code in section)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    result, same = namespace["result"], namespace["same"]
    assert isinstance(result, np.ndarray) and result.shape == (32, 32)
    np.testing.assert_array_equal(same, result)


def test_no_merge_conflict_markers_are_left() -> None:
    """A Markdown or text file still parses with a merge's conflict markers in it."""
    markers = re.compile(r"^(<{7}|>{7}) ", re.MULTILINE)
    found = [
        str(path.relative_to(ROOT))
        for pattern in ("*.md", "docs/*.md", "tests/*.txt")
        for path in ROOT.glob(pattern)
        if markers.search(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"merge conflict markers in {found}"
