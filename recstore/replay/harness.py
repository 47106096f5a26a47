"""Candidates for a replay: harness files (TOML or YAML), Python objects, and ``--from-source``.

A harness file is data only, shaped like aioc's harness descriptor (§7.3) and extended with what
a replay needs: tool schemas and optional ``module:function`` implementations, declarative
policies, output guardrails and provider settings. Its hash, ``"sha256:" + H(materialized)``, is
computed on the document after ``instructions_file`` has been replaced by the file's text, exactly
as aioc hashes a descriptor, and goes into the replay's ``metadata.harness.descriptorHash``.

:func:`harness_from_source` derives a harness from a recorded run: its agents, the tools and
handoff tools each agent called (handoff tools keep their recorded names), and every recorded
policy and guardrail decision re-applied as a declarative rule labelled ``recorded``. Replayed in
strict mode with the ``recorded`` provider it reproduces the run, failures included.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from recstore.canonical import sha256_canonical
from recstore.errors import InputError
from recstore.records import analyze
from recstore.replay.providers import RecordedRequest, recorded_requests
from recstore.replay.tape import AIOC, REPRODUCE, TapeRules
from recstore.runtime import (
    DEFAULT_TOOL_PARAMETERS,
    Agent,
    Handoff,
    OutputGuardrail,
    Policies,
    PolicyInput,
    Tool,
)

__all__ = [
    "Candidate",
    "Harness",
    "TurnState",
    "harness_from_source",
    "harness_hash",
    "load_harness",
    "parse_harness",
]

RECORDED = "recorded"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolSpec(_Model):
    """A tool: what the model sees, and optionally the Python function that runs it live."""

    description: str = ""
    parameters: dict | None = None  # JSON Schema; None means aioc's parameterless object
    implementation: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")


class WhereSpec(_Model):
    """A handoff condition: enabled when the context value at a dotted path is truthy."""

    context: str


class HandoffSpec(_Model):
    agent: str
    where: WhereSpec | None = None
    tool_name: str | None = None  # an exact tool name (recorded runs); else handoff_to_<target>
    description: str | None = None


class AgentSpec(_Model):
    name: str | None = None  # defaults to the agent's id
    handoffDescription: str | None = None
    instructions: str | None = None
    instructions_file: str | None = None
    model: str | None = None
    modelSettings: dict | None = None
    promptVersion: str | None = None
    tools: list[str] = []
    handoffs: list[str | HandoffSpec] = []
    output_guardrails: list[str] = []


class GuardrailSpec(_Model):
    """Triggers when the turn's text contains any of ``contains`` or matches ``regex``, only on
    ``turns`` when given; with neither text condition it triggers on every listed turn."""

    contains: list[str] = []
    regex: str | None = None
    turns: list[int] | None = None
    reason: str | None = None
    metadata: dict | None = None
    label: str | None = None

    @model_validator(mode="after")
    def _has_condition(self) -> GuardrailSpec:
        if not self.contains and self.regex is None and self.turns is None:
            raise ValueError("a guardrail needs contains, regex or turns")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return self


_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"})


class PolicyRule(_Model):
    """One declarative rule; the first rule whose conditions all hold decides.

    Conditions: ``kind`` (tool or handoff), ``name`` (tool name, or the handoff's target agent
    name), ``agent`` (the acting agent), ``args`` (dotted path → value, or ``{op: value}`` with
    op in eq, ne, gt, gte, lt, lte, in, exists), and for recorded rules ``turn``, ``call_id`` and
    ``occurrence``: the n-th policy request (from 1) of the run with this turn and call id, for
    providers that reuse one call id for several calls.
    """

    decision: Literal["allow", "deny", "require_approval"]
    reason: str | None = None
    public_reason: str | None = None
    result_mode: Literal["throw", "tool_result"] | None = None
    policy_version: str | None = None
    expires_at: str | None = None
    metadata: dict | None = None
    kind: Literal["tool", "handoff"] | None = None
    name: str | list[str] | None = None
    agent: str | list[str] | None = None
    args: dict[str, Any] | None = None
    turn: int | None = None
    call_id: str | None = None
    occurrence: int | None = Field(default=None, ge=1)
    label: str | None = None

    @model_validator(mode="after")
    def _reason_for_non_allow(self) -> PolicyRule:
        if self.decision != "allow" and not (self.reason or "").strip():
            raise ValueError(f"a {self.decision} rule needs a reason")
        return self


class PolicySpec(_Model):
    """Declarative tool and handoff policies. Without a ``policies`` section nothing is allowed
    (``policy_not_configured``); with one, a call no rule matches gets ``default``."""

    version: str | None = None
    default: Literal["deny", "allow"] = "deny"
    default_reason: str = "no_matching_rule"
    rules: list[PolicyRule] = []


#: The environment variables a harness file may name as ``provider.api_key_env``: names that say
#: they hold an API key. The openai provider sends that variable's value to ``base_url``, so a
#: harness must not be able to name any other variable (``AWS_SECRET_ACCESS_KEY``, ``HOME``);
#: ``replay --api-key-env`` on the command line may name any variable.
HARNESS_API_KEY_ENV = re.compile(r"[A-Z][A-Z0-9_]*_API_KEY")


#: The API key variable each HTTP provider reads when ``api_key_env`` is not given.
DEFAULT_API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


class ProviderSpec(_Model):
    """``[provider]``: the model. ``timeout`` bounds each request, ``deadline`` (seconds) all
    model requests of one run, retries included; ``max_retries`` counts errors (5xx, timeouts,
    dropped connections), ``rate_limit_retries`` 429 answers."""

    kind: Literal["recorded", "scripted", "openai", "anthropic"] = "recorded"
    script: str | list | None = None  # scripted: a JSON file (relative to the harness) or turns
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = Field(default=60.0, gt=0)
    deadline: float | None = Field(default=None, gt=0)
    max_retries: int = Field(default=3, ge=0)
    rate_limit_retries: int = Field(default=10, ge=0)
    max_tokens: int = Field(default=1024, ge=1)  # anthropic: the API requires it

    @model_validator(mode="before")
    @classmethod
    def _default_key_variable(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key_env" not in data and data.get("kind") in DEFAULT_API_KEY_ENV:
            data = {**data, "api_key_env": DEFAULT_API_KEY_ENV[data["kind"]]}
        return data


class RuntimeSpec(_Model):
    entry_agent: str
    max_turns: int = Field(default=10, ge=1)
    include_prompt_text: bool = False


class ReplaySpec(_Model):
    tape: Literal["aioc", "reproduce"] = "aioc"


class Harness(_Model):
    """A validated harness document (materialized: instruction files already read)."""

    descriptor_version: str | None = None
    metadata: dict | None = None
    runtime: RuntimeSpec
    agents: dict[str, AgentSpec]
    tools: dict[str, ToolSpec] = {}
    guardrails: dict[str, GuardrailSpec] = {}
    policies: PolicySpec | None = None
    provider: ProviderSpec = ProviderSpec()
    replay: ReplaySpec = ReplaySpec()
    _document: dict | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _references(self) -> Harness:
        if self.runtime.entry_agent not in self.agents:
            raise ValueError(f"runtime.entry_agent {self.runtime.entry_agent!r} is not an agent")
        for agent_id, spec in self.agents.items():
            for tool in spec.tools:
                if tool not in self.tools:
                    raise ValueError(f"agents.{agent_id}.tools: unknown tool {tool!r}")
            for handoff in spec.handoffs:
                target = handoff if isinstance(handoff, str) else handoff.agent
                if target not in self.agents:
                    raise ValueError(f"agents.{agent_id}.handoffs: unknown agent {target!r}")
            for guardrail in spec.output_guardrails:
                if guardrail not in self.guardrails:
                    raise ValueError(f"agents.{agent_id}.output_guardrails: unknown guardrail {guardrail!r}")
        env = self.provider.api_key_env
        if env is not None and env != "" and not HARNESS_API_KEY_ENV.fullmatch(env):
            raise ValueError(
                f"provider.api_key_env: {env!r} does not name an API key variable (NAME_API_KEY); "
                "its value would be sent to provider.base_url. Name the key's variable, or pass "
                "--api-key-env on the command line")
        return self

    @property
    def descriptor_hash(self) -> str:
        return harness_hash(self.materialized())

    def materialized(self) -> dict:
        """The document as hashed: as read, with instruction files replaced by their text."""
        if self._document is not None:
            return self._document
        return self.model_dump(mode="json", exclude_unset=True)

    def harness_metadata(self) -> dict:
        """``AgentHarness.metadata`` for ``metadata.harness`` (aioc §1.9)."""
        meta = self.metadata or {}
        out = {key: meta[key] for key in ("name", "version") if key in meta}
        if self.descriptor_version is not None:
            out["descriptorVersion"] = self.descriptor_version
        out["descriptorHash"] = self.descriptor_hash
        return out

    def build(self) -> Candidate:
        """Fresh runtime objects for one replay."""
        return _Builder(self).candidate()


def harness_hash(materialized: dict) -> str:
    """aioc's ``hashAgentHarnessDescriptor``: ``"sha256:" + H(materialized document)``."""
    return "sha256:" + sha256_canonical(materialized)


