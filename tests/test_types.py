"""The strictly typed layers type-check: mypy with pyproject's [tool.mypy] (canonical, records,
compare, query) finds nothing, so recstore's ``py.typed`` promise is kept where it is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_strict_layers_type_check() -> None:
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
         str(REPO / "pyproject.toml")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
