"""The store behind ``--db`` for commands that only read or extend an existing store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from recstore.errors import NotFoundError

if TYPE_CHECKING:
    from recstore.store import Store


def existing_store(ctx: click.Context) -> Store:
    """Open the ``--db`` store, or fail with one line if it has not been created yet.

    Opening a missing path would silently create an empty store, so commands that need records
    (query, compare, replay, sweep) refuse instead.
    """
    from recstore.store import Store  # deferred: keeps `recstore --help` fast

    path = Path(ctx.obj["db"])
    if not path.exists():
        raise NotFoundError(f"store {path} does not exist; ingest records first "
                            "(recstore ingest FILE...) or pass --db")
    return Store(path)
