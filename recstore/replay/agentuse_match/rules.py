"""The matching rules agentuse documents (docs/agentuse-sessions.md §2.3, §3.1), named once:
the match key (tool + canonical arguments, keys ordered as agentuse orders them), the keys a
match ignores, the tools with special roles, the read limits and the texts agentuse prints."""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Iterable
from typing import Any

from recstore.canonical import (
    is_array_index,
    js_stringify,
)

MISMATCH_REASON = (
    "No unused recording matches this tool and its arguments before the source session's first "
    "proposal. No live call or fabrication was attempted."
)


# agentuse's own text (its store adapter), verbatim: users grep replay reports for it
STALE_LIST_REASON = (
    "Store queries after temporary writes require a complete snapshot; "
    "returning the old list would be stale."
)


NO_OUTCOME_ERROR = "Replay ended without a proposal or final output."


STRIP_INTENT = frozenset({"intent"})


STRIP_RUNTIME_KEYS = frozenset({"intent", "recovers"})


READ_TOOL = "tools__filesystem_read"


GATE_TOOL = "await_human"


OUTCOME_TOOLS = {"report_complete": "complete", "report_incomplete": "incomplete"}


TEMP_STORE = "replay-memory"


TEMP_ID_PREFIX = "replay-"


MAX_REFERENCE_BYTES = 4 * 1024 * 1024


# agentuse's read-tool limits (AGENTUSE_TOOL_MAX_LINES / _MAX_LINE_LENGTH defaults)
MAX_READ_LINES = 2000


MAX_READ_LINE = 2000


def resolve_lexically(path: str, cwd: str | None) -> str:
    """``path`` joined to ``cwd`` and normalised without touching the filesystem (§3.1 step 2):
    no symlinks, no case change, no ``~`` expansion."""
    joined = path if path.startswith("/") or not cwd else posixpath.join(cwd, path)
    normal = posixpath.normpath(joined)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def canonical_args(
    tool: str, args: Any, cwd: str | None, strip: Iterable[str] = STRIP_INTENT
) -> Any:
    """The argument half of the match key: top-level ``strip`` keys removed (nested ones are
    significant) and ``tools__filesystem_read.file_path`` resolved against ``cwd``."""
    if not isinstance(args, dict):
        return args
    drop = set(strip)
    out = {k: v for k, v in args.items() if k not in drop}
    if tool == READ_TOOL and isinstance(out.get("file_path"), str):
        out["file_path"] = resolve_lexically(out["file_path"], cwd)
    return out


def _collation_key(key: str) -> bytes:
    return unicodedata.normalize("NFD", key).encode("utf-16-be", "surrogatepass")


def agentuse_key_order(keys: list[str]) -> list[str]:
    """The key order of agentuse's canonical objects: array-index keys first in numeric order
    (JavaScript enumerates them so), then the rest sorted as ``localeCompare`` does for equality:
    canonically equivalent keys (NFC and NFD spellings) tie and keep their insertion order.
    ``__proto__`` is an ordinary key (``Object.fromEntries`` keeps it)."""
    index = sorted((k for k in keys if is_array_index(k)), key=int)
    rest = sorted((k for k in keys if not is_array_index(k)), key=_collation_key)
    return index + rest


def match_key(tool: str, args: Any, cwd: str | None, strip: Iterable[str] = STRIP_INTENT) -> str:
    """agentuse's match key: JSON of ``[tool, canonicalArgs]`` with object keys sorted at every
    depth (:func:`agentuse_key_order`), array order kept and JavaScript number formatting (so
    ``1`` equals ``1.0``)."""
    return js_stringify([tool, canonical_args(tool, args, cwd, strip)], agentuse_key_order)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# JavaScript's String.prototype.trim: WhiteSpace (Zs included) and LineTerminator code points.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it (Python's ``strip`` also removes U+001C..U+001F and
    U+0085, and keeps U+FEFF)."""
    return text.strip(_JS_SPACE)