# --- loading ----------------------------------------------------------------------------------


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML with YAML 1.2 core booleans (``yes``/``on`` stay strings, as js-yaml reads them)."""


_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _read_document(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read harness file: {exc.strerror}", source=str(path)) from None
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
        else:
            raise InputError("a harness file must end in .toml, .yaml or .yml", source=str(path))
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"not valid {path.suffix[1:].upper()}: {exc}", source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError("a harness file must be a table/mapping at the top level", source=str(path))
    return data


def harness_file(base: Path, name: str, allow_outside: bool, *, source: str, where: str) -> Path:
    """``base / name`` for a file a harness names, refused when it lies outside ``base`` (the
    harness's folder; symbolic links resolved) unless ``allow_outside``: the file's text goes
    into the stored replay record, so a harness must not read ``../../../../etc/passwd``."""
    path = base / name
    if allow_outside or path.resolve().is_relative_to(base.resolve()):
        return path
    raise InputError(
        f"{name!r} is outside the harness's folder {base.resolve()}; a harness reads only files "
        "beside it (to allow it: replay --allow-outside, or allow_outside = true under a sweep "
        "spec's [candidate])", source=source, path=where)


def _materialize(data: dict, base: Path, source: str, allow_outside: bool) -> dict:
    """Replace each agent's ``instructions_file`` by ``instructions`` (the file's text)."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return data
    out = dict(data)
    out["agents"] = {}
    for agent_id, spec in agents.items():
        if isinstance(spec, dict) and "instructions_file" in spec:
            spec = dict(spec)
            name = spec.pop("instructions_file")
            if "instructions" in spec:
                raise InputError("give instructions or instructions_file, not both", source=source, path=f"agents.{agent_id}")
            path = harness_file(base, str(name), allow_outside, source=source,
                                where=f"agents.{agent_id}.instructions_file")
            try:
                spec["instructions"] = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read instructions_file {name!r}: {exc.strerror}", source=source, path=f"agents.{agent_id}") from None
        out["agents"][agent_id] = spec
    return out


