"""Hostile inputs kept as data (tests/hostile/), so the next attack is one line or one file to add.

Text files hold one case per line: blank lines and lines starting with ``#`` are skipped, and
``\\n`` in a line stands for a line break inside the case.
"""

from __future__ import annotations

from pathlib import Path

HOSTILE_DIR = Path(__file__).parent / "hostile"


def hostile_lines(name: str) -> list[str]:
    """The cases of ``tests/hostile/<name>``, one per non-comment line."""
    text = (HOSTILE_DIR / name).read_text(encoding="utf-8")
    return [line.replace("\\n", "\n") for line in text.splitlines()
            if line.strip() and not line.startswith("#")]


def hostile_files(folder: str) -> list[Path]:
    """The case files in ``tests/hostile/<folder>``, one case per file, by name."""
    return sorted(p for p in (HOSTILE_DIR / folder).iterdir() if not p.name.startswith("."))
