"""Per-field comparison keys on Spark: what ``--ignore policy.timestamp``, ``metadata.<key>`` and
``--preset semantic`` compare by.

A store computes a revision's field keys from its record the first time a comparison ignores a
field (:func:`recstore.compare.features.record_fields`, kept in ``cmp_field_features``). A layout
holds no records, but it holds what those keys are computed from: each policy and guardrail entry
as its event's payload (``policy_decisions.payload``, ``guardrail_decisions.payload``) and each
run's metadata (``runs.metadata``). :func:`register_field_features` computes the same rows from
them for the revisions a comparison pairs, with :func:`recstore.records.keys.field_keys` in a
vectorized (Arrow) UDF on the executors, and shows them to the comparison's SQL as
``cmp_field_features``.

One difference: the views read an entry holding a lone-surrogate escape (``"\\ud800"``) with
U+FFFD in its place (schema/003_views.sql), so on Spark two such entries that differ only in the
lone surrogate compare equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from recstore.compare.ignore import IgnoreSpec
from recstore.formats.jsontext import loads_json
from recstore.records.keys import field_keys

__all__ = ["FIELD_SCHEMA", "field_rows", "register_field_features"]

#: The columns of the store's ``cmp_field_features`` table (schema/010_compare.sql).
FIELD_SCHEMA = pa.schema([("feature_id", pa.int64()), ("section", pa.string()),
                          ("entry_index", pa.int32()), ("field", pa.string()),
                          ("value_key", pa.int64())])

# The objects whose top-level fields a section's ignore paths name, as DuckDB SQL over the
# layout's views, for the revisions in ``_cmp_fids``.
_OBJECTS = {
    "policy": "SELECT f.feature_id, 'policy' AS section, d.decision_index AS entry_index, "
              "d.payload::VARCHAR AS value FROM policy_decisions d JOIN _cmp_fids f USING (run_key)",
    "guardrails": "SELECT f.feature_id, 'guardrails', d.decision_index, d.payload::VARCHAR "
                  "FROM guardrail_decisions d JOIN _cmp_fids f USING (run_key)",
    "metadata": "SELECT f.feature_id, 'metadata', 0, r.metadata::VARCHAR FROM runs r "
                "JOIN _cmp_fids f USING (run_key) WHERE r.metadata IS NOT NULL",
}


def field_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows ``(feature_id, section, entry_index, value)`` (``value``: an
    object's JSON text) to one :data:`FIELD_SCHEMA` row per top-level field of each object, as
    :func:`~recstore.compare.features.record_fields` gives them from a record."""
    for batch in batches:
        columns = [batch.column(name).to_pylist()
                   for name in ("feature_id", "section", "entry_index", "value")]
        rows = [(fid, section, index, *keys)
                for fid, section, index, text in zip(*columns, strict=True)
                if isinstance(value := loads_json(text), dict)
                for keys in field_keys(value)]
        fields = list(zip(*rows, strict=True)) or [()] * len(FIELD_SCHEMA)
        yield pa.RecordBatch.from_arrays(
            [pa.array(values, type=column.type)
             for values, column in zip(fields, FIELD_SCHEMA, strict=True)],
            schema=FIELD_SCHEMA)


def register_field_features(con: Any, spec: IgnoreSpec) -> None:
    """``cmp_field_features`` on the :class:`~recstore.spark.connection.SparkConnection`
    ``con``: the field rows of the revisions in ``_cmp_pairs`` for the sections ``spec``
    ignores fields of, computed on the executors and kept in memory."""
    from pyspark.sql.pandas.types import from_arrow_schema

    sections = [section for section, wanted in (("policy", spec.policy_fields),
                                                ("guardrails", spec.guardrail_fields),
                                                ("metadata", spec.metadata_keys)) if wanted]
    con.execute("""
        CREATE OR REPLACE TEMP TABLE _cmp_fids AS
        SELECT DISTINCT r.run_key, r.feature_id FROM cmp_run_features r
        WHERE r.feature_id IN (SELECT a_fid FROM _cmp_pairs UNION SELECT b_fid FROM _cmp_pairs)
    """)
    objects = con.relation(" UNION ALL ".join(_OBJECTS[section] for section in sections))
    fields = objects.mapInArrow(field_rows, from_arrow_schema(FIELD_SCHEMA))
    con.keep("cmp_field_features", fields)