def _validation_message(exc: ValidationError) -> tuple[str, str | None]:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    return message, where


def parse_harness(data: dict, *, source: str = "harness", base: Path | None = None,
                  allow_outside: bool = False) -> Harness:
    """Validate a harness document (a dict as read from TOML/YAML). Files it names
    (``instructions_file``, ``provider.script``) must lie in ``base`` (default: the current
    folder) unless ``allow_outside``."""
    materialized = _materialize(data, base or Path("."), source, allow_outside)
    try:
        harness = Harness.model_validate(materialized)
    except ValidationError as exc:
        message, where = _validation_message(exc)
        raise InputError(message, source=source, path=where) from None
    harness._document = materialized
    if harness.provider.kind == "scripted" and isinstance(harness.provider.script, str) and base is not None:
        script = harness_file(base, harness.provider.script, allow_outside, source=source,
                              where="provider.script").resolve()
        harness = harness.model_copy(update={"provider": harness.provider.model_copy(update={"script": str(script)})})
    return harness


def load_harness(path: str | Path, *, allow_outside: bool = False) -> Harness:
    """Read, materialize and validate a harness file; errors name the file and the field.

    A harness file is trusted like code: it may name Python functions to import and run
    (``tools.*.implementation``) and a ``base_url`` that receives its API key variable. What it
    may not do by accident is read files outside its own folder (unless ``allow_outside``) or
    send an environment variable that is not an API key (``provider.api_key_env`` must be
    ``NAME_API_KEY``)."""
    path = Path(path)
    return parse_harness(_read_document(path), source=str(path), base=path.parent,
                         allow_outside=allow_outside)


