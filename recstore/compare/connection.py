"""The engine boundary of bulk comparison: what a connection must do, and the tables the
comparison's steps hand each other on it.

Bulk comparison is DuckDB SQL sent through a connection's ``execute``. Two engines run it: a
DuckDB connection to a store, and :class:`recstore.spark.connection.SparkConnection` over a
Parquet layout. Neither knows the other; this module is the whole contract between them and the
comparison's steps (:mod:`recstore.compare.pairing`, :mod:`~recstore.compare.features`,
:mod:`~recstore.compare.engine`, :mod:`~recstore.compare.aggregate`):

- a connection satisfies :class:`CompareConnection`;
- each step leaves its result in the temporary relation :data:`CONTRACT_TABLES` names, with at
  least the columns listed there, for the next step to read.

``tests/compare_contract.py`` holds one contract suite that every engine's test module
subclasses, so an engine that drifts from this page fails its own tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

__all__ = ["CONTRACT_TABLES", "CompareConnection", "CompareCursor", "CompareRelation"]


@runtime_checkable
class CompareCursor(Protocol):
    """The rows of one statement (DuckDB's connection after ``execute``, a ``SparkCursor``)."""

    @property
    def description(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...

    def fetchmany(self, size: int, /) -> list[Any]: ...


@runtime_checkable
class CompareRelation(Protocol):
    """A query's result read as Arrow (DuckDB's relation, a ``SparkCursor``)."""

    def to_arrow_table(self) -> pa.Table: ...


@runtime_checkable
class CompareConnection(Protocol):
    """What the comparison calls on a connection. Statements are DuckDB SQL: ``SELECT``,
    ``CREATE OR REPLACE TEMP TABLE/VIEW ... AS SELECT``, ``CREATE TEMP TABLE name (columns)``,
    with ``?`` parameters; ``register`` makes an Arrow table (or an engine's own relation, such
    as a Spark ``RunSet``) readable under ``name`` until ``unregister``."""

    def execute(self, sql: str, params: Sequence[Any] | None = None, /) -> CompareCursor: ...

    def sql(self, sql: str, /) -> CompareRelation: ...

    def register(self, name: str, rows: Any, /) -> Any: ...

    def unregister(self, name: str, /) -> Any: ...


# The relations one step leaves for the next, each with the columns the next step reads, in
# the order the steps run. ``a`` is the baseline side, ``b`` the candidate; ``*_rev`` a pinned
# revision (NULL = current), ``*_current`` the current revision's first seq, ``*_fid`` the id
# its comparison features are keyed by.
CONTRACT_TABLES: dict[str, tuple[str, ...]] = {
    # pairing (pair_selected / pair_explicit): one row per pair formed
    "_cmp_pairing": ("pair_index", "pair_key", "a_key", "b_key", "a_rev", "b_rev", "a_current",
                     "b_current", "a_current_rev", "b_current_rev"),
    # pairing: every selected run left out of a pair, and why
    "_cmp_unpaired_runs": ("side", "run_key", "pair_key", "reason"),
    # features (define_pairs): the revisions each pair compares
    "_cmp_pairs": ("pair_index", "a_revision", "b_revision", "a_seq", "b_seq", "a_fid", "b_fid"),
    # engine + classification (compare_pairs, classify): one row per pair with its verdict
    "_cmp_classified": ("pair_index", "equal", "same_final_response", "same_tool_call_shape",
                        "same_policy_decisions", "same_guardrail_decisions", "same_metadata",
                        "same_tool_outputs", "difference_count", "first_divergence_index",
                        "status_a", "status_b", "classification"),
}
