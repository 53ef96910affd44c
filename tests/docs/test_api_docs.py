"""Every public name of lbi_engine, and every field of its public dataclasses, is described,
and the API reference page lists every public name (autodoc renders the descriptions)."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

import lbi_engine
from tests.docs import _blocks

PUBLIC = [name for name in lbi_engine.__all__ if name != "__version__"]
API_PAGE = _blocks.ROOT / "docs" / "reference" / "api.md"


def _described_fields(cls: type) -> set[str]:
    """Names the class docstring's ``Attributes:`` section describes (Google style)."""
    doc = inspect.getdoc(cls) or ""
    section = re.search(r"^Attributes:\n(.*?)(?=^\S|\Z)", doc, re.M | re.S)
    return set(re.findall(r"^    (\w+):\s+\S", section.group(1), re.M)) if section else set()


def _public_methods(cls: type) -> list[str]:
    return [name for name, member in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(member)
                                             or isinstance(member, (classmethod, property)))]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_has_a_docstring_and_is_in_the_reference(name: str) -> None:
    obj = getattr(lbi_engine, name)
    assert (inspect.getdoc(obj) or "").strip(), f"lbi_engine.{name} has no docstring"
    assert re.search(rf"auto(function|class):: lbi_engine\.{name}$",
                     API_PAGE.read_text(encoding="utf-8"), re.M), name


@pytest.mark.parametrize("name", [n for n in PUBLIC
                                  if dataclasses.is_dataclass(getattr(lbi_engine, n))])
def test_every_field_of_a_public_dataclass_is_described(name: str) -> None:
    cls = getattr(lbi_engine, name)
    fields = {field.name for field in dataclasses.fields(cls)}
    missing = fields - _described_fields(cls)
    assert not missing, f"{name}: fields without a description under 'Attributes:': {missing}"
    assert not _described_fields(cls) - fields, "describes fields the class does not have"


@pytest.mark.parametrize("name", [n for n in PUBLIC if inspect.isclass(getattr(lbi_engine, n))])
def test_public_methods_of_public_classes_have_docstrings(name: str) -> None:
    cls = getattr(lbi_engine, name)
    bare = [m for m in _public_methods(cls)
            if not (inspect.getdoc(getattr(cls, m)) or "").strip()]
    assert not bare, f"{name}: public methods without a docstring: {bare}"


def test_the_check_finds_an_undescribed_field() -> None:
    @dataclasses.dataclass
    class Example:
        """An example.

        Attributes:
            described: has a description.
        """

        described: int = 0
        forgotten: int = 0

    assert _described_fields(Example) == {"described"}
