"""The checked SQL `recstore query` remembers between runs (recstore.query.checked_cache, issue
27.1): a text runs the same the second time, without sqlglot; nothing refused is remembered, so
every hostile case is refused again exactly as the first time; an entry anyone else could have
written is not read; a change to the views or a relative time misses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recstore.errors import InputError
from recstore.query import compile_query
from recstore.query.checked_cache import CheckedCache, entry_key
from recstore.query.views import default_catalog

from .conftest import imported_modules, run_cli
from .hostile_cases import hostile_lines

# SQL outside plain_sql's subset (a CTE, a function it leaves to the guard): the guard checks it
# on the first run. Plain SQL runs without sqlglot every time and is never written.
_SQL = ("WITH a AS (SELECT agent, count(*) AS n FROM runs GROUP BY ALL) "
        "SELECT agent, n FROM a ORDER BY n DESC, agent")
_ONE = "SELECT CAST(1 AS INTEGER) AS x"
_PLAIN = "SELECT agent, count(*) AS n FROM runs GROUP BY ALL ORDER BY n DESC, agent"
_DSL = "tool_calls.all(call_index >= 0) fields run_key, agent order by run_key limit 3"  # not plain


@pytest.fixture(scope="module")
def db(fixture_store) -> str:
    return str(fixture_store.path)


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "RECSTORE_CACHE_DIR": str(cache)}


def _entries(cache: Path) -> list[Path]:
    folder = cache / "checked-sql"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_plain_text_is_never_written_and_never_needs_sqlglot(db, tmp_path):
    env = _env(tmp_path)
    first = run_cli(db, "query", _PLAIN, "--format", "csv", env=env)
    assert first.returncode == 0 and first.stdout.startswith("agent,n\n"), first.stderr
    assert _entries(tmp_path) == []
    assert "sqlglot" not in imported_modules("--db", db, "query", _PLAIN, env=env)


@pytest.mark.parametrize("text", [_SQL, _DSL, _ONE])
def test_a_text_run_again_prints_the_same_without_sqlglot(db, tmp_path, text):
    env = _env(tmp_path)
    first = run_cli(db, "query", text, "--format", "csv", env=env)
    assert first.returncode == 0, first.stderr
    assert len(_entries(tmp_path)) == 1
    assert (_entries(tmp_path)[0].stat().st_mode & 0o777) == 0o600
    assert ((tmp_path / "checked-sql").stat().st_mode & 0o777) == 0o700
    again = run_cli(db, "query", text, "--format", "csv", env=env)
    assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, first.stderr)
    assert "sqlglot" not in imported_modules("--db", db, "query", text, env=env)


_REFUSED = [t.format(out="/tmp/recstore-never") for t in hostile_lines("queries.txt")] + \
    hostile_lines("catalog-functions.txt") + hostile_lines("nested-queries.txt")


def test_every_hostile_query_is_refused_again_and_never_remembered(tmp_path):
    """compile_query with a cache is what `recstore query` runs; each refusal is the same the
    second time, and the cache stays empty."""
    cache = CheckedCache(tmp_path / "checked-sql")
    for text in _REFUSED:
        messages = []
        for _ in range(2):
            with pytest.raises(InputError) as info:
                compile_query(text, cache=cache)
            messages.append(str(info.value))
        assert messages[0] == messages[1]
        with pytest.raises(InputError) as info:
            compile_query(text)
        assert str(info.value) == messages[0]  # as without a cache
    assert _entries(tmp_path) == []


def test_the_cli_refuses_a_hostile_query_again(db, tmp_path):
    env = _env(tmp_path)
    for text in ["SELECT * FROM read_csv('/etc/passwd')", "SELECT 1; DELETE FROM runs",
                 "SELECT json_extract(payload, '$..x') FROM events"]:
        results = [run_cli(db, "query", text, env=env) for _ in range(2)]
        assert results[0].returncode == results[1].returncode == 2
        assert results[0].stderr == results[1].stderr
    assert _entries(tmp_path) == []


def test_an_entry_someone_else_could_write_is_not_read(db, tmp_path):
    env = _env(tmp_path)
    assert run_cli(db, "query", _ONE, "--format", "csv", env=env).returncode == 0
    (entry,) = _entries(tmp_path)
    entry.write_text("SELECT 2 AS x", encoding="utf-8")  # a planted SQL, as only its owner can
    planted = run_cli(db, "query", _ONE, "--format", "csv", env=env)
    assert planted.stdout.split() == ["x", "2"]  # the owner's own file is trusted ...
    entry.chmod(0o620)
    assert run_cli(db, "query", _ONE, "--format", "csv",
                   env=env).stdout.split() == ["x", "1"]  # ... one others may write is not
    entry.unlink()
    target = tmp_path / "elsewhere"
    target.write_text("SELECT 3 AS x", encoding="utf-8")
    target.chmod(0o600)
    entry.symlink_to(target)
    assert run_cli(db, "query", _ONE, "--format", "csv",
                   env=env).stdout.split() == ["x", "1"]  # nor a link


def test_a_directory_others_may_write_is_neither_read_nor_written(tmp_path):
    folder = tmp_path / "checked-sql"
    cache = CheckedCache(folder)
    key = entry_key("SELECT 1", "sql", default_catalog())
    compile_query("SELECT 1", cache=cache)
    assert cache.get(key) == "SELECT 1"
    folder.chmod(0o770)
    assert cache.get(key) is None
    compile_query("SELECT 2", cache=cache)
    assert len(list(folder.iterdir())) == 1


def test_a_relative_time_or_a_parameter_is_never_remembered(db, tmp_path):
    env = _env(tmp_path)
    assert run_cli(db, "query", "started > -7d fields run_key", env=env).returncode == 0
    assert run_cli(db, "query", "SELECT $n AS n", "--param", "n=1", env=env).returncode == 0
    assert _entries(tmp_path) == []


def test_the_key_holds_the_views_and_the_language():
    catalog = default_catalog()
    key = entry_key("runs", "sql", catalog)
    assert key != entry_key("runs", "dsl", catalog)
    assert key != entry_key("runs ", "sql", catalog)
    fewer = type(catalog)({n: v for n, v in catalog.views.items() if n != "tool_calls"})
    assert key != entry_key("runs", "sql", fewer)
