"""recstore: an event-sourced store for AI-agent run records.

The top level is the API a user needs most; each layer is a subpackage (see the README's
layout): ``recstore.records`` (pure functions over one record), ``recstore.store``,
``recstore.query``, ``recstore.compare``, ``recstore.replay``, ``recstore.sweep``.

Example:
    >>> from recstore import canonical_json, compare_records
    >>> canonical_json({"b": 1.0, "a": [1e21]})
    '{"a":[1e+21],"b":1}'
    >>> run = {"response": "x", "items": [], "policyDecisions": []}
    >>> compare_records(run, dict(run))["equal"]
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recstore.lazy import lazy_exports

# Where each public name lives. They load on first use: `import recstore` (which the CLI's
# `--help` and `--version` pay for) must not import duckdb, pyarrow, sqlglot or pydantic.
_EXPORTS = {
    "InputError": "recstore.errors",
    "NotFoundError": "recstore.errors",
    "RecstoreError": "recstore.errors",
    "Store": "recstore.store",
    "StoreLockedError": "recstore.errors",
    "analyze": "recstore.records",
    "canonical_json": "recstore.canonical",
    "compare_records": "recstore.records",
    "extract_tool_calls": "recstore.records",
    "loads_strict": "recstore.canonical",
    "sha256_canonical": "recstore.canonical",
    "sha256_text": "recstore.canonical",
}

if TYPE_CHECKING:
    from recstore.canonical import canonical_json, loads_strict, sha256_canonical, sha256_text
    from recstore.errors import InputError, NotFoundError, RecstoreError, StoreLockedError
    from recstore.records import analyze, compare_records, extract_tool_calls
    from recstore.store import Store

__all__ = [  # noqa: F822 - the names resolve through __getattr__
    "InputError",
    "NotFoundError",
    "RecstoreError",
    "Store",
    "StoreLockedError",
    "analyze",
    "canonical_json",
    "compare_records",
    "extract_tool_calls",
    "loads_strict",
    "sha256_canonical",
    "sha256_text",
]
__version__ = "0.1.0"


__getattr__, __dir__ = lazy_exports("recstore", _EXPORTS, globals())
