"""The layering docs/DESIGN.md's map promises: a folder of recstore imports only the folders
below it in the map (or in its own row) and the leaf modules, never one above it."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "recstore"
# The map's rows, top to bottom; names in one row may import each other.
ROWS = [{"cli", "demo"}, {"serve"}, {"sweep"}, {"replay"}, {"spark", "compare"}, {"query"},
        {"store"}, {"formats"}, {"records"}, {"synth"}, {"runtime"}]
LEAVES = {"canonical", "_canonical", "errors", "jsonout", "files", "lazy", "progress", "resources",
          "templating", "process", "reaper"}
# Documented exceptions (docs/DESIGN.md): the server runs a forwarded CLI command in-process.
ALLOWED_UP = {("serve", "cli")}
_IMPORT = re.compile(r"^\s*(?:from|import) recstore\.([a-z_]+)", re.MULTILINE)


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).parts
        owner = relative[0].removesuffix(".py")
        for name in _IMPORT.findall(path.read_text(encoding="utf-8")):
            if name != owner:
                found.setdefault(owner, set()).add(name)
    return found


def test_the_map_names_every_folder_and_module():
    named = set().union(*ROWS) | LEAVES | {"__init__", "__main__"}
    present = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
               if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert present <= named, f"add {sorted(present - named)} to docs/DESIGN.md's map and ROWS"


def test_imports_point_down_the_map():
    row_of = {name: i for i, row in enumerate(ROWS) for name in row}
    upward = sorted(
        f"{owner} imports {name}"
        for owner, names in _imports().items() if owner in row_of or owner in LEAVES
        for name in names
        if name in row_of and (owner in LEAVES or row_of[name] < row_of[owner])
        and (owner, name) not in ALLOWED_UP
    )
    assert upward == []


def test_no_module_is_over_700_lines():
    """A module a newcomer can hold in their head (issue: rooms a newcomer can live in)."""
    long = {str(p.relative_to(REPO_ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}
    assert long == {}
