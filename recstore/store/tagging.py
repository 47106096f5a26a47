"""``Store.tag``: tags_changed events for stored runs, and what they changed.

Setting a tag replaces a value a run already has (``set=v1`` on runs tagged ``set=baseline``),
so the summary says, per tag, which old values became which new ones and on how many runs: a
caller can print ``set baseline -> v1`` instead of overwriting silently (issue 27 point 10).

Example:
    >>> tag_edits({"set": "baseline", "owner": "ci"}, {"set": {"set": "v1"}, "remove": ["owner"]})
    [('owner', 'ci', None), ('set', 'baseline', 'v1')]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from recstore.errors import NotFoundError
from recstore.formats.events import Event
from recstore.formats.jsontext import dumps_json, loads_json
from recstore.store.ingest import TAGS_EVENT, BatchWriter
from recstore.store.projection import fold_tags

__all__ = ["TagSummary", "tag_edits", "tag_runs"]


def tag_edits(tags: dict[str, str], change: dict) -> list[tuple[str, str | None, str | None]]:
    """``(key, old, new)`` for every tag ``change`` (a tags_changed payload) alters in ``tags``,
    sorted by key; ``None`` is an absent tag (``old`` for a new key, ``new`` for a removed one)."""
    after = fold_tags([{"set": tags}, change])
    return [(key, tags.get(key), after.get(key)) for key in sorted(set(tags) | set(after))
            if tags.get(key) != after.get(key)]


@dataclass
class TagSummary:
    """What one ``Store.tag`` call did: ``tagged`` runs changed; ``changes`` counts, per
    ``(key, old, new)`` (``None``: absent), the runs whose tag went from ``old`` to ``new``."""

    tagged: int = 0
    changes: Counter = field(default_factory=Counter)

    def to_list(self) -> list[dict]:
        """``changes`` as JSON rows ``{key, from, to, runs}`` (by key, then most runs first)."""
        rows = sorted(self.changes.items(), key=lambda kv: (kv[0][0], -kv[1], str(kv[0][1:])))
        return [{"key": key, "from": old, "to": new, "runs": runs}
                for (key, old, new), runs in rows]


def tag_runs(writer: BatchWriter, run_keys: Iterable[str], change: dict) -> TagSummary:
    """Append ``change`` as a tags_changed event to each run of ``run_keys`` whose tags it
    alters (the others get none) on ``writer``; returns what changed.

    Raises:
        NotFoundError: a run key is not stored.
    """
    summary = TagSummary()
    source_id = writer.open_source("tag", "records")
    event = Event(TAGS_EVENT, None, None, dumps_json(change))
    for key in run_keys:
        state = writer.current(key)
        if state is None:
            raise NotFoundError(f"no stored run {key!r}")
        edits = tag_edits(loads_json(state.tags_json), change)
        if edits:
            tags = fold_tags([{"set": loads_json(state.tags_json)}, change])
            writer.tag_run(key, state, event, dumps_json(tags), source_id)
            summary.tagged += 1
            summary.changes.update(edits)
    writer.flush()
    return summary
