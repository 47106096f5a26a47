"""Output formats: table, json, ndjson, csv, parquet; files via --output; results stream in
batches instead of being loaded whole."""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.query import ResultStream, run_query, write_result
from recstore.store import Store

from .query_support import run_cli

QUERY = ("SELECT run_key, status, duration_ms, started, metadata FROM runs "
         "WHERE metadata IS NOT NULL ORDER BY run_key LIMIT 25")



def _expected(store: Store) -> list[tuple]:
    with store.reader() as con:
        return con.execute(QUERY).fetchall()


def _write(store: Store, fmt: str, **kwargs) -> str:
    out = io.StringIO()
    with run_query(store, QUERY) as result:
        write_result(result, fmt, stdout=out, **kwargs)
    return out.getvalue()


def test_json_embeds_json_columns_and_keeps_rows(fixture_store):
    rows = json.loads(_write(fixture_store, "json"))
    expected = _expected(fixture_store)
    assert [r["run_key"] for r in rows] == [e[0] for e in expected]
    assert [r["duration_ms"] for r in rows] == [e[2] for e in expected]
    assert all(isinstance(r["metadata"], dict) for r in rows)
    assert rows[0]["metadata"] == json.loads(expected[0][4])
    assert rows[0]["started"] == expected[0][3].isoformat() + "Z"  # the store's times are UTC


def test_ndjson_is_one_object_per_line(fixture_store):
    lines = _write(fixture_store, "ndjson").rstrip("\n").split("\n")
    assert len(lines) == len(_expected(fixture_store))
    assert [json.loads(line)["status"] for line in lines] == \
        [e[1] for e in _expected(fixture_store)]


def test_csv_has_header_and_text_cells(fixture_store):
    rows = list(csv.reader(io.StringIO(_write(fixture_store, "csv"))))
    assert rows[0] == ["run_key", "status", "duration_ms", "started", "metadata"]
    expected = _expected(fixture_store)
    assert [r[0] for r in rows[1:]] == [e[0] for e in expected]
    assert json.loads(rows[1][4]) == json.loads(expected[0][4])


def test_table_keeps_keys_whole_cuts_long_cells_and_counts_rows(fixture_store):
    text = _write(fixture_store, "table")
    header, rule, *body, footer = text.splitlines()
    assert header.split() == ["run_key", "status", "duration_ms", "started", "metadata"]
    assert set(rule) == {"─"}
    expected = _expected(fixture_store)
    assert footer == f"({len(expected)} rows)"
    starts = [line.split()[0] for line in body if line[:1] not in (" ", "")]
    assert starts == [row[0] for row in expected]  # every run key whole, at a row's start
    assert len(body) == len(expected), "one line per row, long metadata cut, not wrapped"
    assert all(line.endswith("…") for line in body)
    assert all(len(line) <= len(rule) for line in body)


def test_table_fits_a_terminal_width_counting_wide_characters():
    from rich.cells import cell_len

    from recstore.query.table import write_table

    out = io.StringIO()
    rows = [["aioc:" + "k" * 36, "研究 Agent " * 6, "x" * 300]]
    write_table(["run_key", "agent", "note"], rows * 3, out, width=80)
    lines = out.getvalue().splitlines()[:-1]
    assert max(cell_len(line) for line in lines) <= 80
    assert sum(("aioc:" + "k" * 36) in line for line in lines) == 3  # keys never wrapped
    one = io.StringIO()
    write_table(["run_key", "agent", "note"], rows, one, width=80)
    assert one.getvalue().startswith("-[ row 1 ]")  # a single row that does not fit: vertical


def test_parquet_needs_output_and_round_trips(fixture_store, tmp_path):
    with pytest.raises(InputError, match=r"`fmt`: parquet output needs a file \(`output`\)"
                       ) as caught:
        _write(fixture_store, "parquet")
    assert caught.value.param == "fmt"
    target = tmp_path / "out.parquet"
    with run_query(fixture_store, QUERY) as result:
        assert write_result(result, "parquet", output=target) == 25
    table = pq.read_table(target)
    assert table.column("run_key").to_pylist() == [e[0] for e in _expected(fixture_store)]
    assert pq.ParquetFile(target).metadata.row_group(0).column(0).compression == "ZSTD"


