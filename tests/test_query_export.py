"""``recstore export DIR``: a new, empty or earlier-export folder only; never deletes a folder
recstore did not write; owner-only files. Hostile folder layouts are data
(tests/hostile/export-folders.txt)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from recstore.query.export import MANIFEST, MANIFEST_FORMAT
from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES
from .hostile_cases import hostile_lines
from .query_support import run_cli


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("store") / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    return store


def _view_names(store: Store) -> list[str]:
    """The views an export writes: the public ones and the comparison's features."""
    from recstore.query.views import layout_catalog

    with store.reader() as con:
        return layout_catalog(con).names()


def _lay_out(root: Path, spec: str, views: list[str]) -> Path:
    """Build the folder one line of export-folders.txt describes; return DIR."""
    outside = root / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "folder" / "keep.txt").write_text("the user's data\n")
    directory = root / "dir"
    for entry in spec.split():
        name, _, rest = entry.partition("@") if "@" in entry[1:] else (entry, "", "")
        if entry.startswith("@"):
            kind, _, listed = entry[1:].partition("=")
            directory.mkdir(exist_ok=True)
            document = ({"format": MANIFEST_FORMAT, "views": listed.split(",") if listed else views}
                        if kind == "manifest" else {"format": "something-else"})
            (directory / MANIFEST).write_text(json.dumps(document))
        elif entry == ".=file":
            directory.write_text("a file where the folder should be\n")
        elif rest:
            if name != ".":
                directory.mkdir(exist_ok=True)
            link = directory if name == "." else directory / name
            link.symlink_to(outside / rest, target_is_directory=True)
        else:
            path = directory / name
            if name.endswith("/"):
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("the user's data\n")
    return directory


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind, content or link target, mode."""
    seen = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = ("dir", path.stat().st_mode)
            else:
                seen[rel] = ("file", path.read_bytes(), path.stat().st_mode)
    return seen


@pytest.mark.parametrize("spec", hostile_lines("export-folders.txt"))
@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_export_refuses_a_folder_it_did_not_write(small_store, tmp_path, spec, overwrite):
    directory = _lay_out(tmp_path, spec, _view_names(small_store))
    before = _snapshot(tmp_path)
    result = run_cli("export", str(directory), *(["--overwrite"] if overwrite else []),
                     db=small_store.path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("recstore: error: ") and result.stderr.count("\n") == 1, \
        result.stderr
    assert _snapshot(tmp_path) == before


def test_export_into_a_new_folder_is_owner_only_and_marked(small_store, tmp_path):
    directory = tmp_path / "new" / "export"
    result = run_cli("export", str(directory), "--json", db=small_store.path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((directory / MANIFEST).read_text())
    assert manifest["complete"] is True
    assert sorted(manifest["views"]) == sorted(_view_names(small_store))
    assert manifest["rows"]["runs"] == len(AIOC_RECORD_NAMES)
    for path in [directory.parent, *directory.rglob("*"), directory]:
        mode = path.stat().st_mode & 0o777
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_an_earlier_export_is_replaced_only_with_overwrite(small_store, tmp_path):
    directory = tmp_path / "export"
    directory.mkdir()  # an empty folder of the user's is fine
    assert run_cli("export", str(directory), db=small_store.path).returncode == 0
    (directory / "notes.txt").write_text("mine\n")
    (directory / "runs" / "stale.parquet").write_text("left by the earlier export\n")

    again = run_cli("export", str(directory), db=small_store.path)
    assert again.returncode == 2
    assert "pass --overwrite to replace it" in again.stderr

    replaced = run_cli("export", str(directory), "--overwrite", db=small_store.path)
    assert replaced.returncode == 0, replaced.stderr
    assert (directory / "notes.txt").read_text() == "mine\n"  # not an exported view: kept
    assert not (directory / "runs" / "stale.parquet").exists()
    assert json.loads((directory / MANIFEST).read_text())["complete"] is True
