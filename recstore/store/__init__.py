"""recstore.store: the DuckDB file — event log, projections, sources, rejects, lineage, lock.

``Store`` is the one object a caller holds; see :mod:`recstore.store.store`. The names load on
first use: a command that only reads imports the store without its ingest machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recstore.lazy import lazy_exports

if TYPE_CHECKING:
    from recstore.store.counts import IngestSummary
    from recstore.store.prepare import run_key_for
    from recstore.store.store import DEFAULT_DB, Store, VerifyReport

__all__ = ["DEFAULT_DB", "IngestSummary", "Store", "VerifyReport", "run_key_for"]  # noqa: F822

__getattr__, __dir__ = lazy_exports("recstore.store", {
    "DEFAULT_DB": "recstore.store.store", "IngestSummary": "recstore.store.ingest",
    "Store": "recstore.store.store", "VerifyReport": "recstore.store.store",
    "run_key_for": "recstore.store.prepare"}, globals())
