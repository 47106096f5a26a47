"""Locate the files recstore ships beside its package: ``schema/`` (DDL, JSON Schemas) and
``queries/`` (saved queries). A checkout or editable install reads them from the repository;
a regular install reads the copies under ``<prefix>/share/recstore``."""

from __future__ import annotations

import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent


def resource_dir(name: str) -> Path:
    """Directory of shipped resource ``name`` (``"schema"`` or ``"queries"``)."""
    for candidate in (_REPO_ROOT / name, Path(sys.prefix) / "share" / "recstore" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"recstore resource directory {name!r} is missing from this install")
