"""The CLI starts without importing what its commands need: ``--version`` and ``--help`` load no
heavy library, and the command table that ``--help`` reads agrees with the commands themselves.
(How fast it starts is measured by benchmarks/bench_startup.py, not asserted here.)"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import recstore
import recstore.cli
from recstore.cli import COMMANDS, cli

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, REPO_ROOT, imported_modules

# Libraries that cost tens to hundreds of milliseconds to import; no start-up path needs them.
HEAVY = {"duckdb", "pyarrow", "sqlglot", "pydantic", "orjson", "yaml", "croniter", "pyspark"}


def python_output(code: str) -> str:
    """What ``python -c code`` prints (it must succeed), stripped."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("args", [["--version"], ["--help"]], ids=" ".join)
def test_start_up_imports_no_heavy_library_and_no_command(args):
    modules = imported_modules(*args)
    assert "click" in modules  # the parse is right: the CLI's own dependency shows up
    assert not {m for m in modules if m.split(".")[0] in HEAVY}
    assert not {m for m, _ in COMMANDS.values()} & modules


def test_a_command_loads_its_module_on_use():
    modules = imported_modules("schema", "--help")
    assert "recstore.cli.query_cmds" in modules
    assert "recstore.cli.sweep_cmds" not in modules


def test_the_command_table_matches_the_commands():
    """Every command module's commands are in COMMANDS, under the module that registers them and
    with the first sentence of their help, so `recstore --help` shows what the commands say."""
    for info in pkgutil.iter_modules(recstore.cli.__path__, "recstore.cli."):
        importlib.import_module(info.name)
    assert sorted(cli.commands) == sorted(COMMANDS)
    for name, command in cli.commands.items():
        module, short_help = COMMANDS[name]
        assert command.callback.__module__ == module, name
        assert command.get_short_help_str(limit=10**6) == short_help, name


def test_help_lists_every_command():
    result = subprocess.run([sys.executable, "-m", "recstore", "--help"], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=60)
    listed = result.stdout.split("Commands:", 1)[1].splitlines()
    assert [line.split()[0] for line in listed if line.strip()] == sorted(COMMANDS)
    for name, (_, short_help) in COMMANDS.items():
        assert f"  {name} " in result.stdout and short_help[:40] in result.stdout, name


def test_an_unknown_command_is_one_clear_error():
    result = subprocess.run([sys.executable, "-m", "recstore", "ingets"], capture_output=True,
                            text=True, cwd=REPO_ROOT, timeout=60)
    assert result.returncode == 2
    assert "No such command 'ingets'" in result.stderr


def test_public_names_load_on_first_use():
    code = ("import sys, recstore; assert 'duckdb' not in sys.modules; "
            "from recstore import Store, canonical_json; "
            "assert 'duckdb' in sys.modules and Store.__name__ == 'Store'; "
            "print(canonical_json({'b': 1, 'a': 2}))")
    assert python_output(code) == '{"a":2,"b":1}'
    assert set(recstore.__all__) <= set(dir(recstore))
    with pytest.raises(AttributeError, match="no attribute 'Stor'"):
        recstore.Stor  # noqa: B018 - the attribute access is the test


def test_a_command_stores_without_importing_pandas(tmp_path):
    """pyarrow would import pandas (0.3-0.5 s) on its first list conversion; the CLI answers
    that probe, so an ingest (which stages Arrow tables) never loads pandas."""
    record = AIOC_FIXTURES / f"{AIOC_RECORD_NAMES[0]}.json"
    modules = imported_modules("--db", str(tmp_path / "runs.duckdb"), "ingest", str(record))
    assert "pyarrow" in modules
    assert not {m for m in modules if m.startswith("pandas.")}


def test_pandas_stays_usable_after_the_probe():
    code = ("import sys, pyarrow as pa; from recstore.cli import answer_pyarrow_pandas_probe; "
            "answer_pyarrow_pandas_probe(); pa.table({'a': [1]}); "
            "assert 'pandas' not in sys.modules; "
            "print(type(pa.table({'a': [1, 2]}).to_pandas()).__name__)")
    assert python_output(code) == "DataFrame"
