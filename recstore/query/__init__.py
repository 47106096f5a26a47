"""recstore.query: read-only SQL and a filter DSL over the store's public views.

The pipeline is compiler-shaped, one small step per module: ``views`` (the catalogue) →
``dsl`` (tokenize, parse, build a sqlglot tree) or ``guard`` (parse and check SQL) →
``dialects`` (print for another engine) → ``output`` (stream results). ``saved`` reads the
``queries/`` files, ``export`` writes Parquet and ``spark`` runs queries on it.
"""

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

__all__ = [
    "Catalog",
    "CompiledQuery",
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
