"""The package's floors: core imports nothing above it, ops only core, and the few imports left
inside functions say which cycle they break. Read from the sources (in-function imports too)."""

import ast
from pathlib import Path

import pytest

import opgraph

ROOT = Path(opgraph.__file__).parent


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[ast.stmt, str, bool]]:
    """``(statement, imported module, inside a function)`` for every opgraph import."""
    tree = ast.parse(path.read_text())
    in_function = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
    }
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [base]
        else:
            continue
        for name in names:
            if name == "opgraph" or name.startswith("opgraph."):
                found.append((node, name, id(node) in in_function))
    return found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(
    ("package", "allowed"),
    [
        ("core", ("opgraph.core",)),
        ("ops", ("opgraph.core", "opgraph.ops")),
        ("builders", ("opgraph.core", "opgraph.ops", "opgraph.builders")),
        ("autodiff", ("opgraph.core", "opgraph.ops", "opgraph.passes", "opgraph.autodiff")),
    ],
)
def test_package_imports_only_the_floors_below(package, allowed):
    wrong = [
        f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
        for path in _files(package)
        for node, name, _ in _imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
    ]
    assert not wrong, "\n".join(wrong)


def _in_function_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function body, of any module."""
    tree = ast.parse(path.read_text())
    return [
        n
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
        if isinstance(n, ast.Import | ast.ImportFrom)
    ]


# every folder of Python files (opgraph.runtime is a namespace package, without __init__.py)
_PACKAGES = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and any(p.rglob("*.py")))


@pytest.mark.parametrize("package", [*_PACKAGES, None], ids=[*_PACKAGES, "root-modules"])
def test_imports_inside_functions_say_which_cycle_they_break(package):
    """An import inside a function breaks a real cycle or defers a heavy or optional
    dependency, and the comment line just above it says which; any module, any import."""
    paths = _files(package) if package else sorted(ROOT.glob("*.py"))
    assert paths, f"no Python files found for {package or 'the root modules'} under {ROOT}"
    bare = []
    for path in paths:
        lines = path.read_text().splitlines()
        for node in _in_function_imports(path):
            if not lines[node.lineno - 2].strip().startswith("#"):
                bare.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
                )
    assert not bare, "in-function imports without a comment above them:\n" + "\n".join(bare)


def test_collective_ops_do_not_know_the_communicators():
    names = [name for _, name, _ in _imports(ROOT / "ops" / "collective.py")]
    assert not [n for n in names if n.startswith(("opgraph.runtime", "opgraph.distributed"))]
