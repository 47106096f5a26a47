"""What a writer reads of the store's schema before it places records, in fewer queries: the
same answers as the per-table queries it replaced."""

from __future__ import annotations

import duckdb
import pytest

from recstore.store import Store, db
from recstore.store.chunks import store_schema
from recstore.store.projection import PROJECTION_TABLES
from recstore.store.tables import table_columns, tables_column_types


def test_store_schema_is_every_projection_table_s_columns_in_order(tmp_path):
    with Store(tmp_path / "s.duckdb").writer() as con:
        schema = store_schema(con)
        assert list(schema) == list(PROJECTION_TABLES)
        for table in PROJECTION_TABLES:
            assert list(schema[table].items()) == table_columns(con, table)


def test_tables_column_types_names_a_missing_table(tmp_path):
    with Store(tmp_path / "s.duckdb").writer() as con, pytest.raises(
        LookupError, match="'nope' does not exist"
    ):
        tables_column_types(con, ["proj_runs", "nope"])


def test_tables_column_types_reads_only_the_store_s_own_catalog(tmp_path):
    with Store(tmp_path / "s.duckdb").writer() as con:
        con.execute("ATTACH ':memory:' AS other")
        con.execute("CREATE TABLE other.proj_runs (x INTEGER)")
        assert tables_column_types(con, ["proj_runs"]) == {
            "proj_runs": dict(table_columns(con, "proj_runs"))}


def test_stored_version_is_0_without_meta_and_the_version_with_it(tmp_path):
    with duckdb.connect() as con:
        assert db.stored_version(con) == 0
    with Store(tmp_path / "s.duckdb").writer() as con:
        assert db.stored_version(con) == db.schema_files()[-1][0]
