"""Hostile inputs kept as data (tests/hostile/), so the next attack is one line or one file to add.

Text files hold one case per line: blank lines and lines starting with ``#`` are skipped, and
``\\n`` in a line stands for a line break inside the case and ``{N*TEXT}`` for TEXT repeated N
times (deep nesting stays one readable line).
"""

from __future__ import annotations

import re
from pathlib import Path

HOSTILE_DIR = Path(__file__).parent / "hostile"
_REPEAT = re.compile(r"\{(\d+)\*(.*?)\}")


def hostile_lines(name: str) -> list[str]:
    """The cases of ``tests/hostile/<name>``, one per non-comment line."""
    text = (HOSTILE_DIR / name).read_text(encoding="utf-8")
    return [_REPEAT.sub(lambda m: m.group(2) * int(m.group(1)), line.replace("\\n", "\n"))
            for line in text.splitlines() if line.strip() and not line.startswith("#")]


def hostile_files(folder: str) -> list[Path]:
    """The case files in ``tests/hostile/<folder>``, one case per file, by name."""
    return sorted(p for p in (HOSTILE_DIR / folder).iterdir() if not p.name.startswith("."))
