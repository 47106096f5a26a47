"""Store operations (§2.7): ``store_create`` and later reads of the items it made served from a
temporary store, and ``store_list`` answered by projecting a recorded list."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime
from typing import Any

from recstore.canonical import canonical_json
from recstore.replay.agentuse_match.media import has_media
from recstore.replay.agentuse_match.recordings import TapeResult
from recstore.replay.agentuse_match.rules import TEMP_ID_PREFIX, TEMP_STORE, is_number
from recstore.replay.agentuse_match.state import TapeState

_LIST_WINDOW_KEYS = ("fields", "limit", "offset", "intent")


def _split_list_input(value: dict, drop_include_data: bool) -> tuple[dict, Any, Any, Any]:
    """store_list input → (query, fields, limit, offset)."""
    query = {k: v for k, v in value.items() if k not in _LIST_WINDOW_KEYS}
    if drop_include_data:
        query.pop("includeData", None)
    offset = value.get("offset", 0)
    return query, value.get("fields"), value.get("limit"), offset if offset is not None else 0


def _js_truthy(value: Any) -> bool:
    if isinstance(value, (dict, list)):
        return True
    if is_number(value):
        return value == value and value != 0
    return bool(value)


def project_store_list(new_input: dict, recorded_input: dict, recorded_output: Any) -> dict | None:
    """Serve a ``store_list`` call from a wider recorded page (§3.5), or None if it does not fit."""
    new_query, fields, limit, offset = _split_list_input(new_input, False)
    rec_query, _rec_fields, _rec_limit, rec_offset = _split_list_input(recorded_input, True)
    if canonical_json(new_query) != canonical_json(rec_query):
        return None
    out = recorded_output
    if not (
        isinstance(out, dict) and _js_truthy(out.get("success")) and isinstance(out.get("items"), list)
    ) or has_media(out):
        return None
    if not (is_number(offset) and is_number(rec_offset)) or (
        limit is not None and not is_number(limit)
    ):
        return None
    rows: list = out["items"]
    total = out.get("total") if is_number(out.get("total")) else len(rows) + rec_offset
    start = int(offset - rec_offset)
    end = start + int(limit) if limit is not None else int(total - rec_offset)
    if start < 0 or start > len(rows):
        return None
    if end > len(rows) and rec_offset + len(rows) < total:
        return None  # the window runs past a page that was not the tail of the list
    include_data = bool(recorded_input.get("includeData"))
    picked = []
    for row in rows[start:end]:
        projected = _project_row(row, fields, include_data)
        if projected is None:
            return None
        picked.append(projected)
    result = {k: copy.deepcopy(v) for k, v in out.items() if k != "dataKeysByType"}
    result.update(items=picked, count=len(picked), replay=True)
    return result


def _project_row(row: Any, fields: Any, include_data: bool) -> dict | None:
    """One recorded row cut to ``fields``: a key of the row's ``data`` is copied, a key the row
    itself carries (its own metadata) is already there, a known absence (the recording used
    ``includeData``, or the row lists the key in ``missingFields``) goes to ``missingFields``;
    any other key is unknown and the recording cannot serve the call."""
    if not isinstance(row, dict):
        return None
    data = row.get("data") if isinstance(row.get("data"), dict) else {}
    known_missing = row.get("missingFields") if isinstance(row.get("missingFields"), list) else []
    out = {k: copy.deepcopy(v) for k, v in row.items() if k not in ("data", "missingFields")}
    picked: dict = {}
    missing: list = []
    for key in fields or []:
        if key in data:
            picked[key] = copy.deepcopy(data[key])
        elif key in row:
            continue
        elif include_data or key in known_missing:
            if key not in missing:
                missing.append(key)
        else:
            return None  # a field the recording cannot answer
    if fields:
        out["data"] = picked
    if missing:
        out["missingFields"] = missing
    return out


# keys of a temporary item an update cannot change: its replay id and the source-time stamps
_TEMP_FIXED_KEYS = frozenset({"id", "intent", "createdAt", "updatedAt"})


def _data_of(item: dict) -> dict:
    return copy.deepcopy(item["data"]) if isinstance(item.get("data"), dict) else {}


def _metadata(item: dict) -> dict:
    return {k: copy.deepcopy(v) for k, v in item.items() if k != "data"}


class StoreSteps(TapeState):
    """The store adapter of the tape."""

    def _store(self, tool: str, value: dict) -> TapeResult | None:
        if tool == "store_create":
            return self._store_create(tool, value)
        item_id = value.get("id")
        if (
            tool in ("store_get", "store_update", "store_delete")
            and isinstance(item_id, str)
            and item_id in self.temp_items
        ):
            return self._store_temp(tool, value, item_id)
        if tool == "store_list":
            return self._store_projection(tool, value)
        return None

    def _now_iso(self) -> str:
        ms = self.source.created_at or 0
        return (
            datetime.fromtimestamp(ms / 1000, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )

    def _store_create(self, tool: str, value: dict) -> TapeResult:
        item_id = TEMP_ID_PREFIX + str(uuid.uuid4())
        now = self._now_iso()
        fields = {k: copy.deepcopy(v) for k, v in value.items() if k != "intent"}
        # the replay's own id and the source's start time win over anything the input names
        item = {**fields, "id": item_id, "createdAt": now, "updatedAt": now}
        self.temp_items[item_id] = item
        self.store_changed = True
        self._log(tool, value, "temporary-store")
        return TapeResult(
            {
                "success": True,
                "replay": True,
                "store": TEMP_STORE,
                "id": item_id,
                "item": _metadata(item),
            }
        )

    def _store_temp(self, tool: str, value: dict, item_id: str) -> TapeResult:
        item = self.temp_items[item_id]
        self._log(tool, value, "temporary-store")
        base = {"success": True, "store": TEMP_STORE, "id": item_id}
        if tool == "store_delete":
            del self.temp_items[item_id]
            return TapeResult({**base, "deleted": True})
        if tool == "store_update":
            for key, new in value.items():
                if key in _TEMP_FIXED_KEYS:
                    continue
                if key == "data" and isinstance(new, dict):
                    item["data"] = {**_data_of(item), **copy.deepcopy(new)}
                else:
                    item[key] = copy.deepcopy(new)
            self.store_changed = True
            return TapeResult({**base, "item": _metadata(item)})
        fields = value.get("fields")
        shown = copy.deepcopy(item)
        if isinstance(fields, list):
            shown["data"] = {k: v for k, v in _data_of(item).items() if k in fields}
        return TapeResult({**base, "item": shown})

    def _store_projection(self, tool: str, value: dict) -> TapeResult | None:
        fields = value.get("fields")
        if value.get("countOnly") or value.get("includeData") or self.store_changed:
            return None
        if fields is not None and not (
            isinstance(fields, list) and all(isinstance(f, str) for f in fields)
        ):
            return None
        for queue in self.queues.values():
            head = queue[0] if queue else None
            if (
                head is None
                or head.tool != "store_list"
                or head.status != "completed"
                or not isinstance(head.input, dict)
            ):
                continue
            result = project_store_list(value, head.input, head.output)
            if result is not None:
                queue.popleft()
                self._log(tool, value, "store-projection", partId=head.part_id)
                return TapeResult(result)
        return None
