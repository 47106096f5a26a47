"""What a comparison leaves out: aioc sections, and fields inside entries (``--ignore``).

aioc's exact mode (the default, with parity) compares whole policy and guardrail entries,
timestamps and callIds included, so two real runs practically never match (docs/aioc-runrecord.md
§5, §7.1). An :class:`IgnoreSpec` names what to leave out:

* a section name (``response``, ``toolCalls``, ``policy``, ``guardrails``, ``metadata``) drops the
  whole section, exactly like aioc's ``excludeSections``;
* ``policy.<field>`` / ``guardrails.<field>`` drop one top-level field of every entry
  (``policy.timestamp``, ``policy.callId``, ``guardrails.timestamp`` …; the fields are those of
  aioc's ``PolicyDecisionRecord`` and ``GuardrailDecisionRecord``, :data:`ENTRY_FIELDS`);
* ``metadata.<key>`` drops one top-level metadata key (``metadata.appBuildVersion``);
* ``toolCalls.output`` stops comparing recorded tool outputs (``hasOutput`` is still compared).

Anything else — an unknown section, a misspelt field (``policy.timestmap``), a nested path — is
an :class:`~recstore.errors.InputError` that lists the valid paths (:func:`valid_paths`).

The ``semantic`` preset (:data:`PRESETS`) ignores what differs between two runs of the same
behaviour: decision timestamps, callIds and approval expiry times, and the run metadata. The
``exact`` preset leaves nothing out (aioc's comparison; a sweep's way to turn its default,
``semantic``, off).

Example:
    >>> spec = parse_ignore(["policy.timestamp"], preset="semantic")
    >>> sorted(spec.policy_fields), sorted(spec.sections)
    (['callId', 'expiresAt', 'timestamp'], ['metadata'])
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from recstore.errors import InputError
from recstore.formats.aioc import GuardrailDecision, PolicyDecision
from recstore.records import SECTIONS

__all__ = ["ENTRY_FIELDS", "PRESETS", "IgnoreSpec", "parse_ignore", "strip_record", "valid_paths"]

PRESETS: dict[str, tuple[str, ...]] = {
    "exact": (),  # aioc's own comparison: nothing left out (compare's default)
    "semantic": (
        "policy.timestamp",
        "policy.callId",
        "policy.expiresAt",
        "guardrails.timestamp",
        "metadata",
    ),
}

#: Top-level fields of the entries whose fields can be ignored, in aioc's key order: the fields
#: the record model knows (a misspelt field would silently ignore nothing).
ENTRY_FIELDS: dict[str, tuple[str, ...]] = {
    "policy": tuple(PolicyDecision.__annotations__),
    "guardrails": tuple(GuardrailDecision.__annotations__),
}

# Accepted spellings of the sections (aioc names plus the record's array names).
_SECTION_ALIASES = {
    **{name: name for name in SECTIONS},
    "policyDecisions": "policy",
    "guardrailDecisions": "guardrails",
}


@dataclass(frozen=True)
class IgnoreSpec:
    """Parsed ``--ignore`` paths. The empty spec is aioc's exact mode."""

    sections: frozenset[str] = frozenset()
    policy_fields: frozenset[str] = frozenset()
    guardrail_fields: frozenset[str] = frozenset()
    metadata_keys: frozenset[str] = frozenset()
    tool_output: bool = False

    def is_exact(self) -> bool:
        """True when nothing inside a section is ignored (whole-section drops aside)."""
        return not (
            self.policy_fields or self.guardrail_fields or self.metadata_keys or self.tool_output
        )

    def needs_fields(self) -> bool:
        """True when fields inside entries or metadata are ignored (field rows are needed)."""
        return bool(self.policy_fields or self.guardrail_fields or self.metadata_keys)

    def paths(self) -> list[str]:
        """The spec as sorted ``--ignore`` paths (what gets recorded with a comparison)."""
        out = set(self.sections)
        out.update(f"policy.{f}" for f in self.policy_fields)
        out.update(f"guardrails.{f}" for f in self.guardrail_fields)
        out.update(f"metadata.{k}" for k in self.metadata_keys)
        if self.tool_output:
            out.add("toolCalls.output")
        return sorted(out)


