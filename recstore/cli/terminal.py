"""What the CLI shows people: the one progress display, handed to the library as its
:class:`~recstore.progress.Progress` (a rich progress bar with totals and ETA on a terminal, a
plain line every ``RECSTORE_PROGRESS_SECONDS`` (default 10) when stderr is not one, nothing with
``--quiet``), the ``wrote PATH`` line, the table options and the width tables fit. rich is
imported only when a bar is drawn."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import click

from recstore.errors import InputError

__all__ = [
    "CliProgress", "columns_for", "columns_option", "name_values", "quiet_option", "say",
    "table_width", "vertical_option", "width_option", "wrote",
]

quiet_option = click.option("--quiet", "-q", is_flag=True,
                            help="Show no progress display and no 'wrote FILE' line.")
columns_option = click.option(
    "--columns", metavar="A,B,...", callback=lambda _ctx, _param, v: [
        c.strip() for c in v.split(",") if c.strip()] if v else None,
    help="Show only these columns, in this order.")
vertical_option = click.option(
    "--vertical", is_flag=True,
    help="One 'column  value' block per row (a single row that does not fit prints so anyway).")


width_option = click.option(
    "--width", type=click.IntRange(min=20), metavar="N",
    help="Fit the table to N columns. Default: the terminal's width; piped or to a file, "
    "$COLUMNS when set, else unlimited (long text cut at 48 cells).")


def table_width(width: int | None, stream: IO[str] | None) -> int | None:
    """The width a table fits: ``--width``, else the terminal's when ``stream`` is one, else
    (a pipe, or a file: ``stream`` None) ``$COLUMNS`` when it is a positive number, else
    ``None`` (no limit)."""
    if width is not None:
        return width
    if stream is not None and stream.isatty():
        return shutil.get_terminal_size().columns  # $COLUMNS first, as the shell's
    columns = getattr(_THREAD, "columns", None)
    if columns is None:
        columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


_THREAD = threading.local()


@contextmanager
def columns_for(columns: str | None) -> Iterator[None]:
    """``$COLUMNS`` for :func:`table_width` in this thread only: the server runs commands for
    other shells in parallel, each with its own shell's width (``""``: none)."""
    _THREAD.columns = columns or ""
    try:
        yield
    finally:
        _THREAD.columns = None


def wrote(path: str | Path, *, quiet: bool = False) -> None:
    """Tell people on stderr where a command wrote a file or folder (stdout stays the result);
    nothing with ``--quiet``."""
    if not quiet:
        say(f"wrote {path}", err=True)


def name_values(pairs: tuple[str, ...], option: str, name: str = "NAME") -> list[tuple[str, str]]:
    """``NAME=VALUE`` option values as (name, value) pairs (names stripped); one error names the
    malformed one."""
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"expected {name}=VALUE, got {pair!r}", source=option)
        out.append((key.strip(), value))
    return out


def say(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print text for people: control characters from stored strings arrive escaped."""
    from recstore.records.render import printable

    click.echo(printable(text, keep="\n"), err=err, nl=nl)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class CliProgress:
    """``update(done, total)`` drawn for people; use as a context manager (closes the bar)."""

    def __init__(self, label: str, *, quiet: bool = False, stream: IO[str] | None = None,
                 detail: Callable[[], str] | None = None):
        self.label = label
        self.detail = detail  # more to show after the count (model requests in flight, ...)
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.interval = float(os.environ.get("RECSTORE_PROGRESS_SECONDS") or 10)
        self._start = self._last = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> CliProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, done: int, total: int | None = None) -> None:
        if self.quiet:
            return
        if self.tty:
            self._draw(done, total)
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self.stream.write(self.line(done, total, now - self._start) + "\n")
            self.stream.flush()

    def line(self, done: int, total: int | None, elapsed: float) -> str:
        """The plain progress line: count, share, rate and time left when the total is known."""
        rate = done / elapsed if elapsed > 0 else 0.0
        text = f"{self.label}: {done:,}"
        if total:
            text += f" of {total:,} ({100 * done / total:.0f}%)"
        text += f", {rate:,.1f}/s, {_duration(elapsed)} elapsed"
        if total and rate > 0 and done < total:
            text += f", about {_duration((total - done) / rate)} left"
        extra = self.detail() if self.detail else ""
        return f"{text}; {extra}" if extra else text

    def _draw(self, done: int, total: int | None) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=total)
        extra = self.detail() if self.detail else ""
        description = f"{self.label} ({extra})" if extra else self.label
        self._bar.update(self._task, completed=done, total=total, description=description)

    def phase(self, label: str) -> None:
        """A new stage of the work: its own label, count, rate and time left."""
        self.close()
        self.label = label
        self._start = self._last = time.monotonic()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
