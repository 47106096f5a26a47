"""Locate the files recstore ships beside its package: ``schema/`` (DDL, JSON Schemas) and
``queries/`` (saved queries).

The top-level folders of the repository are the source of truth. Building the package copies them
into ``recstore/_data/`` (see setup.py), so an install of any kind (wheel, ``pip install
--target``) finds them as package data; a checkout or editable install has no copy and reads the
top-level folders."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent


def resource_dir(name: str) -> Path:
    """Directory of shipped resource ``name`` (``"schema"`` or ``"queries"``)."""
    packaged = files("recstore") / "_data" / name
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    # Only a checkout has pyproject.toml beside the package; in site-packages a folder named
    # like ours may belong to another distribution.
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / name).is_dir():
        return _CHECKOUT / name
    raise FileNotFoundError(f"recstore resource directory {name!r} is missing from this install")
