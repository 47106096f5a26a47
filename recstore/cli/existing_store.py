"""The store behind ``--db``, and the ``--lock-timeout`` option every store command takes."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from recstore.errors import NotFoundError

if TYPE_CHECKING:
    from recstore.store import Store

#: ``--lock-timeout`` defaults. Commands that only read fail at once when another process has
#: the store open (DuckDB allows one writer or many readers, never both), naming it, instead of
#: hanging behind an ingest; commands that write wait for the writer before them; a sweep run
#: waits as long as it takes, so an ingest cannot kill it halfway.
READ_WAIT = 0.0
WRITE_WAIT = 30.0
SWEEP_WAIT = math.inf


class _Seconds(click.ParamType):
    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if not seconds >= 0:
            self.fail(f"expected seconds (a number >= 0, or inf), got {value!r}", param, ctx)
        return seconds


def lock_timeout_option(default: float) -> Callable:
    """``--lock-timeout SECONDS`` (env ``RECSTORE_LOCK_TIMEOUT``) with this command's default."""
    shown = {READ_WAIT: "0: fail at once, naming the process", SWEEP_WAIT: "inf: no limit"}
    return click.option(
        "--lock-timeout", type=_Seconds(), default=default, envvar="RECSTORE_LOCK_TIMEOUT",
        show_envvar=True, metavar="SECONDS",
        help="How long to wait while another process has the store open (inf: no limit) "
             f"[default: {shown.get(default, f'{default:g}')}].")


def existing_store(ctx: click.Context, lock_timeout: float = READ_WAIT,
                   on_lock_wait: Callable[[str], None] | None = None) -> Store:
    """Open the ``--db`` store, or fail with one line if it has not been created yet.

    Opening a missing path would silently create an empty store, so commands that need records
    (query, compare, replay, sweep) refuse instead.
    """
    from recstore.store import Store  # deferred: keeps `recstore --help` fast

    if ctx.obj.get("served_store") is not None:  # run by `recstore serve` for another shell
        return ctx.obj["served_store"]
    path = Path(ctx.obj["db"])
    if not path.exists():
        raise NotFoundError(f"store {path} does not exist; ingest records first "
                            "(recstore ingest FILE...) or pass --db")
    return Store(path, lock_timeout=lock_timeout, on_lock_wait=on_lock_wait)
