"""The harness document: pydantic models of a harness file (agents, tools, policies,
guardrails, provider, replay settings) and its aioc descriptor hash."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from recstore.canonical import sha256_canonical

if TYPE_CHECKING:
    from recstore.replay.harness.build import Candidate


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


POLICY_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"})


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
#: a provider given apart from the file (``api_key_env`` of a ProviderSpec in code, ``replay
#: --api-key-env`` on the command line) may name any variable.
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
                "its value would be sent to provider.base_url. Name the key's variable, or give "
                "any variable as `api_key_env` apart from the harness file")
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
        from recstore.replay.harness.build import build_candidate

        return build_candidate(self)


def harness_hash(materialized: dict) -> str:
    """aioc's ``hashAgentHarnessDescriptor``: ``"sha256:" + H(materialized document)``."""
    return "sha256:" + sha256_canonical(materialized)
