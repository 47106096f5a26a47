"""Examples in docstrings are executed, so they cannot rot (sqlglot's test_docs pattern)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import recstore

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(recstore.__path__, prefix="recstore.")
    if not info.name.startswith("recstore.cli") and info.name != "recstore.__main__"
)


@pytest.mark.parametrize("name", ["recstore", *MODULES])
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} failing docstring example(s) in {name}"
