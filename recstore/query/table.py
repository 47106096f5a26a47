"""Tables for people, drawn with rich: key columns (run keys, ids, hashes) stay whole on one line
so they can be copied, the other columns wrap, widths count terminal cells (a CJK character is
two), and control characters in stored strings are shown escaped, never sent to the terminal.

Rows stream: the column widths come from the first rows, then each chunk of rows is drawn with
those widths. On a terminal the table fits its width; into a pipe or file, wrapped columns are
at most :data:`PIPE_CELL` cells wide. A single row, or ``vertical=True``, prints one
``column  value`` line per column instead. rich is imported when a table is drawn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import IO, Any

__all__ = ["PIPE_CELL", "is_key_column", "write_fields", "write_table"]

#: Widest wrapped column when the output is not a terminal.
PIPE_CELL = 48
_MIN_CELL = 8
_LAST_RESORT_CELL = 3  # when the columns cannot fit at _MIN_CELL
_GAP = 2
_CHUNK = 200
_KEY = re.compile(r"(^|_)(key|id|hash|uri)$")


def is_key_column(name: str) -> bool:
    """Columns whose values people copy whole: ``run_key``, ``*_id``, ``*_hash``, ``*_uri``."""
    return bool(_KEY.search(name.lower()))


def _fit(natural: list[int], keys: list[bool], width: int | None) -> list[int]:
    """Column widths: keys at their natural width; the others share what is left (the widest
    give way first, down to :data:`_MIN_CELL`), or are capped at :data:`PIPE_CELL` off a
    terminal."""
    widths = list(natural)
    if width is None:
        return [w if key else min(w, PIPE_CELL) for w, key in zip(widths, keys, strict=True)]
    room = width - _GAP * (len(widths) - 1)
    for floor in (_MIN_CELL, _LAST_RESORT_CELL):
        while sum(widths) > room:
            flexible = [i for i, key in enumerate(keys) if not key and widths[i] > floor]
            if not flexible:
                break
            widest = max(flexible, key=lambda i: widths[i])
            others = [widths[i] for i in flexible if i != widest]
            target = max(max(others, default=floor), floor,
                         widths[widest] - (sum(widths) - room))
            widths[widest] = target if target < widths[widest] else widths[widest] - 1
    return widths


def write_table(columns: Sequence[str], rows: Iterable[Sequence[str]], out: IO[str], *,
                width: int | None, numeric: Sequence[bool] = (), vertical: bool | None = None,
                footer: bool = True) -> int:
    """Draw ``rows`` (already text, one string per column) under ``columns``; ``width`` is the
    terminal's (``None`` off a terminal). ``vertical=None`` chooses the vertical form for a
    single row that does not fit. Returns the number of rows."""
    from rich.cells import cell_len
    from rich.console import Console

    from recstore.records.render import printable

    iterator = iter(rows)
    sample = [[printable(c) for c in row] for _, row in zip(range(_CHUNK), iterator, strict=False)]
    keys = [is_key_column(c) for c in columns]
    natural = [max([cell_len(c), *(cell_len(r[i]) for r in sample)], default=1)
               for i, c in enumerate(columns)]
    widths = _fit(natural, keys, width)
    console = Console(file=_Trimmed(out), width=width or sum(widths) + _GAP * len(widths) + 8,
                      color_system=None, highlight=False, markup=False, emoji=False,
                      soft_wrap=False)
    fits = sum(widths) == sum(natural)
    if vertical or (vertical is None and len(sample) == 1 and not fits):
        count = _vertical(console, columns, sample, iterator, width)
    else:
        count = _chunks(console, columns, sample, iterator, widths, keys, numeric)
    if footer:
        out.write(f"({count} row{'s' if count != 1 else ''})\n")
    return count


class _Trimmed:
    """A text stream that drops the spaces rich pads lines with at their ends."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.out.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return False


def _chunks(console: Any, columns: Sequence[str], sample: list[list[str]],
            rest: Iterable[Sequence[str]], widths: list[int], keys: list[bool],
            numeric: Sequence[bool]) -> int:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from recstore.records.render import printable

    def table(header: bool) -> Table:
        t = Table(box=box.SIMPLE_HEAD, show_header=header, show_edge=False, pad_edge=False,
                  padding=(0, _GAP // 2), collapse_padding=True)
        for i, (name, w) in enumerate(zip(columns, widths, strict=True)):
            right = i < len(numeric) and numeric[i]
            t.add_column(name, width=w, min_width=w if keys[i] else None, no_wrap=keys[i],
                         overflow="fold", justify="right" if right else "left")
        return t

    count, chunk, first = 0, sample, True
    while chunk:
        t = table(first)
        for row in chunk:
            t.add_row(*(Text(cell) for cell in row))
        console.print(t)
        count += len(chunk)
        first = False
        chunk = [[printable(c) for c in row] for _, row in zip(range(_CHUNK), rest, strict=False)]
    if count == 0:
        console.print(table(True))
    return count


def _fields_table(names: Sequence[str], values: Sequence[str]) -> Any:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False, padding=(0, 1))
    t.add_column(width=max((len(n) for n in names), default=1), no_wrap=True)
    t.add_column(overflow="fold")
    for name, value in zip(names, values, strict=True):
        t.add_row(Text(name), Text(value))
    return t


def _vertical(console: Any, columns: Sequence[str], sample: list[list[str]],
              rest: Iterable[Sequence[str]], width: int | None) -> int:
    from recstore.records.render import printable

    count = 0
    for row in [*sample, *([printable(c) for c in r] for r in rest)]:
        count += 1
        console.print(f"-[ row {count} ]" + "-" * max(0, min(width or 40, 40) - 12))
        console.print(_fields_table(columns, row))
    return count


def write_fields(fields: Sequence[tuple[str, str]], out: IO[str], *, width: int | None) -> None:
    """``name  value`` lines, values wrapped to ``width`` (unwrapped off a terminal) and
    control characters escaped; newlines inside a value are kept."""
    from rich.console import Console

    from recstore.records.render import printable

    console = Console(file=_Trimmed(out), width=width or 10_000, color_system=None,
                      highlight=False, markup=False, emoji=False, soft_wrap=False)
    console.print(_fields_table([n for n, _ in fields],
                                [printable(v, keep="\n") for _, v in fields]))
