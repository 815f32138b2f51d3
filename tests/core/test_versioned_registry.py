"""The versioned registry the bridges share: newest entry at or below a version, duplicates
refused, a miss names what exists."""

import pytest

from opgraph.core.errors import RegistryError
from opgraph.core.registry import VersionedRegistry


def _registry() -> VersionedRegistry[str, str]:
    registry: VersionedRegistry[str, str] = VersionedRegistry("converter", "opset")
    registry.add("Relu", "relu-6", since=6)
    registry.add("Relu", "relu-14", since=14)
    registry.add("Add", "add-7", since=7)
    return registry


@pytest.mark.parametrize(
    ("version", "expected"),
    [(5, None), (6, "relu-6"), (13, "relu-6"), (14, "relu-14"), (99, "relu-14"), (None, "relu-14")],
)
def test_lookup_takes_the_newest_entry_at_or_below_the_version(version, expected):
    assert _registry().lookup("Relu", version) == expected


def test_registration_order_does_not_matter():
    registry: VersionedRegistry[str, str] = VersionedRegistry("converter", "opset")
    registry.register("Relu", since=14)("new")
    registry.register("Relu", since=6)("old")
    assert registry.lookup("Relu", 10) == "old"
    assert registry.versions("Relu") == [6, 14]


def test_a_duplicate_is_refused_with_its_version():
    with pytest.raises(RegistryError, match="converter for Relu since opset 14 is already"):
        _registry().add("Relu", "again", since=14)


def test_an_unversioned_duplicate_names_no_version():
    registry: VersionedRegistry[str, int] = VersionedRegistry("ATen converter")
    registry.register("a", "b")(1)
    with pytest.raises(RegistryError, match=r"^ATen converter for b is already registered$"):
        registry.register("b")(2)


def test_require_names_the_versions_of_a_known_key():
    with pytest.raises(
        RegistryError, match="for Relu at opset 5; Relu has entries since opset 6, 14"
    ):
        _registry().require("Relu", 5)


def test_require_lists_the_registered_keys_on_an_unknown_key():
    with pytest.raises(
        RegistryError, match="no converter is registered for Gelu; registered: Add, Relu"
    ):
        _registry().require("Gelu")


def test_an_unhashable_key_is_a_miss_not_a_crash():
    registry = _registry()
    assert registry.lookup([1, 2]) is None  # type: ignore[arg-type]
    assert [1, 2] not in registry


def test_entries_and_keys():
    registry = _registry()
    assert sorted((k, v) for k, v, _ in registry.entries()) == [
        ("Add", 7),
        ("Relu", 6),
        ("Relu", 14),
    ]
    assert sorted(registry) == ["Add", "Relu"] and len(registry) == 2


def test_keys_print_through_the_name_function():
    registry: VersionedRegistry[tuple[str, str], int] = VersionedRegistry(
        "ONNX converter", "opset", lambda key: "::".join(key)
    )
    registry.add(("com.microsoft", "Gelu"), 1, since=1)
    with pytest.raises(RegistryError, match="registered: com.microsoft::Gelu"):
        registry.require(("", "Gelu"), 1)
