"""Sweep specs: the TOML file that says what a sweep selects, replays, compares and gates on.

A spec is data only. :func:`load_spec` reads and validates one file; every error names the file
and the offending field (``sweep.toml at select.sample: ...``). Relative paths inside a spec
(harness files, judge and candidate commands' scripts) are resolved against the spec's folder so
a spec behaves the same from any working directory.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from recstore.canonical import canonical_json, sha256_canonical
from recstore.errors import InputError

#: Signals a case can raise; classification rules name them (see docs/sweeps.md).
SIGNALS: dict[str, str] = {
    "replay_error": "the replay did not complete (strict miss, policy throw, candidate error)",
    "candidate_failed": "the replay run ended with status 'failed', unless the source failed the "
                        "same way (same errorName and errorMessage)",
    "still_failing": "the replay failed the same way its source did (same errorName and "
                     "errorMessage); counted apart, and in fail_on it fails every failed replay",
    "status_changed": "source and replay statuses differ (completed <-> failed)",
    "tool_drift": "tool calls changed (added, removed or different arguments) on a watched tool",
    "tool_calls_changed": "the tool-call shape differs (any tool)",
    "response_changed": "the final response differs",
    "policy_changed": "policy decisions differ",
    "guardrails_changed": "guardrail decisions differ",
    "not_equal": "the comparison is not equal under the sweep's compare options",
    "uses_avoided_tool": "the replay called a tool listed in expectation.should_avoid_tools",
    "misses_expected_tool": "the replay never called a tool in expectation.should_use_tools",
}

SignalName = Literal[
    "replay_error",
    "candidate_failed",
    "still_failing",
    "status_changed",
    "tool_drift",
    "tool_calls_changed",
    "response_changed",
    "policy_changed",
    "guardrails_changed",
    "not_equal",
    "uses_avoided_tool",
    "misses_expected_tool",
]


class _Strict(BaseModel):
    """Spec sections reject unknown keys so a typo is an error, not a silently ignored option."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SelectSpec(_Strict):
    """Which stored runs become cases: a DSL filter or ``@saved`` query, optionally sampled."""

    query: str = Field(min_length=1)
    params: dict[str, str] = Field(default_factory=dict)
    sample: Annotated[int, Field(gt=0)] | None = None
    seed: int = 0
    limit: Annotated[int, Field(gt=0)] | None = None
    include_replays: bool = False  # by default runs that are replays of other runs are skipped
    allow_empty: bool = False  # a selection of no runs is an error (exit 3) unless this is set


class CandidateSpec(_Strict):
    """The agent the cases are replayed against: exactly one of harness, from_source, command.

    ``tools`` (with ``from_source`` only) replaces the named tools' specs in the harness derived
    from each source run — "the recorded behaviour, with this tool changed" — e.g. a new schema
    whose defaults change the arguments the tool receives.
    """

    harness: str | None = None
    from_source: bool = False
    command: list[str] | None = None
    tools: dict[str, dict] = Field(default_factory=dict)
    timeout: Annotated[float, Field(gt=0)] = 300.0
    label: str | None = None
    allow_outside: bool = False  # the harness may read files outside its folder
    # model requests in flight at most (per endpoint and key), or replayer commands at once
    max_connections: Annotated[int, Field(ge=1, le=4096)] = 16

    @field_validator("command", mode="before")
    @classmethod
    def _split_command(cls, value: object) -> object:
        """``command = "node replayer.js"`` is split like a shell would (no shell runs it)."""
        return shlex.split(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _exactly_one(self) -> CandidateSpec:
        chosen = [k for k in ("harness", "from_source", "command") if getattr(self, k)]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of harness = FILE, from_source = true, command = [ARGV...]"
                + (f" (got {', '.join(chosen)})" if chosen else "")
            )
        if self.command is not None and not all(self.command):
            raise ValueError("command must be a non-empty list of non-empty strings")
        if self.tools and not self.from_source:
            raise ValueError("tools overrides apply to from_source = true only (edit the harness file instead)")
        return self

    def describe(self) -> str:
        """A short label for reports: the user's label, else what the candidate is."""
        if self.label:
            return self.label
        if self.harness:
            return f"harness {Path(self.harness).name}"
        if self.from_source:
            changed = f" with {', '.join(sorted(self.tools))} changed" if self.tools else ""
            return f"from source{changed}"
        return "command " + " ".join(self.command or [])


