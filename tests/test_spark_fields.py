"""The per-field keys a Spark comparison computes from a layout's entry and metadata texts
(``recstore.spark.fields.field_rows``, a ``mapInArrow`` body: plain Arrow in, Arrow out, so no
Spark here) are the rows a store computes from the record (``record_fields``). The comparison on
Spark with these keys is tests/test_spark_compare.py."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings

from recstore.compare.features import record_fields
from recstore.formats.jsontext import dumps_json
from recstore.spark.fields import FIELD_SCHEMA, field_rows

from .record_strategies import run_records

_TEXTS = pa.schema([("feature_id", pa.int64()), ("section", pa.string()),
                    ("entry_index", pa.int32()), ("value", pa.string())])


def _texts(feature_id: int, record: dict) -> list[dict]:
    """What the layout's views give for ``record``: each entry's and the metadata's JSON text."""
    rows = [{"feature_id": feature_id, "section": section, "entry_index": index,
             "value": dumps_json(entry)}
            for section, key in (("policy", "policyDecisions"), ("guardrails", "guardrailDecisions"))
            for index, entry in enumerate(record.get(key) or ())]
    if record.get("metadata") is not None:
        rows.append({"feature_id": feature_id, "section": "metadata", "entry_index": 0,
                     "value": dumps_json(record["metadata"])})
    return rows


@settings(deadline=None)  # a shared 2-core machine: a first example can take 0.3 s
@given(run_records(), run_records())
def test_field_rows_from_texts_are_the_records_fields(first, second):
    batches = [pa.RecordBatch.from_pylist(_texts(fid, record), schema=_TEXTS)
               for fid, record in ((1, first), (2, second))]
    out = list(field_rows(iter(batches)))
    assert len(out) == 2 and all(batch.schema == FIELD_SCHEMA for batch in out)
    rows = [tuple(row.values()) for batch in out for row in batch.to_pylist()]
    assert rows == [(fid, *row) for fid, record in ((1, first), (2, second))
                    for row in record_fields(record)]
