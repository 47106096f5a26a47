"""recstore.compare: pairwise (aioc parity) and bulk, set-based comparison of stored runs.

``bulk_compare`` pairs a baseline run set with a candidate run set and compares every pair in
DuckDB SQL over per-revision feature rows (canonical-JSON hashes); ``compare_stored`` gives the
full aioc differences list for two stored runs. See docs/compare.md.
"""

from recstore.compare.aggregate import DEFAULT_RULE, SIGNALS, ClassificationRule
from recstore.compare.bulk import (
    PAIR_COLUMNS,
    Comparison,
    aioc_result,
    bulk_compare,
    compare_pair,
    compare_stored,
)
from recstore.compare.ignore import PRESETS, IgnoreSpec, parse_ignore, strip_record
from recstore.compare.pairing import DUPLICATE_RULES, PairBy

__all__ = [
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
    "strip_record",
]
