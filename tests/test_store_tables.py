"""A big text column is staged as one buffer of its exact UTF-8 (issue 24): what DuckDB stores
is the text given, as ``str`` or UTF-8 ``bytes``, lone surrogates repaired as before, and
bytes that are not UTF-8 are refused as Arrow refuses them."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

import recstore.store.tables as tables
from recstore.store.tables import arrow_column, insert_columns


@pytest.fixture
def con(tmp_path):
    con = duckdb.connect(str(tmp_path / "t.duckdb"))
    con.execute("CREATE TABLE t (i INTEGER, payload VARCHAR NOT NULL)")
    yield con
    con.close()


def test_a_big_text_column_stores_exactly_the_text_given(con):
    texts = ["fox \U0001f98a " * 800_000, '{"a":"\u00e9t\u00e9"}', "plain", "", "x" * 10]
    values = [t.encode("utf-8") if i % 2 else t for i, t in enumerate(texts)]
    assert sum(map(len, values)) > tables._EXACT_TEXT_BYTES
    insert_columns(con, "t", ("i", "payload"), list(enumerate(values)))
    assert con.execute("SELECT payload FROM t ORDER BY i").fetchall() == [(t,) for t in texts]


def test_a_big_text_column_repairs_lone_surrogates_and_refuses_bad_utf8(monkeypatch):
    monkeypatch.setattr(tables, "_EXACT_TEXT_BYTES", 1)
    assert arrow_column(["a\ud800b", b"ok"], pa.string(), False).to_pylist() == ["a\ufffdb", "ok"]
    with pytest.raises(pa.ArrowInvalid):
        arrow_column([b"\xff\xfe", "ok"], pa.string(), False)
    assert arrow_column(["a", None], pa.string(), False).to_pylist() == ["a", None]