# --- building runtime objects -----------------------------------------------------------------


@dataclass
class TurnState:
    """The current request's turn, set by the replay before each model request (guardrails
    re-applied from a recording trigger on a turn number)."""

    turn: int = 0


@dataclass
class Candidate:
    """The agent graph and settings one replay runs (the Python-object form of a candidate)."""

    entry: Agent
    policies: Policies | None = None
    max_turns: int = 10
    include_prompt_text: bool = False
    tape_rules: TapeRules = AIOC
    harness: dict = field(default_factory=dict)  # metadata.harness of the replay record
    turn_state: TurnState = field(default_factory=TurnState)
    provider: ProviderSpec | None = None


def _context_path(context: Any, path: str) -> Any:
    value = context
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


_MISSING = object()


def _args_path(arguments: Any, path: str) -> Any:
    value = arguments
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _compare(op: str, value: Any, expected: Any) -> bool:
    if op == "exists":
        return (value is not _MISSING) == bool(expected)
    if value is _MISSING:
        return False
    if op == "eq":
        return value == expected
    if op == "ne":
        return value != expected
    if op == "in":
        return isinstance(expected, list) and value in expected
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric or not isinstance(expected, (int, float)):
        return False
    return {"gt": value > expected, "gte": value >= expected, "lt": value < expected, "lte": value <= expected}[op]


def _args_match(conditions: dict[str, Any], arguments: Any) -> bool:
    for path, expected in conditions.items():
        value = _args_path(arguments, path)
        if isinstance(expected, dict) and expected and set(expected) <= _OPERATORS:
            if not all(_compare(op, value, want) for op, want in expected.items()):
                return False
        elif not _compare("eq", value, expected):
            return False
    return True


def _one_of(selector: str | list[str] | None, value: str) -> bool:
    if selector is None:
        return True
    return value in selector if isinstance(selector, list) else value == selector


def _rule_matches(rule: PolicyRule, request: PolicyInput, occurrence: int) -> bool:
    return (
        (rule.kind is None or rule.kind == request.kind)
        and _one_of(rule.name, request.name)
        and _one_of(rule.agent, request.agent_name)
        and (rule.turn is None or rule.turn == request.turn)
        and (rule.call_id is None or rule.call_id == request.call_id)
        and (rule.occurrence is None or rule.occurrence == occurrence)
        and (rule.args is None or _args_match(rule.args, request.arguments))
    )


