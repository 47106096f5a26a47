"""recstore.store: the DuckDB file — event log, projections, sources, rejects, lineage, lock.

``Store`` is the one object a caller holds; see :mod:`recstore.store.store`.
"""

from __future__ import annotations

from recstore.store.ingest import IngestSummary
from recstore.store.prepare import run_key_for
from recstore.store.store import DEFAULT_DB, Store, VerifyReport

__all__ = ["DEFAULT_DB", "IngestSummary", "Store", "VerifyReport", "run_key_for"]
