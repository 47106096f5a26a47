"""The log's hash chain: one hash per batch, linked to the previous batch's.

A batch hash covers every event and stream row the batch appended, in order, so rewriting,
dropping, adding or reordering anything in the log breaks the chain. One hash per batch (not per
event) keeps the log compact: per-event hashes were 64 incompressible bytes twice per event.
The digests are defined so DuckDB can recompute them in SQL (``sha256(string_agg(...))``),
which is how ``recstore verify`` checks a store without reading it through Python.

Example:
    >>> d = Digest()
    >>> d.add_joined(line_digests("aioc:r", 1, [("run_started", None, None, "{}")]), 1)
    >>> h = batch_hash(None, 1, 1, d.hexdigest(), EMPTY_DIGEST)
    >>> len(h)
    32
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "EMPTY_DIGEST",
    "EVENTS_DIGEST_SQL",
    "EVENT_LINE_SQL",
    "STREAM_LINE_SQL",
    "Digest",
    "batch_hash",
    "line_digests",
]

#: Records an ingest commits per batch (one chain hash each) unless told otherwise; here, not in
#: the ingest, so the CLI can show it as a default without importing the ingest machinery.
DEFAULT_BATCH_SIZE = 2000

_FIELD = "\x1f"
_END = "\x1e"
EMPTY_DIGEST = hashlib.sha256(b"").hexdigest()

# The same in SQL, over the events and streams tables (NULLs as empty fields).
EVENT_LINE_SQL = (
    "concat_ws(chr(31), stream_key, stream_pos::VARCHAR, revision::VARCHAR, type, "
    "coalesce(idx::VARCHAR, ''), coalesce(turn::VARCHAR, ''), payload) || chr(30)"
)
EVENTS_DIGEST_SQL = f"sha256(string_agg(sha256({EVENT_LINE_SQL}), '' ORDER BY seq))"
STREAM_LINE_SQL = (
    "concat_ws(chr(31), stream_key, revision::VARCHAR, run_id, format, hex(record_hash), "
    "first_seq::VARCHAR, last_seq::VARCHAR, event_count::VARCHAR, source_id::VARCHAR, "
    "coalesce(line::VARCHAR, '')) || chr(30)"
)


def _field(value: int | None) -> str:
    return "" if value is None else str(value)


def line_digests(stream_key: str, revision: int, events: Iterable[tuple], first_pos: int = 0
                 ) -> str:
    """The line digests (sha256, hex) of ``events`` (``(type, idx, turn, payload)``), what the
    batch digest is made of, of stream ``stream_key`` from stream position ``first_pos``, joined into one string.
    Computed where the events are prepared (perhaps a worker process), so the writer only
    adds them: one call a record, the fields every line shares formatted once."""
    sha256 = hashlib.sha256
    key = stream_key + _FIELD
    rev = _FIELD + str(revision) + _FIELD
    end = _END.encode("ascii")
    digests = []
    for pos, (etype, idx, turn, payload) in enumerate(events, first_pos):
        head = f"{key}{pos}{rev}{etype}{_FIELD}{_field(idx)}{_FIELD}{_field(turn)}{_FIELD}"
        # hashed piece by piece: joining a large payload into the line held two more copies
        digest = sha256(head.encode("utf-8"))
        digest.update(payload if type(payload) is bytes else payload.encode("utf-8"))
        digest.update(end)
        digests.append(digest.hexdigest())
    return "".join(digests)


class Digest:
    """A batch's digest of event lines (sha256 over their line digests, in seq order) or of
    stream lines (sha256 over the lines themselves, in append order)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.count = 0

    def add_joined(self, digests: str, count: int) -> None:
        """Add ``count`` line digests given joined into one string."""
        self._sha.update(digests.encode("ascii"))
        self.count += count

    def add_stream(
        self,
        stream_key: str,
        revision: int,
        run_id: str,
        fmt: str,
        record_hash: bytes,
        first_seq: int,
        last_seq: int,
        event_count: int,
        source_id: int,
        line: int | None,
    ) -> None:
        fields = (
            stream_key, str(revision), run_id, fmt, record_hash.hex().upper(), str(first_seq),
            str(last_seq), str(event_count), str(source_id), _field(line),
        )
        self._sha.update((_FIELD.join(fields) + _END).encode("utf-8"))
        self.count += 1

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def batch_hash(
    prev_hash: bytes | None, batch_id: int, event_count: int, events_digest: str,
    streams_digest: str,
) -> bytes:
    """The chained hash of one batch (32 bytes)."""
    header = _FIELD.join(
        ("recstore-batch-v1", str(batch_id), str(event_count), events_digest, streams_digest)
    )
    return hashlib.sha256((prev_hash or b"") + header.encode("ascii")).digest()
