"""Reference reads (§3.2): read-only file grants snapshotted before generation and served
as agentuse's read tool formats them (line numbers, limits, UTF-16 lengths)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recstore.canonical import js_number
from recstore.errors import InputError
from recstore.replay.agentuse_match.recordings import ReferenceFile, TapeResult
from recstore.replay.agentuse_match.rules import (
    MAX_READ_LINE,
    MAX_READ_LINES,
    MAX_REFERENCE_BYTES,
    READ_TOOL,
    is_number,
    resolve_lexically,
)
from recstore.replay.agentuse_match.state import TapeState


def snapshot_references(paths: Sequence[str | Path], project_root: str) -> list[ReferenceFile]:
    """Snapshot explicit read-only file grants (§2.3): regular files of at most 4 MiB without NUL
    bytes, resolved against ``project_root``.

    Raises:
        InputError: a granted file is missing, not a regular file, too large or binary.
    """
    out = []
    for raw in paths:
        path = resolve_lexically(str(raw), project_root)
        p = Path(path)
        if not p.is_file():
            raise InputError("reference file is missing or not a regular file", source=path)
        data = p.read_bytes()
        if len(data) > MAX_REFERENCE_BYTES or b"\0" in data:
            raise InputError(
                "reference file is larger than 4 MiB or contains NUL bytes", source=path
            )
        out.append(
            ReferenceFile(path, hashlib.sha256(data).hexdigest(), data.decode("utf-8", "replace"))
        )
    return out


def _js_slice_bound(index: float, length: int) -> int:
    """``Array.prototype.slice``'s handling of one bound: truncated, negative from the end."""
    if index != index:  # NaN
        return 0
    if index in (math.inf, -math.inf):
        return length if index > 0 else 0
    whole = int(index)
    return max(length + whole, 0) if whole < 0 else min(whole, length)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _truncate_line(line: str, limit: int) -> str:
    """agentuse's ``truncateEnd``: the first ``limit`` UTF-16 units, without a stranded high
    surrogate, then the ``... (truncated)`` marker."""
    units = line.encode("utf-16-le", "surrogatepass")[: 2 * limit]
    head = units.decode("utf-16-le", "surrogatepass")
    if head and 0xD800 <= ord(head[-1]) <= 0xDBFF:
        head = head[:-1]
    return head + "... (truncated)"


def format_read(
    text: str,
    offset: Any = None,
    limit: Any = None,
    *,
    max_lines: int = MAX_READ_LINES,
    max_line_length: int = MAX_READ_LINE,
) -> dict:
    """A reference file read as agentuse's replay serves it: ``{"output": ...}`` with 1-based
    line numbers right-aligned to a common width and a tab, every line of ``text.split("\\n")``
    (so a trailing newline gives a last, empty line), long lines cut, and a
    ``[Reading lines a-b of N total]`` header plus a blank line when lines remain after the page.
    ``offset``/``limit`` follow JavaScript: non-numbers and 0 take the defaults."""
    start = max(1, offset or 1) if is_number(offset) else 1
    count = (limit or max_lines) if is_number(limit) else max_lines
    lines = text.split("\n")
    end = min(start + count - 1, len(lines))
    window = lines[_js_slice_bound(start - 1, len(lines)) : _js_slice_bound(end, len(lines))]
    width = len(js_number(start + len(window) - 1))
    body = "\n".join(
        js_number(start + i).rjust(width)
        + "\t"
        + (_truncate_line(line, max_line_length) if _utf16_len(line) > max_line_length else line)
        for i, line in enumerate(window)
    )
    header = (
        f"[Reading lines {js_number(start)}-{js_number(end)} of {len(lines)} total]\n\n"
        if end < len(lines)
        else ""
    )
    return {"output": header + body}


class ReadSteps(TapeState):
    """Reference reads of the tape."""

    def _reference(self, tool: str, value: Any) -> TapeResult | None:
        if (
            tool != READ_TOOL
            or not isinstance(value, dict)
            or not isinstance(value.get("file_path"), str)
        ):
            return None
        ref = self.references.get(resolve_lexically(value["file_path"], self.project_root))
        if ref is None:
            return None
        self._log(
            tool, value, "current-reference", reference={"path": ref.path, "sha256": ref.sha256}
        )
        return TapeResult(format_read(ref.text, value.get("offset"), value.get("limit")))
