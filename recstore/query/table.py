"""Tables for people: one line per row, never a value wrapped across lines. Key columns (run keys,
ids, hashes) and short ones (numbers, timestamps, text of at most :data:`MIN_TEXT` cells) stay
whole so they can be read and copied; long text takes the room that is left and is cut with
``…``. When even that does not fit the width, the columns that do not fit are left out and a
footer names them. Widths count terminal cells (a CJK character is two), and control
characters in stored strings are shown escaped, never sent to the terminal.

Rows stream: the column widths come from the first rows, then every row is drawn with those
widths. Off a terminal (``width=None``) no column is left out and long text is cut at
:data:`PIPE_CELL` cells. ``vertical=True``, a single row that does not fit, or a first column
wider than the terminal prints one ``column  value`` block per row instead, every value whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import IO, Any, cast

from recstore.records.render import clip, printable

__all__ = ["MIN_TEXT", "PIPE_CELL", "Layout", "fit_columns", "is_key_column", "write_fields",
           "write_table"]

#: Widest long-text column when the output is not a terminal.
PIPE_CELL = 48
#: Narrowest a long-text column is cut to (or its header's width, if wider).
MIN_TEXT = 12
_GAP = 2
_CHUNK = 200
_KEY = re.compile(r"(^|_)(key|id|hash|uri)$")
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d([ T]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d(:?\d\d)?)?")


def is_key_column(name: str) -> bool:
    """Columns whose values people copy whole: ``run_key``, ``*_id``, ``*_hash``, ``*_uri``."""
    return bool(_KEY.search(name.lower()))


@dataclass(frozen=True)
class Layout:
    """Which columns a table shows and how wide each is (cells), in the columns' order."""

    shown: list[int]
    widths: list[int]
    dropped: list[int]
    keys: list[bool]  # per shown column: never cut
    cut: bool  # some shown column is narrower than its widest value


def fit_columns(columns: Sequence[str], sample: Sequence[Sequence[str]], width: int | None, *,
                numeric: Sequence[bool] = ()) -> Layout | None:
    """Lay out ``columns`` for rows like ``sample`` (printable text) in ``width`` cells, or
    ``None`` when not even the first column fits. Keys, numbers, timestamps and short text are
    whole; long text gets at least :data:`MIN_TEXT` cells and shares what is left. Columns are
    kept left to right while they fit; the rest are dropped."""
    from rich.cells import cell_len

    natural = [max([cell_len(name), *(cell_len(row[i]) for row in sample)])
               for i, name in enumerate(columns)]
    keys = [is_key_column(name) for name in columns]
    whole = [keys[i] or (i < len(numeric) and numeric[i]) or natural[i] <= MIN_TEXT
             or _timestamps(row[i] for row in sample) for i in range(len(columns))]
    floor = [natural[i] if whole[i] else max(MIN_TEXT, cell_len(name))
             for i, name in enumerate(columns)]
    if width is None:
        widths = [n if whole[i] else min(n, max(PIPE_CELL, floor[i]))
                  for i, n in enumerate(natural)]
        return Layout(list(range(len(columns))), widths, [], keys, widths != natural)
    shown: list[int] = []
    used = 0
    for i in range(len(columns)):
        need = floor[i] + (_GAP if shown else 0)
        if used + need <= width:
            shown.append(i)
            used += need
        elif not shown:
            return None
    widths = _share([floor[i] for i in shown], [natural[i] for i in shown], width - used)
    return Layout(shown, widths, [i for i in range(len(columns)) if i not in shown],
                  [keys[i] for i in shown], widths != [natural[i] for i in shown])


def _timestamps(values: Iterable[str]) -> bool:
    """Every non-empty value reads as an ISO date or timestamp (and there is one)."""
    seen = False
    for value in values:
        if value:
            if not _TIMESTAMP.fullmatch(value):
                return False
            seen = True
    return seen