def _rule_result(rule: PolicyRule, default_version: str | None) -> dict:
    result: dict = {"decision": rule.decision, "reason": rule.reason or "allowed_by_rule"}
    optional = {
        "publicReason": rule.public_reason,
        "resultMode": rule.result_mode,
        "policyVersion": rule.policy_version or default_version,
        "expiresAt": rule.expires_at,
        "metadata": rule.metadata,
    }
    result.update({key: value for key, value in optional.items() if value is not None})
    return result


def _policy_function(spec: PolicySpec) -> Callable[[PolicyInput], dict]:
    # Policy requests seen per (turn, call id); one function per built candidate, i.e. per run.
    seen: Counter = Counter()

    def decide(request: PolicyInput) -> dict:
        seen[request.turn, request.call_id] += 1
        occurrence = seen[request.turn, request.call_id]
        for rule in spec.rules:
            if _rule_matches(rule, request, occurrence):
                return _rule_result(rule, spec.version)
        result = {"decision": spec.default, "reason": spec.default_reason}
        if spec.version is not None:
            result["policyVersion"] = spec.version
        return result

    return decide


def _guardrail_check(spec: GuardrailSpec, state: TurnState) -> Callable[[str, Any], tuple]:
    pattern = re.compile(spec.regex) if spec.regex is not None else None

    def check(text: str, _context: Any) -> tuple[bool, str | None, dict | None]:
        if spec.turns is not None and state.turn not in spec.turns:
            return False, None, None
        if spec.contains or pattern is not None:
            hit = any(needle in text for needle in spec.contains) or bool(pattern and pattern.search(text))
        else:
            hit = True
        return (True, spec.reason, spec.metadata) if hit else (False, None, None)

    return check


def import_implementation(target: str) -> Callable[[Any, Any], Any]:
    """Resolve ``module:function`` to the callable, with a clear error when it does not exist."""
    module_name, _, attr = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot import tool implementation {target!r}: {exc}") from None
    if not callable(value):
        raise InputError(f"tool implementation {target!r} is not callable")
    return value


class _Builder:
    def __init__(self, harness: Harness):
        self.harness = harness
        self.state = TurnState()
        self.tools = {name: self._tool(name, spec) for name, spec in harness.tools.items()}
        self.guardrails = {
            name: OutputGuardrail(name, _guardrail_check(spec, self.state))
            for name, spec in harness.guardrails.items()
        }

    def _tool(self, name: str, spec: ToolSpec) -> Tool:
        func = import_implementation(spec.implementation) if spec.implementation else None
        parameters = spec.parameters if spec.parameters is not None else dict(DEFAULT_TOOL_PARAMETERS)
        return Tool(name, spec.description, parameters, func=func)

    def candidate(self) -> Candidate:
        h = self.harness
        agents = {
            agent_id: Agent(
                name=spec.name or agent_id,
                instructions=spec.instructions or "",
                model=spec.model,
                model_settings=spec.modelSettings,
                prompt_version=spec.promptVersion,
                tools=[self.tools[name] for name in spec.tools],
                output_guardrails=[self.guardrails[name] for name in spec.output_guardrails],
                handoff_description=spec.handoffDescription,
            )
            for agent_id, spec in h.agents.items()
        }
        for agent_id, spec in h.agents.items():
            agents[agent_id].handoffs = [self._handoff(entry, agents) for entry in spec.handoffs]
        policies = None
        if h.policies is not None:
            decide = _policy_function(h.policies)
            policies = Policies(tool=decide, handoff=decide)
        return Candidate(
            entry=agents[h.runtime.entry_agent],
            policies=policies,
            max_turns=h.runtime.max_turns,
            include_prompt_text=h.runtime.include_prompt_text,
            tape_rules=REPRODUCE if h.replay.tape == "reproduce" else AIOC,
            harness=h.harness_metadata(),
            turn_state=self.state,
            provider=h.provider,
        )

    @staticmethod
    def _handoff(entry: str | HandoffSpec, agents: dict[str, Agent]) -> Handoff:
        if isinstance(entry, str):
            return Handoff(agents[entry])
        enabled = None
        if entry.where is not None:
            path = entry.where.context

            def enabled(context: Any, _path: str = path) -> bool:
                return bool(_context_path(context, _path))

        return Handoff(agents[entry.agent], enabled=enabled, description=entry.description, tool_name=entry.tool_name)


