"""What a comparison leaves out: aioc sections, and fields inside entries (``--ignore``).

aioc's exact mode (the default, with parity) compares whole policy and guardrail entries,
timestamps and callIds included, so two real runs practically never match (docs/aioc-runrecord.md
§5, §7.1). An :class:`IgnoreSpec` names what to leave out:

* a section name (``response``, ``toolCalls``, ``policy``, ``guardrails``, ``metadata``) drops the
  whole section, exactly like aioc's ``excludeSections``;
* ``policy.<field>`` / ``guardrails.<field>`` drop one top-level field of every entry
  (``policy.timestamp``, ``policy.callId``, ``guardrails.timestamp`` …);
* ``metadata.<key>`` drops one top-level metadata key (``metadata.appBuildVersion``);
* ``toolCalls.output`` stops comparing recorded tool outputs (``hasOutput`` is still compared).

The ``semantic`` preset (:data:`PRESETS`) ignores what differs between two runs of the same
behaviour: decision timestamps, callIds and approval expiry times, and the run metadata.

Example:
    >>> spec = parse_ignore(["policy.timestamp"], preset="semantic")
    >>> sorted(spec.policy_fields), sorted(spec.sections)
    (['callId', 'expiresAt', 'timestamp'], ['metadata'])
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from recstore.errors import InputError
from recstore.records import SECTIONS

__all__ = ["PRESETS", "IgnoreSpec", "parse_ignore", "strip_record"]

PRESETS: dict[str, tuple[str, ...]] = {
    "semantic": (
        "policy.timestamp",
        "policy.callId",
        "policy.expiresAt",
        "guardrails.timestamp",
        "metadata",
    ),
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


def parse_ignore(paths: Iterable[str] = (), preset: str | None = None) -> IgnoreSpec:
    """Parse ignore paths (commas allowed inside items) plus an optional preset.

    Raises:
        InputError: naming the unknown path or preset.
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
        head, _, rest = path.partition(".")
        section = _SECTION_ALIASES.get(head)
        if section is None:
            raise InputError(
                f"--ignore {path!r}: unknown section {head!r} (use one of {', '.join(SECTIONS)})"
            )
        if not rest:
            sections.add(section)
        elif section in fields and "." not in rest:
            fields[section].add(rest)
        elif section == "toolCalls" and rest == "output":
            tool_output = True
        else:
            raise InputError(
                f"--ignore {path!r}: only top-level fields of policy/guardrails entries, "
                "top-level metadata keys and toolCalls.output can be ignored"
            )
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


def strip_record(record: dict, spec: IgnoreSpec) -> dict:
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
