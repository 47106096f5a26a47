"""Bulk compare on Spark: ``recstore compare --engine spark --parquet DIR``.

The comparison runs the same SQL as on a store (:mod:`recstore.compare`: pairing, the per-pair
engine, classification and the aggregate), each statement transpiled to Spark SQL by a
:class:`~recstore.spark.connection.SparkConnection` over a Parquet layout: the output of
``recstore spark build`` or of ``recstore export`` (the same layout; both write the comparison's
feature views). The run sets are DSL filters compiled for Spark, as ``recstore query --engine
spark`` compiles them; they stay on Spark (only their counts reach the driver).

What differs from a comparison on a store, because a layout is not a store:

* nothing is recorded (there is no store to record into): the result's ``comparison_id`` is
  None, and the per-pair rows come back with it;
* a layout holds each run's current revision only, so every pair compares current revisions
  (as a filter-selected comparison on a store does);
* ``--ignore`` of fields inside entries or metadata (``policy.timestamp``, ``metadata.<key>``,
  the ``semantic`` preset) compares by keys a store computes from its records; on a layout they
  are computed from the entries and metadata the views hold (:mod:`recstore.spark.fields`, which
  says where that can differ: an entry holding a lone-surrogate escape).

Example (needs pyspark and a layout)::

    from recstore.query.spark import spark_session
    c = spark_compare(spark_session(), "views/", "source_uri LIKE '%v1%'",
                      "source_uri LIKE '%v2%'", pair_by="metadata.caseId")
    c.aggregate["flags"]["equal"], c.failed
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recstore.compare.aggregate import DEFAULT_RULE, ClassificationRule
from recstore.compare.bulk import (
    Comparison,
    compare_paired,
    compared_sections,
    pair_rows,
    pair_selected,
)
from recstore.compare.features import define_pairs
from recstore.compare.ignore import parse_ignore
from recstore.compare.pairing import DUPLICATE_RULES, PairBy
from recstore.errors import InputError
from recstore.query.api import compile_query, require_selection, run_key_tree
from recstore.query.export import parquet_view_paths
from recstore.query.views import default_catalog
from recstore.spark.connection import NO_LAYOUT, RunSet, SparkConnection
from recstore.spark.fields import register_field_features

__all__ = ["ParquetLayout", "check_layout_options", "spark_compare"]

@dataclass(frozen=True)
class ParquetLayout:
    """A Parquet layout read on Spark; :meth:`reader` gives a connection, as
    ``Store.reader()`` does, so the compare report reads pairs' runs from either."""

    spark: Any
    directory: str | Path

    @contextlib.contextmanager
    def reader(self) -> Iterator[SparkConnection]:
        with SparkConnection(self.spark, self.directory) as con:
            yield con


def check_layout_options(directory: str | Path, pair_by: str, ignore: Iterable[str] = (),
                         preset: str | None = None) -> None:
    """Raise InputError when ``directory`` holds no Parquet layout or the pairing rule or an
    ignore path is wrong: checked before a Spark session starts."""
    if not parquet_view_paths(directory):
        raise InputError(NO_LAYOUT, source=str(directory))
    PairBy.parse(pair_by)
    parse_ignore(ignore, preset)


def _select(con: SparkConnection, what: str, text: str, allow_empty: bool) -> RunSet:
    """The run keys the DSL filter ``text`` (over the public views, as on a store) selects,
    kept on Spark."""
    tree = run_key_tree(compile_query(text, default_catalog()), ordered=False)
    frame = con.relation(tree.sql(dialect="duckdb", comments=False)).localCheckpoint(eager=True)
    selected = RunSet(frame, frame.count())
    require_selection(selected.num_rows, text, what, allow_empty)
    return selected


def spark_compare(
    spark: Any,
    directory: str | Path,
    baseline: str | None,
    candidate: str | None,
    *,
    pair_by: str = "metadata.caseId",
    ignore: Iterable[str] = (),
    preset: str | None = None,
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
    duplicates: str = "latest",
    rule: ClassificationRule = DEFAULT_RULE,
    allow_empty: bool = False,
) -> Comparison:
    """:func:`recstore.compare.bulk_compare` on ``spark`` over the Parquet layout in
    ``directory``, with the same options but explicit pairs (module docstring: what differs
    on a layout). The result holds its pair rows and is not recorded.

    Raises:
        InputError: bad options or filters, or a directory that holds no layout.
            EmptySelectionError: an empty side, or no pairs (unless ``allow_empty``).
    """
    # the options are checked here as check_layout_options checks them, and the layout by
    # SparkConnection: before any Spark job runs
    spec, sections = compared_sections(ignore, preset, include_sections, exclude_sections)
    rule_pair_by = PairBy.parse(pair_by)
    if duplicates not in DUPLICATE_RULES:
        raise InputError(f"`duplicates` {duplicates!r}: use latest or all", param="duplicates")
    sides = (("baseline", baseline), ("candidate", candidate))
    with SparkConnection(spark, directory) as con:
        selections = [_select(con, f"the {side} filter", text or "", allow_empty)
                      for side, text in sides]
        try:
            pair_selected(con, selections, pair_by, duplicates, allow_empty)
            # a layout has no pinned revisions: every pair compares current ones
            con.execute("CREATE OR REPLACE TEMP TABLE _cmp_pinned (run_key VARCHAR, "
                        "revision INTEGER, first_seq BIGINT, feature_id BIGINT)")
            define_pairs(con)
            if spec.needs_fields():
                register_field_features(con, spec)
            comparison = compare_paired(
                con, baseline, candidate, pair_by=str(rule_pair_by), duplicates=duplicates,
                sections=sections, spec=spec, rule=rule,
                selected={side: s.num_rows for (side, _), s in zip(sides, selections,
                                                                    strict=True)})
            comparison.rows = pair_rows(con)
        finally:
            for selection in selections:
                selection.frame.unpersist()
    return comparison