# --- from a recorded run ----------------------------------------------------------------------


def _recorded_rule(decision: dict, call: dict) -> dict:
    resource = decision.get("resource") if isinstance(decision.get("resource"), dict) else {}
    reason = decision.get("reason")
    rule: dict = {"decision": decision.get("decision"), "reason": reason if isinstance(reason, str) and reason.strip() else "recorded_decision"}
    has_output = call["hasOutput"]
    output = call.get("output")
    if "publicReason" in decision:
        rule["public_reason"] = decision["publicReason"]
    elif "resultMode" not in decision and isinstance(output, dict) and isinstance(output.get("publicReason"), str):
        # Legacy decisions (no resultMode) did not record publicReason; the envelope kept the
        # text shown. A newer decision without one had none: the runtime fills its default.
        rule["public_reason"] = output["publicReason"]
    if decision.get("decision") != "allow":
        # Legacy decisions lack resultMode; an output item shows it was tool_result.
        rule["result_mode"] = decision.get("resultMode") or ("tool_result" if has_output else "throw")
    for key, name in (("policyVersion", "policy_version"), ("expiresAt", "expires_at"), ("metadata", "metadata")):
        if key in decision:
            rule[name] = decision[key]
    if resource.get("kind") in ("tool", "handoff"):
        rule["kind"] = resource["kind"]
    rule.update(turn=decision.get("turn"), call_id=decision.get("callId"), label=RECORDED)
    return rule


def _inferred_rule(join: Any, turn: Any) -> dict:
    """A rule for a call that has an output but no recorded decision (records before decisions)."""
    status, code = join.envelope_status, join.envelope_code
    rule: dict = {"turn": turn, "call_id": join.call.get("callId"), "label": "inferred"}
    if status in ("denied", "approval_required"):
        decision = "deny" if status == "denied" else "require_approval"
        rule.update(decision=decision, reason=code or "recorded", result_mode="tool_result")
    else:
        rule.update(decision="allow", reason="recorded_output")
    return rule


def _number_shared_call_ids(rules: list[dict]) -> None:
    """Rules for calls that share a turn and call id (providers reuse ids) get their position
    among them: the n-th policy request with that key gets the n-th call's decision, not the
    first one's for all."""
    shared = Counter((rule["turn"], rule["call_id"]) for rule in rules)
    position: Counter = Counter()
    for rule in rules:
        key = (rule["turn"], rule["call_id"])
        if shared[key] > 1:
            position[key] += 1
            rule["occurrence"] = position[key]


def _recorded_guardrails(source: dict, turn_agents: dict[Any, str]
                         ) -> tuple[dict[str, dict], dict[str, list[str]] | None]:
    """The recorded guardrails as specs (tripping on their recorded turns), and which agent ran
    each: an agent's guardrails run on its own turns only, so they belong to the agent of the
    turns they were recorded on (``None`` when a decision's turn has no recorded request: then
    every agent gets every guardrail)."""
    guardrails: dict[str, dict] = {}
    guarded: dict[str, list[str]] | None = {}
    for decision in source.get("guardrailDecisions") or []:
        if not isinstance(decision, dict) or not isinstance(decision.get("guardrailName"), str):
            continue
        name = decision["guardrailName"]
        spec = guardrails.setdefault(name, {"turns": [], "label": RECORDED})
        if decision.get("decision") == "triggered" and isinstance(decision.get("turn"), int):
            spec["turns"].append(decision["turn"])
            for key in ("reason", "metadata"):
                if key in decision:
                    spec[key] = decision[key]
        owner = turn_agents.get(decision.get("turn"))
        if owner is None:
            guarded = None
        elif guarded is not None and name not in guarded.setdefault(owner, []):
            guarded[owner].append(name)
    return guardrails, guarded


