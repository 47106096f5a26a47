"""recstore.compare: pairwise (aioc parity) and bulk, set-based comparison of stored runs.

``bulk_compare`` pairs a baseline run set with a candidate run set and compares every pair in
DuckDB SQL over per-revision features (canonical-JSON keys the projections compute at ingest);
``stored_pairs`` reads a recorded comparison's rows back; ``compare_stored`` gives the full aioc
differences list for two stored runs; ``render_html``/``render_text`` render a comparison. See
docs/compare.md.

Example (the demo's comparison and report)::

    comparison = bulk_compare(store, "tag.set = 'baseline'", "tag.set = 'candidate'",
                              pair_by="metadata.caseId")
    Path("compare-report.html").write_text(render_html(comparison, store), encoding="utf-8")
"""

from recstore.compare.aggregate import DEFAULT_RULE, SIGNALS, ClassificationRule
from recstore.compare.bulk import (
    DEFAULT_MAX_UNPAIRED,
    PAIR_COLUMNS,
    Comparison,
    aioc_result,
    bulk_compare,
    compare_pair,
    compare_stored,
    stored_pairs,
)
from recstore.compare.ignore import PRESETS, IgnoreSpec, parse_ignore, strip_record
from recstore.compare.pairing import DUPLICATE_RULES, PairBy
from recstore.compare.report import render_html, render_text

__all__ = [
    "DEFAULT_MAX_UNPAIRED",
    "DEFAULT_RULE",
    "DUPLICATE_RULES",
    "PAIR_COLUMNS",
    "PRESETS",
    "SIGNALS",
    "ClassificationRule",
    "Comparison",
    "aioc_result",
    "IgnoreSpec",
    "PairBy",
    "bulk_compare",
    "compare_pair",
    "compare_stored",
    "parse_ignore",
    "render_html",
    "render_text",
    "stored_pairs",
    "strip_record",
]
