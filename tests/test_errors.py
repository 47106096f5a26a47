"""The error tree lives in one module (recstore/errors.py), and library messages name
parameters as the library spells them, which the CLI turns into its flags."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import pytest

import recstore
from recstore import errors
from recstore.compare.pairing import PairBy, pair_runs
from recstore.errors import InputError, RecstoreError
from recstore.query import run_query
from recstore.query.dsl import compile_dsl_tree
from recstore.query.guard import guard_sql
from recstore.query.saved import load_saved
from recstore.query.views import default_catalog
from recstore.store import Store
from tests.conftest import AIOC_FIXTURES, run_cli


def _exception_classes():
    for info in pkgutil.walk_packages(recstore.__path__, "recstore."):
        if info.name.endswith("__main__") or info.name == "recstore.reaper":
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                yield cls


def test_every_error_a_caller_can_get_is_defined_in_recstore_errors():
    """A RecstoreError is what reaches a library caller or the CLI; other exceptions here are
    the agent runtime's (AgentRunError, recorded into runs as aioc's are) or internal signals."""
    stray = [f"{cls.__module__}.{cls.__qualname__}" for cls in _exception_classes()
             if issubclass(cls, RecstoreError) and cls.__module__ != errors.__name__]
    assert stray == []


def test_every_error_in_the_tree_but_json_parse_is_a_recstore_error():
    defined = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
               if issubclass(cls, BaseException) and cls.__module__ == errors.__name__]
    assert {cls.__name__ for cls in defined if not issubclass(cls, RecstoreError)} == \
        {"JSONParseError"}


def test_a_dsl_error_keeps_line_and_column_as_data():
    with pytest.raises(errors.DslError) as caught:
        compile_dsl_tree("status = 'x' and\n  nosuch_column > 1")
    assert (caught.value.line, caught.value.column) == (2, 3)
    assert "line 2, column 3" in str(caught.value)
    with pytest.raises(errors.DslError) as unbound:  # a missing value: the parameter, as data
        compile_dsl_tree("status = 'x'\n  and agent = $who")
    assert (unbound.value.line, unbound.value.column, unbound.value.param) == (2, 15, "params")
    assert "give who=... in `params`" in str(unbound.value)


def test_library_messages_name_parameters_and_the_cli_names_flags(tmp_path):
    with pytest.raises(InputError) as caught:
        PairBy.parse("colour")
    assert "`pair_by` 'colour'" in str(caught.value) and "--pair-by" not in str(caught.value)
    with pytest.raises(InputError, match="`duplicates` 'newest'"):
        pair_runs(None, None, None, None, duplicates="newest")  # type: ignore[arg-type]
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    done = run_cli(db, "compare", "--baseline", "status = 'completed'",
                   "--candidate", "status = 'failed'", "--pair-by", "colour")
    assert done.returncode == 2
    assert "--pair-by 'colour'" in done.stderr and "`" not in done.stderr


# --- no library error names a CLI flag ---------------------------------------------------------

_FLAG = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*")


def _error_names() -> set[str]:
    return {name for name, cls in inspect.getmembers(errors, inspect.isclass)
            if issubclass(cls, BaseException)} | {"ValueError", "TypeError"}


def _is_error_text(node: ast.AST, names: set[str]) -> bool:
    """A raise, the construction of an error, a parser's ``fail(...)``, or a reject's
    ``error=`` reason: the places whose strings reach a user as an error."""
    if isinstance(node, ast.Raise):
        return True
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    called = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else ""
    return called in names or called == "fail" or any(k.arg == "error" for k in node.keywords)


def _flags_in_library_errors() -> list[str]:
    names = _error_names()
    found = []
    library = Path(recstore.__file__).parent
    for path in sorted(library.rglob("*.py")):
        if path.relative_to(library).parts[0] == "cli":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not _is_error_text(node, names):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    for flag in _FLAG.findall(inner.value):
                        found.append(f"{path.relative_to(library.parent)}:{inner.lineno}: {flag}")
    return sorted(set(found))


def test_no_library_error_names_a_cli_flag():
    """Library errors name parameters (`max_record_bytes`); only recstore/cli/ spells flags."""
    assert _flags_in_library_errors() == []


def test_a_library_error_carries_its_parameter_and_the_cli_spells_it_as_the_flag(tmp_path):
    """The library says `columns` / `params` and carries the name as data; the real CLI prints
    the flag the user typed, for the command that ran, or names the command that has it."""
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.ingest([str(AIOC_FIXTURES / "simple-run.json")])
    with run_query(store, "SELECT 1 AS a") as result, pytest.raises(InputError) as caught:
        result.select(["b"])
    assert (caught.value.param, str(caught.value)) == ("columns", "`columns`: no column 'b'; "
                                                                  "the result has a")
    with pytest.raises(InputError, match="`params`: @slowest-runs has no parameter 'nope'"):
        load_saved("slowest-runs").bind({"nope": "1"})

    columns = run_cli(db, "query", "SELECT 1 AS a", "--columns", "b")
    assert (columns.returncode, columns.stderr) == (
        2, "recstore: error: --columns: no column 'b'; the result has a\n")
    param = run_cli(db, "query", "@slowest-runs", "--param", "nope=1")
    assert param.returncode == 2
    assert param.stderr.startswith("recstore: error: --param: @slowest-runs has no parameter")

    big = tmp_path / "big.json"
    big.write_text(json.dumps({"runId": "x" * 3000}) + "\n", encoding="utf-8")
    ingest = run_cli(db, "ingest", str(big), "--max-record-bytes", "1000")
    assert "(raise it with --max-record-bytes)" in ingest.stderr  # the reject's stored reason
    listed = run_cli(db, "rejects")  # a command without the flag names the one that has it
    assert "(raise it with recstore ingest --max-record-bytes)" in listed.stdout
    assert "`" not in columns.stderr + param.stderr + ingest.stderr + listed.stdout


def test_sql_that_does_not_parse_keeps_line_and_column_as_data():
    with pytest.raises(errors.QueryRefused) as caught:
        guard_sql("SELECT 1\nFROM runs WHERE (", default_catalog())
    assert (caught.value.line, caught.value.column) == (2, 17)
    assert "at line 2, column 17" in str(caught.value)
