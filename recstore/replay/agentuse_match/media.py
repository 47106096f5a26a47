"""Media in recorded outputs (§2.3 step 7): outputs whose model-facing bytes a text/JSON
replay cannot serve."""

from __future__ import annotations

from typing import Any

MEDIA_REASON = (
    "This recording contains media whose model-facing bytes are not available to text/JSON replay."
)


def has_media(value: Any) -> bool:
    """True if a recorded output carries media the replay cannot serve (§2.3 step 7)."""
    if isinstance(value, dict):
        if "_media" in value or "__mediaCacheRef" in value:
            return True
        if value.get("type") in ("image", "audio") and ("data" in value or "source" in value):
            return True
        return any(has_media(v) for v in value.values())
    if isinstance(value, list):
        return any(has_media(v) for v in value)
    return False
