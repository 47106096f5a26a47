"""Package names that load on first use (PEP 562), so importing a package for one light module
does not import everything the package offers.

Example:
    >>> __getattr__, __dir__ = lazy_exports("recstore", {"canonical_json": "recstore.canonical"},
    ...                                     {})
    >>> __getattr__("canonical_json")({"b": 1, "a": 2})
    '{"a":2,"b":1}'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str], namespace: dict[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` (its ``globals()`` is
    ``namespace``): each name of ``exports`` is imported from its module the first time it is
    used, then kept in ``namespace``; any other name is an AttributeError (so ``from package
    import submodule`` still imports the submodule)."""
    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
