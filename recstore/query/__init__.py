"""recstore.query: read-only SQL and a filter DSL over the store's public views.

The pipeline is compiler-shaped, one small step per module: ``views`` (the catalogue) →
``dsl`` (tokenize, parse, build a sqlglot tree) or ``guard`` (parse and check SQL) →
``dialects`` (print for another engine) → ``output`` (stream results). ``saved`` reads the
``queries/`` files, ``export`` writes Parquet and ``spark`` runs queries on it. The names
load on first use, so a command imports only the steps it takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recstore.lazy import lazy_exports

if TYPE_CHECKING:
    from recstore.errors import DslError, QueryLimitError, QueryRefused
    from recstore.query.api import (
        CompiledQuery,
        compile_dsl,
        compile_query,
        execute,
        open_reader,
        run_query,
        select_gate_run_sets,
        select_gate_runs,
        select_run_keys,
    )
    from recstore.query.limits import QueryLimits, cap_rows
    from recstore.query.output import FORMATS, ResultStream, output_format, write_result
    from recstore.query.saved import SavedQuery, list_saved, load_saved
    from recstore.query.views import Catalog, default_catalog

#: The engines a query prints SQL for (:mod:`recstore.query.dialects`); here, so `recstore query
#: --help` lists them without importing sqlglot.
DIALECTS: tuple[str, ...] = ("duckdb", "spark", "trino", "postgres", "bigquery", "clickhouse")

_MODULES = {
    "recstore.errors": "DslError QueryLimitError QueryRefused",
    "recstore.query.api": "CompiledQuery compile_dsl compile_query execute open_reader run_query "
                          "select_gate_run_sets select_gate_runs select_run_keys",
    "recstore.query.limits": "QueryLimits cap_rows",
    "recstore.query.output": "FORMATS ResultStream output_format write_result",
    "recstore.query.saved": "SavedQuery list_saved load_saved",
    "recstore.query.views": "Catalog default_catalog",
}

__all__ = [  # noqa: F822 - the names resolve through __getattr__
    "Catalog",
    "CompiledQuery",
    "DIALECTS",
    "DslError",
    "FORMATS",
    "QueryLimitError",
    "QueryLimits",
    "QueryRefused",
    "ResultStream",
    "SavedQuery",
    "compile_dsl",
    "compile_query",
    "cap_rows",
    "default_catalog",
    "execute",
    "list_saved",
    "load_saved",
    "open_reader",
    "output_format",
    "run_query",
    "select_gate_run_sets",
    "select_gate_runs",
    "select_run_keys",
    "write_result",
]

__getattr__, __dir__ = lazy_exports(
    "recstore.query",
    {name: module for module, names in _MODULES.items() for name in names.split()}, globals())
