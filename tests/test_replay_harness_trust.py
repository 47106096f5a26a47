"""Harness files are trusted like code, but may not by accident read files outside their folder
(unless --allow-outside) or hand the openai provider an environment variable that is not an API
key. Hostile paths and variable names are data (tests/hostile/harness-*.txt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recstore.errors import InputError
from recstore.replay import load_harness
from recstore.replay.harness import parse_harness
from recstore.store import Store
from recstore.sweep.candidate import prepare_candidate
from recstore.sweep.spec import parse_spec

from .conftest import AIOC_FIXTURES
from .hostile_cases import hostile_lines
from .query_support import run_cli
from .test_replay_openai import ChatServer, completion

OUTSIDE = hostile_lines("harness-paths.txt")
NOT_API_KEYS = hostile_lines("harness-api-key-env.txt")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """tmp/h (the harness folder: prompt.md, sub/, link.md, linkdir) beside tmp/outside."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("SECRET\n")
    home = tmp_path / "h"
    (home / "sub").mkdir(parents=True)
    (home / "prompt.md").write_text("You triage tickets.\n")
    (home / "turns.json").write_text('["done"]')
    (home / "link.md").symlink_to(tmp_path / "outside" / "secret.md")
    (home / "linkdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    return home


def _harness(folder: Path, *, instructions_file: str = "prompt.md", script: str | None = None,
             provider: str = "") -> Path:
    path = folder / "harness.toml"
    provider = provider or (f'[provider]\nkind = "scripted"\nscript = {json.dumps(script)}\n'
                            if script else "")
    path.write_text('[runtime]\nentry_agent = "a"\n[agents.a]\n'
                    f'instructions_file = {json.dumps(instructions_file)}\n{provider}')
    return path


@pytest.mark.parametrize("name", OUTSIDE)
@pytest.mark.parametrize("field", ["instructions_file", "script"])
def test_a_harness_reads_no_file_outside_its_folder(folder, name, field):
    path = _harness(folder, **{field: name})
    with pytest.raises(InputError, match="is outside the harness's folder") as info:
        load_harness(path)
    assert "\n" not in str(info.value) and "`allow_outside`" in str(info.value)
    assert load_harness(path, allow_outside=True).runtime.entry_agent == "a"  # when allowed


@pytest.mark.parametrize("name", ["prompt.md", "./prompt.md", "sub/../prompt.md"])
def test_files_beside_the_harness_are_read(folder, name):
    harness = load_harness(_harness(folder, instructions_file=name, script="turns.json"))
    assert harness.materialized()["agents"]["a"]["instructions"] == "You triage tickets.\n"


def test_the_cli_refuses_an_outside_file_and_stores_nothing(folder):
    db = folder.parent / "s.duckdb"
    store = Store(db)
    store.ingest([str(AIOC_FIXTURES / "simple-run.json")])
    harness = _harness(folder, instructions_file="../outside/secret.md")
    refused = run_cli("replay", "simple-run", "--harness", str(harness), db=db)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "is outside the harness's folder" in refused.stderr
    with store.reader() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    allowed = run_cli("replay", "simple-run", "--harness", str(harness), "--allow-outside",
                      "--json", db=db)
    assert allowed.returncode in (0, 1), allowed.stderr
    assert json.loads(allowed.stdout)["replayRunKey"]


def test_a_sweep_spec_may_allow_outside_files(folder):
    harness = _harness(folder, instructions_file="../outside/secret.md")
    spec = {"name": "s", "select": {"query": "status = 'completed'"},
            "candidate": {"harness": str(harness)}}
    with pytest.raises(InputError, match="allow_outside = true under a sweep spec's"):
        prepare_candidate(parse_spec(spec, source="test"))
    spec["candidate"]["allow_outside"] = True
    assert prepare_candidate(parse_spec(spec, source="test")).harness is not None


def _openai(base_url: str, env: str) -> str:
    return (f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\napi_key_env = "{env}"\n'
            "max_retries = 0\n")


@pytest.mark.parametrize("env", NOT_API_KEYS)
def test_a_harness_may_name_only_an_api_key_variable(env):
    document = {"runtime": {"entry_agent": "a"}, "agents": {"a": {}},
                "provider": {"kind": "openai", "base_url": "http://127.0.0.1:9", "api_key_env": env}}
    with pytest.raises(InputError, match="does not name an API key variable"):
        parse_harness(document)


def test_the_key_goes_to_base_url_only_when_it_is_an_api_key(folder, monkeypatch):
    db = folder.parent / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    server = ChatServer()
    try:
        monkeypatch.setenv("RECSTORE_SECRET", "not-for-the-endpoint")
        harness = _harness(folder, provider=_openai(server.base_url, "RECSTORE_SECRET"))
        refused = run_cli("replay", "simple-run", "--harness", str(harness), db=db)
        assert refused.returncode == 2 and "does not name an API key variable" in refused.stderr
        assert server.requests == []

        monkeypatch.setenv("RECSTORE_TEST_API_KEY", "sk-the-key")
        server.reply(payload=completion("done"))
        harness = _harness(folder, provider=_openai(server.base_url, "RECSTORE_TEST_API_KEY"))
        run_cli("replay", "simple-run", "--harness", str(harness), "--mode", "live", db=db)
        assert [r["auth"] for r in server.requests] == ["Bearer sk-the-key"]
    finally:
        server.close()