def _share(widths: list[int], natural: list[int], room: int) -> list[int]:
    """Grow ``widths`` towards ``natural`` by ``room`` cells in all, evenly, so the narrower
    columns reach their natural width first."""
    widths = list(widths)
    while room > 0:
        growable = sorted((i for i, w in enumerate(widths) if w < natural[i]),
                          key=lambda i: natural[i] - widths[i])
        if not growable:
            break
        for n, i in enumerate(growable):
            add = min(natural[i] - widths[i], max(1, room // (len(growable) - n)), room)
            widths[i] += add
            room -= add
    return widths


def write_table(columns: Sequence[str], rows: Iterable[Sequence[str]], out: IO[str], *,
                width: int | None, numeric: Sequence[bool] = (),
                vertical: bool | None = None) -> int:
    """Draw ``rows`` (already text, one string per column) under ``columns``; ``width`` is the
    terminal's (``None`` off a terminal). ``vertical=None`` chooses the vertical form for a
    single row that does not fit. Returns the number of rows."""
    columns = [printable(c) for c in columns]
    iterator = iter(rows)
    sample = [[printable(c) for c in row] for _, row in zip(range(_CHUNK), iterator, strict=False)]
    layout = fit_columns(columns, sample, width, numeric=numeric)
    crowded = layout is None or layout.cut or layout.dropped
    if vertical or layout is None or (vertical is None and len(sample) == 1 and crowded):
        count = _vertical(out, columns, sample, iterator, width)
    else:
        right = [i < len(numeric) and numeric[i] for i in range(len(columns))]
        count = _lines(out, columns, sample, iterator, layout, right)
        if layout.dropped:
            out.write(_dropped_note([columns[i] for i in layout.dropped], width) + "\n")
    out.write(f"({count} row{'s' if count != 1 else ''})\n")
    return count


def _lines(out: IO[str], columns: Sequence[str], sample: list[list[str]],
           rest: Iterator[Sequence[str]], layout: Layout, right: list[bool]) -> int:
    """Header, rule and one line per row; returns the row count."""
    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            _cell(cells[i], w, right[i], whole=key)
            for i, w, key in zip(layout.shown, layout.widths, layout.keys, strict=True)
        ).rstrip()

    out.write(line(columns) + "\n")
    out.write("─" * (sum(layout.widths) + _GAP * (len(layout.widths) - 1)) + "\n")
    count = 0
    for row in sample:
        out.write(line(row) + "\n")
        count += 1
    for raw in rest:
        out.write(line([printable(c) for c in raw]) + "\n")
        count += 1
    return count


def _cell(text: str, width: int, right: bool, *, whole: bool) -> str:
    """``text`` in ``width`` cells: cut with ``…`` when longer (never a key: a later row's
    longer key is printed whole, as it must be copyable, past the table's edge)."""
    from rich.cells import cell_len

    shown = text if whole else clip(text, width)
    pad = " " * max(0, width - cell_len(shown))
    return pad + shown if right else shown + pad


def _dropped_note(names: list[str], width: int | None) -> str:
    """``+N columns (a, b, …): --vertical or --columns``, naming as many as fit ``width``
    (none, in a very narrow terminal)."""
    from rich.cells import cell_len

    head = f"+{len(names)} column{'s' if len(names) != 1 else ''}"
    tail = ": --vertical or --columns"
    for keep in range(len(names), 0, -1):
        listed = ", ".join([*names[:keep], *(["…"] if keep < len(names) else [])])
        note = f"{head} ({listed}){tail}"
        if width is None or cell_len(note) <= width:
            return note
    return clip(head + tail, width or 0)


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


def _console(out: IO[str], width: int | None) -> Any:
    from rich.console import Console

    # _Trimmed has the two methods rich calls (write, flush), not all of IO's
    return Console(file=cast(IO[str], _Trimmed(out)), width=width or 10_000, color_system=None,
                   highlight=False, markup=False, emoji=False, soft_wrap=False)


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


def _vertical(out: IO[str], columns: Sequence[str], sample: list[list[str]],
              rest: Iterable[Sequence[str]], width: int | None) -> int:
    """One ``column  value`` block per row, every value whole (folded at the width)."""
    console = _console(out, width)
    count = 0
    for row in chain(sample, ([printable(c) for c in r] for r in rest)):
        count += 1
        label = f"-[ row {count} ]"
        console.print(label + "-" * max(0, min(width or 40, 40) - len(label) - 2))
        console.print(_fields_table(columns, row))
    return count


def write_fields(fields: Sequence[tuple[str, str]], out: IO[str], *, width: int | None) -> None:
    """``name  value`` lines, values wrapped to ``width`` (unwrapped off a terminal) and
    control characters escaped; newlines inside a value are kept."""
    names, values = [n for n, _ in fields], [printable(v, keep="\n") for _, v in fields]
    lines = _unwrapped_fields(names, values, width)
    if lines is None:  # a line to wrap: rich's table wraps it
        _console(out, width).print(_fields_table(names, values))
    else:
        out.write(lines)


def _unwrapped_fields(names: Sequence[str], values: Sequence[str], width: int | None
                      ) -> str | None:
    """What rich prints for :func:`_fields_table` when no line needs wrapping (None when one
    does): the name column, three spaces, the value, trailing spaces dropped. Spares `show`
    rich's console (issue 27.1); tests/test_table_fit.py checks it against rich."""
    from rich.cells import cell_len

    indent = max((len(n) for n in names), default=1) + 3
    lines = []
    for name, value in zip(names, values, strict=True):
        for i, line in enumerate(value.split("\n")):
            if width is not None and indent + cell_len(line) >= width:
                return None
            lines.append(((name.ljust(indent) if i == 0 else " " * indent) + line).rstrip())
    return "".join(f"{line}\n" for line in lines)