class ReplaySpec(_Strict):
    """How each case is replayed (aioc §6 modes and input modes; matching rule family)."""

    mode: Literal["strict", "hybrid", "live"] = "strict"
    input_mode: Literal["recorded", "question"] = "recorded"
    matching: Literal["aioc", "agentuse"] = "aioc"
    on_missing: Literal["throw", "use_live"] | None = None


SectionName = Literal["response", "toolCalls", "policy", "guardrails", "metadata"]


class CompareSpec(_Strict):
    """Options passed to the comparison of each replay with its source.

    The default is the ``semantic`` preset: what a replay can reproduce. A replay runs at another
    time under other provider call ids and with its own run metadata, so aioc's exact comparison
    (``preset = "exact"``) finds every faithful replay changed."""

    preset: str | None = "semantic"
    ignore: list[str] = Field(default_factory=list)
    include_sections: list[SectionName] | None = None
    exclude_sections: list[SectionName] | None = None

    @model_validator(mode="after")
    def _known_paths(self) -> CompareSpec:
        from recstore.compare.ignore import parse_ignore

        try:
            parse_ignore(self.ignore, self.preset)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return self

    def compared(self) -> dict:
        """What the comparison covers: the sections compared and the ignore paths applied
        inside them (for reports: "which sections were compared")."""
        from recstore.compare.ignore import parse_ignore
        from recstore.records import SECTIONS, resolve_sections

        ignore = parse_ignore(self.ignore, self.preset)
        sections = resolve_sections(self.include_sections, self.exclude_sections) - ignore.sections
        return {
            "preset": self.preset,
            "sections": [s for s in SECTIONS if s in sections],
            "ignored": [p for p in ignore.paths() if p.partition(".")[0] in sections],
        }


class ClassifySpec(_Strict):
    """What makes a case fail or warn. ``tools`` narrows ``tool_drift`` to named tools.

    The defaults are aioc's default classification (§7.1): fail when the candidate failed (or the
    replay could not complete), warn when the comparison is not equal, else pass. A judge verdict
    of ``fail``/``warn`` always raises the case to at least that level, as in aioc.
    """

    fail_on: list[SignalName] = Field(default_factory=lambda: ["replay_error", "candidate_failed"])
    warn_on: list[SignalName] = Field(default_factory=lambda: ["not_equal"])
    tools: list[str] = Field(default_factory=list)


class ExpectationSpec(_Strict):
    """aioc's ``RunRegressionExpectation``: hints for a judge, plus two checkable signals."""

    intent: str | None = None
    should_use_tools: list[str] = Field(default_factory=list)
    should_avoid_tools: list[str] = Field(default_factory=list)
    should_preserve: list[str] = Field(default_factory=list)
    should_improve: list[str] = Field(default_factory=list)
    notes: str | None = None

    def to_aioc(self) -> dict:
        """The expectation with aioc's key names, empty fields omitted."""
        names = {
            "intent": "intent",
            "should_use_tools": "shouldUseTools",
            "should_avoid_tools": "shouldAvoidTools",
            "should_preserve": "shouldPreserve",
            "should_improve": "shouldImprove",
            "notes": "notes",
        }
        return {aioc: getattr(self, ours) for ours, aioc in names.items() if getattr(self, ours)}


class JudgeSpec(_Strict):
    """An external judge: gets one case as JSON on stdin, prints a RunJudgeResult JSON."""

    command: list[str] = Field(min_length=1)
    timeout: Annotated[float, Field(gt=0)] = 60.0


