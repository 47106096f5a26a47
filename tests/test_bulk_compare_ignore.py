"""Ignore paths: every valid path parses, and a misspelt one is an error listing the valid ones
(a typo must never silently ignore nothing)."""

from __future__ import annotations

import pytest

from recstore.compare.ignore import ENTRY_FIELDS, PRESETS, parse_ignore, valid_paths
from recstore.errors import InputError

from .conftest import hostile_cases

BAD_PATHS = hostile_cases("bad-ignore-paths.txt")


@pytest.mark.parametrize(("path", "expected"), BAD_PATHS, ids=[p for p, _ in BAD_PATHS])
def test_misspelt_paths_are_rejected_with_the_valid_ones(path, expected):
    with pytest.raises(InputError) as caught:
        parse_ignore([path])
    message = str(caught.value)
    assert expected in message
    assert f"ignore path {path!r}" in message
    assert valid_paths() in message


def test_the_valid_list_names_every_section_and_entry_field():
    listed = valid_paths()
    for name in ("response", "toolCalls", "policy", "guardrails", "metadata", "toolCalls.output",
                 "metadata.<key>", "timestamp", "callId", "expiresAt", "guardrailName"):
        assert name in listed


def test_every_entry_field_and_preset_parses():
    for section, names in ENTRY_FIELDS.items():
        spec = parse_ignore([",".join(f"{section}.{name}" for name in names)])
        ignored = spec.policy_fields if section == "policy" else spec.guardrail_fields
        assert ignored == frozenset(names)
    assert parse_ignore(["metadata.anyKeyAtAll", "toolCalls.output", "policyDecisions"]).paths() == [
        "metadata.anyKeyAtAll", "policy", "toolCalls.output"]
    for preset in PRESETS:
        parse_ignore(preset=preset)
