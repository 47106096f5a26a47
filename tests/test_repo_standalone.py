"""A clone of the repository stands alone: no file in it names a path outside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import REPO_ROOT

SCANNED = ["recstore", "tests", "benchmarks", "docs", "queries", "schema", ".ci"]
SCANNED_FILES = ["README.md", "pyproject.toml"]
SUFFIXES = {".py", ".md", ".sql", ".toml", ".json", ".dsl", ".sh", ""}

# Paths that only exist beside a developer's checkout: the reference folder next to it and the
# workspace it lives in. Spelled in pieces so that this file, which is checked too, does not
# itself name them.
_BESIDE = "sha" + "red"
_WORKSPACE = "/" + "work"
OUTSIDE = re.compile(rf"\.\./{_BESIDE}\b|\b{_BESIDE}/(?:fixtures|docs)\b"
                     rf"|{_WORKSPACE}/(?:main|{_BESIDE})\b")
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def _files() -> list[Path]:
    files = [REPO_ROOT / name for name in SCANNED_FILES]
    for top in SCANNED:
        for path in (REPO_ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "fixtures" not in path.parts:
                files.append(path)
    return files


def _escapes_repo(path: Path, text: str) -> list[str]:
    """``Path(__file__).resolve().parents[n]`` that climbs above the repository root."""
    root_index = len(path.relative_to(REPO_ROOT).parts) - 1  # parents[root_index] is the root
    return [m.group(0) for m in PARENTS.finditer(text) if int(m.group(1)) > root_index]


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_path_outside_the_repository(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    assert not OUTSIDE.findall(text), f"{path} names a path outside the repository"
    assert not _escapes_repo(path, text), f"{path} climbs above the repository root"


def test_the_checker_finds_an_outside_path(tmp_path):
    """The check above can fail: it flags both kinds of reference."""
    assert OUTSIDE.search(f'ROOT = HERE / "../{_BESIDE}/fixtures"')
    assert OUTSIDE.search(f"see {_WORKSPACE}/{_BESIDE}/docs/STYLE.md")
    nested = REPO_ROOT / "benchmarks" / "x.py"
    climb = "Path(__file__).resolve().parents"
    assert _escapes_repo(nested, f"{climb}[{2}]")
    assert not _escapes_repo(nested, f"{climb}[{1}]")


def test_fixtures_are_in_the_repository():
    fixtures = REPO_ROOT / "tests" / "fixtures"
    assert (fixtures / "aioc" / "expected-aioc-0.2.8.json").is_file()
    assert (fixtures / "aioc" / "corpus-dev" / "corpus-baseline.ndjson.gz").is_file()
    assert (fixtures / "agentuse" / "data" / "agentuse" / "project").is_dir()
