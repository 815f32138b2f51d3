"""docs/ops.md is generated from the registry and must be current."""

from pathlib import Path

from opgraph.opdocs import markdown, op_classes

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ops.md"


def test_op_reference_is_current():
    assert DOCS.read_text() == markdown() + "\n", "regenerate: opgraph ops --markdown > docs/ops.md"


def test_every_op_is_documented():
    text = markdown()
    for cls in op_classes():
        assert f"| {cls.__name__} |" in text