def test_cli_output_file_and_json_flag(fixture_store, tmp_path):
    target = tmp_path / "failed.csv"
    result = run_cli("query", "status = 'failed' fields run_key, error_name order by run_key",
                     "--format", "csv", "--output", str(target), db=fixture_store.path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    rows = list(csv.reader(target.open(encoding="utf-8")))
    with fixture_store.reader() as con:
        expected = con.execute("SELECT run_key, error_name FROM runs WHERE status = 'failed' "
                               "ORDER BY run_key").fetchall()
    assert [tuple(r) for r in rows[1:]] == [(k, e or "") for k, e in expected]
    listed = run_cli("query", "@guardrail-trips", "--json", db=fixture_store.path)
    assert listed.returncode == 0, listed.stderr
    assert {"guardrail_name", "agent", "trips", "runs"} == set(json.loads(listed.stdout)[0])


def test_store_results_arrive_in_batches(fixture_store):
    with run_query(fixture_store, "SELECT * FROM items", batch_rows=1000) as result:
        sizes = [batch.num_rows for batch in result.batches]
    assert len(sizes) > 5 and max(sizes) <= 2048  # DuckDB rounds to its vector size


class _Sink(io.StringIO):
    """Counts the lines written so far."""

    def lines(self) -> int:
        return self.getvalue().count("\n")


@pytest.mark.parametrize("fmt", ["ndjson", "csv", "json", "table"])
def test_writers_consume_batches_lazily(fmt):
    """Each batch is requested only after the previous ones were written: no writer collects
    the whole result (the table writer reads ahead only its 200-row sample)."""
    sink, batch_rows, batches = _Sink(), 100, 40
    read_ahead = 200 if fmt == "table" else 0

    def produce() -> Iterator[pa.RecordBatch]:
        for i in range(batches):
            header_lines = {"table": 2, "csv": 1, "json": 0, "ndjson": 0}[fmt]
            written_rows = max(0, sink.lines() - header_lines)
            assert written_rows >= i * batch_rows - read_ahead - batch_rows
            yield pa.RecordBatch.from_pydict({"n": list(range(i * batch_rows,
                                                              (i + 1) * batch_rows))})

    stream = ResultStream(["n"], ["BIGINT"], produce(), pa.schema([("n", pa.int64())]))
    assert write_result(stream, fmt, stdout=sink) == batch_rows * batches


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=20), st.integers(-10**9, 10**9),
                          st.none() | st.text(max_size=20)), max_size=30))
def test_json_and_csv_round_trip_any_values(rows):
    def stream() -> ResultStream:
        table = pa.table({"name": [r[0] for r in rows], "n": pa.array([r[1] for r in rows],
                                                                       pa.int64()),
                          "note": pa.array([r[2] for r in rows], pa.string())})
        return ResultStream(table.column_names, ["VARCHAR", "BIGINT", "VARCHAR"],
                            iter(table.to_batches(max_chunksize=7)), table.schema)

    out = io.StringIO()
    write_result(stream(), "ndjson", stdout=out)
    parsed = [json.loads(line) for line in out.getvalue().split("\n") if line]
    assert [(p["name"], p["n"], p["note"]) for p in parsed] == rows
    out = io.StringIO()
    write_result(stream(), "csv", stdout=out)
    back = list(csv.reader(io.StringIO(out.getvalue())))[1:]
    assert back == [[r[0], str(r[1]), r[2] or ""] for r in rows]


def test_results_as_arrow_pandas_and_polars(fixture_store):
    expected = _expected(fixture_store)
    with run_query(fixture_store, QUERY) as result:
        table = result.arrow()
    assert table.column_names == ["run_key", "status", "duration_ms", "started", "metadata"]
    assert table.column("run_key").to_pylist() == [row[0] for row in expected]
    with run_query(fixture_store, QUERY) as result:
        frame = result.df()
    assert list(frame["run_key"]) == [row[0] for row in expected]
    with run_query(fixture_store, QUERY) as result:
        polars_frame = result.pl()
    assert polars_frame["status"].to_list() == [row[1] for row in expected]
    with run_query(fixture_store, "SELECT run_key FROM runs WHERE false") as result:
        assert result.arrow().num_rows == 0


@pytest.mark.parametrize(("method", "extra"), [("df", "pandas"), ("pl", "polars")])
def test_a_missing_dataframe_library_names_the_extra(monkeypatch, method, extra):
    batch = pa.record_batch({"n": [1, 2]})
    result = ResultStream(["n"], ["INTEGER"], iter([batch]), batch.schema)
    monkeypatch.setitem(sys.modules, extra, None)  # as if it were not installed
    with pytest.raises(ImportError) as caught:
        getattr(result, method)()
    assert f"pip install 'recstore[{extra}]'" in str(caught.value)
