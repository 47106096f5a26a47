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

from recstore.canonical import canonical_json, loads_strict, sha256_canonical, sha256_text
from recstore.errors import InputError, NotFoundError, RecstoreError, StoreLockedError
from recstore.records import analyze, compare_records, extract_tool_calls
from recstore.store import Store

__all__ = [
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