def _max_turns(source: dict, request_count: int) -> int:
    """The source's own limit when it ran out of turns, else room for every recorded request."""
    if source.get("errorName") == "MaxTurnsExceededError":
        match = re.search(r"(\d+)\s*$", source.get("errorMessage") or "")
        if match:
            return max(int(match.group(1)), 1)
    return max(request_count, 1)


def harness_from_source(source: dict) -> Harness:
    """A harness that reproduces ``source`` (see the module docstring)."""
    analysis = analyze(source)
    decisions = source.get("policyDecisions") or []
    agents: dict[str, dict] = {}

    def agent(name: Any) -> dict:
        key = str(name)
        return agents.setdefault(key, {"tools": [], "handoffs": []})

    entry = analysis.initial_agent if isinstance(analysis.initial_agent, str) else str(source.get("agentName") or "agent")
    agent(entry)
    snapshots = {s.get("turn"): s for s in source.get("promptSnapshots") or [] if isinstance(s, dict)}
    reqs = recorded_requests(source)
    request_of_item: dict[int, RecordedRequest] = {}
    for req in reqs:
        request_of_item.update(dict.fromkeys(range(req.start, req.end), req))
        spec = agent(req.agent)
        snapshot = snapshots.get(req.turn) or {}
        if "model" not in spec and isinstance(req.model, str):
            spec["model"] = req.model
        if "instructions" not in spec and isinstance(snapshot.get("promptText"), str):
            spec["instructions"] = snapshot["promptText"]
        if "promptVersion" not in spec and isinstance(snapshot.get("promptVersion"), str):
            spec["promptVersion"] = snapshot["promptVersion"]

    tools: dict[str, dict] = {}
    rules: list[dict] = []
    for join in analysis.tool_calls:
        req = request_of_item.get(join.call_item_index) if join.call_item_index is not None else None
        if join.in_input or req is None:
            continue
        name = join.call.get("name")
        owner = agent(req.agent)
        known = join.policy_decision_index is not None or join.call["hasOutput"]
        if join.is_handoff and join.handoff_target is not None:
            target = str(join.handoff_target)
            agent(target)
            if not any(h["tool_name"] == name for h in owner["handoffs"]):
                owner["handoffs"].append({"agent": target, "tool_name": name})
        elif known and not join.is_handoff and isinstance(name, str):
            tools.setdefault(name, {"description": "Recorded tool.", "parameters": {}})
            if name not in owner["tools"]:
                owner["tools"].append(name)
        # A call with neither decision nor output named a tool the agent did not have.
        if join.policy_decision_index is not None:
            rules.append(_recorded_rule(decisions[join.policy_decision_index], join.call))
        elif join.call["hasOutput"]:
            rules.append(_inferred_rule(join, req.turn))
    _number_shared_call_ids(rules)

    guardrails, guarded = _recorded_guardrails(source, {req.turn: str(req.agent) for req in reqs})
    for name, spec in agents.items():
        spec["output_guardrails"] = guarded.get(name, []) if guarded is not None else list(guardrails)
        if not spec["handoffs"]:
            del spec["handoffs"]

    document = {
        "metadata": {"name": f"from-source:{source.get('runId')}", "source": RECORDED},
        "runtime": {
            "entry_agent": entry,
            "max_turns": _max_turns(source, len(reqs) + 1),
            "include_prompt_text": any("promptText" in s for s in snapshots.values()),
        },
        "agents": {name: {"name": name, **spec} for name, spec in agents.items()},
        "tools": tools,
        "guardrails": guardrails,
        "policies": {"default": "deny", "default_reason": "no_recorded_decision", "rules": rules},
        "provider": {"kind": "recorded"},
        "replay": {"tape": "reproduce"},
    }
    return parse_harness(document, source=f"from-source harness of {source.get('runId')}")