def valid_paths() -> str:
    """The ignore paths :func:`parse_ignore` accepts, as one line for error messages."""
    fields = "; ".join(f"{section}.<field> with field one of {', '.join(names)}"
                       for section, names in ENTRY_FIELDS.items())
    return f"{', '.join(SECTIONS)}; {fields}; metadata.<key>; toolCalls.output"


def _unknown(path: str, problem: str, typo: str, known: Iterable[str]) -> InputError:
    near = difflib.get_close_matches(typo, list(known), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return InputError(f"ignore path {path!r}: {problem}{hint}; valid paths: {valid_paths()}")


def _parse_path(path: str, sections: set[str], fields: dict[str, set[str]]) -> bool:
    """Add one ignore path to ``sections``/``fields``; True when it is ``toolCalls.output``."""
    head, _, rest = path.partition(".")
    section = _SECTION_ALIASES.get(head)
    if section is None:
        raise _unknown(path, f"unknown section {head!r}", head, _SECTION_ALIASES)
    if not rest:
        sections.add(section)
        return False
    if section == "toolCalls" and rest == "output":
        return True
    if section == "toolCalls" and "." not in rest:
        raise _unknown(path, "the one toolCalls field that can be ignored is output", rest,
                       ("output",))
    if section == "metadata" and "." not in rest:
        fields[section].add(rest)  # metadata keys are free-form
        return False
    if section in ENTRY_FIELDS and rest in ENTRY_FIELDS[section]:
        fields[section].add(rest)
        return False
    if section in ENTRY_FIELDS and "." not in rest:
        raise _unknown(path, f"{section} entries have no field {rest!r}", rest,
                       ENTRY_FIELDS[section])
    raise _unknown(path, "only top-level fields of policy/guardrails entries, top-level "
                   "metadata keys and toolCalls.output can be ignored", rest, ())


def parse_ignore(paths: Iterable[str] = (), preset: str | None = None) -> IgnoreSpec:
    """Parse ignore paths (commas allowed inside items) plus an optional preset.

    Raises:
        InputError: naming the unknown path or preset and listing the valid ones.
    """
    wanted: list[str] = []
    if preset is not None:
        if preset not in PRESETS:
            raise InputError(f"unknown preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        wanted.extend(PRESETS[preset])
    for item in paths:
        wanted.extend(p.strip() for p in item.split(",") if p.strip())
    sections: set[str] = set()
    fields: dict[str, set[str]] = {"policy": set(), "guardrails": set(), "metadata": set()}
    tool_output = False
    for path in wanted:
        tool_output |= _parse_path(path, sections, fields)
    return IgnoreSpec(
        sections=frozenset(sections),
        policy_fields=frozenset(fields["policy"]),
        guardrail_fields=frozenset(fields["guardrails"]),
        metadata_keys=frozenset(fields["metadata"]),
        tool_output=tool_output,
    )


def _without(value: object, keys: frozenset[str]) -> object:
    if isinstance(value, dict) and keys:
        return {k: v for k, v in value.items() if k not in keys}
    return value


def strip_record(record: dict[str, Any], spec: IgnoreSpec) -> dict[str, Any]:
    """A shallow copy of ``record`` with the ignored fields removed.

    ``compare_records(strip_record(a, s), strip_record(b, s), exclude_sections=s.sections)`` is
    the pairwise meaning of an ignore spec; the set-based engine reproduces it. A removed tool
    output compares as aioc's ``"[undefined]"`` on both sides, so only ``hasOutput`` remains.
    """
    if spec.is_exact():
        return record
    out = dict(record)
    if spec.policy_fields and isinstance(record.get("policyDecisions"), list):
        out["policyDecisions"] = [
            _without(e, spec.policy_fields) for e in record["policyDecisions"]
        ]
    if spec.guardrail_fields and isinstance(record.get("guardrailDecisions"), list):
        out["guardrailDecisions"] = [
            _without(e, spec.guardrail_fields) for e in record["guardrailDecisions"]
        ]
    if spec.metadata_keys and "metadata" in record:
        out["metadata"] = _without(record["metadata"], spec.metadata_keys)
    if spec.tool_output and isinstance(record.get("items"), list):
        out["items"] = [
            _without(item, frozenset({"output"}))
            if isinstance(item, dict) and item.get("type") == "tool_call_output_item"
            else item
            for item in record["items"]
        ]
    return out
