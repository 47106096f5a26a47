"""A minimal JSON-Schema check for tool arguments that behaves like aioc's zod parse.

Supported: ``type`` (string, number, integer, boolean, object, array, null, or a list of them),
``properties``, ``required``, ``additionalProperties: false`` (unknown keys are **stripped**, as
zod's default ``strip`` does, not rejected), ``default`` (filled in when the key is missing),
``enum``, and ``items``. Anything else is accepted unchecked. Issues use zod's shape so the
recorded ``ZodError`` message reads like aioc's.
"""

from __future__ import annotations

import json
from typing import Any

from recstore.canonical import json_type_name
from recstore.runtime.errors import ArgumentValidationError

__all__ = ["validate_arguments"]


def _matches(value: Any, type_name: str) -> bool:
    if type_name == "integer":
        return json_type_name(value) == "number" and float(value).is_integer()
    return json_type_name(value) == type_name


def _type_issue(expected: str, value: Any, path: list) -> dict:
    received = json_type_name(value)
    if expected == "integer" and received == "number":
        received = "float"
    return {
        "code": "invalid_type",
        "expected": expected,
        "received": received,
        "path": path,
        "message": f"Expected {expected}, received {received}",
    }


def _check(schema: Any, value: Any, path: list, issues: list[dict]) -> Any:
    if not isinstance(schema, dict):
        return value
    expected = schema.get("type")
    if isinstance(expected, str) and not _matches(value, expected):
        issues.append(_type_issue(expected, value, path))
        return value
    if isinstance(expected, list) and expected and not any(_matches(value, t) for t in expected):
        issues.append(_type_issue(" | ".join(expected), value, path))
        return value
    if "enum" in schema and value not in schema["enum"]:
        options = " | ".join(json.dumps(o, ensure_ascii=False) for o in schema["enum"])
        issues.append(
            {
                "received": value,
                "code": "invalid_enum_value",
                "options": schema["enum"],
                "path": path,
                "message": f"Invalid enum value. Expected {options}, received '{value}'",
            }
        )
        return value
    if isinstance(value, dict) and ("properties" in schema or expected == "object"):
        return _check_object(schema, value, path, issues)
    if isinstance(value, list) and "items" in schema:
        return [_check(schema["items"], v, [*path, i], issues) for i, v in enumerate(value)]
    return value


def _check_object(schema: dict, value: dict, path: list, issues: list[dict]) -> dict:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out: dict = {}
    for key, sub in properties.items():  # zod builds its output in shape order
        if key in value:
            out[key] = _check(sub, value[key], [*path, key], issues)
        elif isinstance(sub, dict) and "default" in sub:
            out[key] = sub["default"]
        elif key in required:
            expected = sub.get("type") if isinstance(sub, dict) else None
            issues.append(
                {
                    "code": "invalid_type",
                    "expected": expected if isinstance(expected, str) else "unknown",
                    "received": "undefined",
                    "path": [*path, key],
                    "message": "Required",
                }
            )
    if schema.get("additionalProperties") is not False:
        for key, item in value.items():
            if key not in properties:
                out[key] = item
    return out


def validate_arguments(schema: dict, arguments: Any) -> Any:
    """The validated arguments (unknown keys stripped, defaults filled), or raise
    ``ArgumentValidationError`` whose message is the zod issue list as aioc prints it."""
    issues: list[dict] = []
    validated = _check(schema, arguments, [], issues)
    if issues:
        message = json.dumps(issues, ensure_ascii=False, indent=2)
        raise ArgumentValidationError(message, issues)
    return validated