class ScheduleSpec(_Strict):
    """When the scheduler fires the sweep: a 5-field cron expression in a time zone."""

    cron: str
    timezone: str = "UTC"

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        if len(value.split()) != 5 or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a 5-field cron expression (e.g. '0 3 * * *')")
        return value

    @field_validator("timezone")
    @classmethod
    def _valid_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like 'Europe/Berlin')") from None
        return value

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone."""
        return ZoneInfo(self.timezone)


_NOT_DECISIVE = frozenset({"workers", "schedule", "description"})


class SweepSpec(_Strict):
    """One sweep: select cases, replay them against a candidate, compare, classify."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str | None = None
    select: SelectSpec
    candidate: CandidateSpec
    replay: ReplaySpec = Field(default_factory=ReplaySpec)
    compare: CompareSpec = Field(default_factory=CompareSpec)
    classify: ClassifySpec = Field(default_factory=ClassifySpec)
    expectation: ExpectationSpec | None = None
    judge: JudgeSpec | None = None
    workers: Annotated[int, Field(ge=1, le=64)] = 1
    schedule: ScheduleSpec | None = None

    def canonical(self) -> dict:
        """The spec as plain JSON data (resolved paths), the form stored with each sweep run."""
        return self.model_dump(mode="json")

    @property
    def spec_hash(self) -> str:
        """``sha256:`` of what decides the results (not workers, max_connections, schedule or
        description): an unfinished run resumes only under the same hash; a changed spec starts
        a new run."""
        decisive = {k: v for k, v in self.canonical().items() if k not in _NOT_DECISIVE}
        decisive["select"].pop("allow_empty")  # says whether to run, not what a run finds
        decisive["candidate"].pop("max_connections")  # how fast, not what
        return "sha256:" + sha256_canonical(decisive)


def parse_spec(data: dict, *, source: str, base_dir: Path | None = None) -> SweepSpec:
    """Validate parsed TOML data as a :class:`SweepSpec`; relative paths resolve from base_dir."""
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise _input_error(exc, source) from None
    return _resolve_paths(spec, base_dir) if base_dir is not None else spec


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep spec TOML file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such sweep spec file", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read sweep spec: {exc}", source=str(path)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", source=str(path)) from None
    return parse_spec(data, source=str(path), base_dir=path.resolve().parent)


def spec_json(spec: SweepSpec) -> str:
    """Canonical JSON text of a spec (stored with each sweep run)."""
    return canonical_json(spec.canonical())


def _input_error(exc: ValidationError, source: str) -> InputError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key (check the spelling; see docs/sweeps.md)"
    elif first["type"] == "missing":
        message = "required key is missing"
    more = len(exc.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return InputError(message, source=source, path=where)


def _resolve_paths(spec: SweepSpec, base_dir: Path) -> SweepSpec:
    """Make file references absolute: the harness path and command words that name a file."""
    candidate = spec.candidate
    updates: dict = {}
    if candidate.harness:
        updates["harness"] = str((base_dir / candidate.harness).resolve())
    if candidate.command:
        updates["command"] = _resolve_argv(candidate.command, base_dir)
    judge = spec.judge
    changes: dict = {}
    if updates:
        changes["candidate"] = candidate.model_copy(update=updates)
    if judge:
        changes["judge"] = judge.model_copy(update={"command": _resolve_argv(judge.command, base_dir)})
    return spec.model_copy(update=changes) if changes else spec


def _resolve_argv(argv: list[str], base_dir: Path) -> list[str]:
    """Argument words that are existing files relative to the spec's folder become absolute."""
    out = []
    for word in argv:
        candidate = base_dir / word
        is_relative_file = not Path(word).is_absolute() and ("/" in word or "." in word)
        out.append(str(candidate.resolve()) if is_relative_file and candidate.exists() else word)
    return out
