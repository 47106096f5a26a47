"""Derived runs (replays) as runs of their own: what a :class:`BatchWriter` stores for a record
that comes with a ``replay_of`` lineage row, whoever made it (``recstore replay``, a sweep, or an
aioc replay line read by ingest).

A replay is never a revision of a stored run: one whose ``runId`` names a stored run (a replayer
may print any id, even its source's), or another replay placed by the same writer, is prepared
again under a fresh id derived from its source and the id it claimed; the claimed id is kept as
``metadata.replayClaimedRunId`` and the lineage detail's ``claimedRunId``. The one exception is
the same replay again (identical record, a replay of the same source): it is the stored replay,
and nothing is appended.
"""

from __future__ import annotations

import hashlib

from recstore.formats.events import Event, events_to_record
from recstore.formats.reader import RawInput
from recstore.store.prepare import Prepared, prepare, run_key_for

__all__ = ["RELATION", "OwnRuns"]

RELATION = "replay_of"


class OwnRuns:
    """Decides, for each replay a writer places, the record to store and its lineage rows.

    ``writer`` is the :class:`recstore.store.ingest.BatchWriter` placing them (its look-ups);
    ``source_uri`` names the input a renamed record is prepared again as."""

    def __init__(self, writer, source_uri: str) -> None:
        self._writer = writer
        self._source_uri = source_uri
        # run key -> (record hash, source run key) of every replay placed through this object
        self._placed: dict[str, tuple[bytes, str | None]] = {}

    def own_run(self, p: Prepared, links: list[dict], stored: dict
                ) -> tuple[Prepared, list[dict], str | None]:
        """``(record to store, its lineage rows, the runId it claimed when that was taken)``:
        ``p`` itself, or ``p`` under a fresh id; no rows when it is the same replay stored
        already. ``links[0]`` is its ``replay_of`` row; ``stored`` caches run-key look-ups."""
        source_key, source_id = _source_of(links[0] if links else {})
        claimed = p.run_id
        current = p
        attempt = 0
        while True:
            if current.key == source_key:  # never its source's key, stored yet or not
                state: tuple | None = ()
            else:
                state = self._placed.get(current.key) or self._stored_replay(
                    current.key, stored, source_key, source_id)
            if state is None:  # a new run
                self._placed[current.key] = (current.record_hash, source_key)
                break
            if state == (current.record_hash, source_key):  # the same replay again
                links = []
                break
            attempt += 1
            current = self._renamed(p, _fresh_id(source_key, claimed, attempt))
        if current is p:
            return p, links, None
        return current, [_relinked(link, p, current, claimed) for link in links], claimed

    def _stored_replay(self, key: str, stored: dict, source_key: str | None,
                       source_id: str | None) -> tuple[bytes, str | None] | None:
        """(record hash, ``source_key`` if it is a replay of that run, else None) of the stored
        run ``key``; None when no run ``key`` is stored."""
        if key not in stored:
            stored.update(self._writer.current_of([key]))
        state = stored[key]
        if state is None:
            return None
        # a replay line stored before its source names the source by id only
        (replays_source,) = self._writer.look_up(
            "SELECT count(*) > 0 FROM lineage_log WHERE child_run_key = ? AND relation = ? "
            "AND (parent_run_key = ? OR (parent_run_key IS NULL AND parent_run_id = ?))",
            [key, RELATION, source_key, source_id]).fetchone()
        return state.record_hash, source_key if replays_source else None

    def _renamed(self, p: Prepared, run_id: str) -> Prepared:
        """``p`` prepared again under ``run_id``, the id it came with kept in its metadata."""
        events = p.events if p.rows is None else p.rows.record_events(p.first_event,
                                                                       p.event_count)
        record = events_to_record(Event(*event) for event in events)
        metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
        record["runId"] = run_id
        record["metadata"] = {**metadata, "replayClaimedRunId": p.run_id}
        renamed = prepare(RawInput(self._source_uri, p.line, None, record), p.fmt)
        assert isinstance(renamed, Prepared), "a valid record with another runId stays valid"
        return renamed


def _source_of(link: dict) -> tuple[str | None, str | None]:
    """The source run key and id a ``replay_of`` row names (the key an aioc run id would have,
    when the row names the source by id only)."""
    key, run_id = link.get("parent_run_key"), link.get("parent_run_id")
    if key is None and isinstance(run_id, str):
        key = run_key_for("aioc", run_id)
    return key, run_id


def _fresh_id(source_key: str | None, claimed: str, attempt: int) -> str:
    """A run id for a replay whose own is taken: derived from what it replays and claimed, so
    the same replay stored again gets the same id (and is recognised as a duplicate)."""
    seed = "\x1f".join((source_key or "", claimed, str(attempt)))
    return "replay-" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _relinked(link: dict, old: Prepared, new: Prepared, claimed: str) -> dict:
    """``link`` naming ``new`` instead of ``old``; a ``replay_of`` row also keeps the claim."""
    link = dict(link)
    if link.get("child") in (old.run_id, old.key):
        link["child"] = new.run_id
    if link.get("relation") == RELATION and isinstance(link.get("detail"), dict):
        link["detail"] = {**link["detail"], "claimedRunId": claimed}
    return link
