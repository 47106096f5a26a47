"""Running plans through the real runtime with a deterministic clock and ids, and writing the
corpus as NDJSON (``generate_corpus``, ``write_corpus``, ``ndjson_line``)."""

from __future__ import annotations

import gzip
import json
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from recstore.files import private_open
from recstore.runtime import (
    ModelResponse,
    Policies,
    ProviderFailure,
    ProviderToolCall,
    ScriptedProvider,
    run,
)
from recstore.synth.agents import _SUITES
from recstore.synth.cases import _ALLOW, _EPOCH_MS, _ESCAPED
from recstore.synth.changes import _apply_change, _change_kind
from recstore.synth.plans import _Call, _entry, _Plan, _plan


def _clock(seed: int, index: int) -> Callable[[], str]:
    """ISO timestamps that advance 1-2500 ms per call, from a start that depends on the case only
    (so a candidate case that behaves the same gets the same timestamps)."""
    rng = random.Random(f"recstore-synth:{seed}:{index}:clock")
    now_ms = [_EPOCH_MS + index * 420_000 + int(rng.random() * 360_000)]

    def tick() -> str:
        now_ms[0] += 1 + int(rng.random() * 2500)
        days, rest = divmod(now_ms[0], 86_400_000)
        hours, rest = divmod(rest, 3_600_000)
        minutes, rest = divmod(rest, 60_000)
        seconds, millis = divmod(rest, 1000)
        return f"{_iso_date(days)}T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"
    return tick


@lru_cache(maxsize=1024)
def _iso_date(days_since_epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(days_since_epoch * 86_400))


def _policy(plan: _Plan) -> Policies | None:
    if not plan.policies:
        return None
    # Keyed by (request turn, callId, position among the calls with both): providers reuse
    # callIds across turns and within one.
    planned: Counter = Counter()
    decisions: dict[tuple, Any] = {}
    for t, turn in enumerate(plan.turns):
        for c in turn if isinstance(turn, list) else ():
            planned[t + 1, c.call_id] += 1
            decisions[t + 1, c.call_id, planned[t + 1, c.call_id]] = c.decision
    seen: Counter = Counter()

    def decide(policy_input: Any) -> Any:
        key = (policy_input.turn, policy_input.call_id)
        seen[key] += 1
        decision = decisions.get((*key, seen[key]))
        if decision == "raise":
            raise _PolicyBackendError("policy backend unavailable (503)")
        return decision or _ALLOW
    return Policies(tool=decide, handoff=decide)


class _PolicyBackendError(Exception):
    error_name = "PolicyBackendError"


def _script(plan: _Plan) -> list[ModelResponse | ProviderFailure]:
    script: list[ModelResponse | ProviderFailure] = []
    for turn in plan.turns:
        if isinstance(turn, ProviderFailure):
            script.append(turn)
        elif isinstance(turn, str):
            script.append(ModelResponse(text=turn))
        else:
            script.append(ModelResponse(tool_calls=[ProviderToolCall(c.call_id, c.name, _raw(c)) for c in turn]))
    return script


def _raw(call: _Call) -> str:
    """The provider's argument string: verbatim for raw cases, else compact JSON."""
    if call.raw:
        return call.arguments
    return json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))


def _run_plan(seed: int, plan: _Plan, variant: str) -> dict:
    ids = random.Random(f"recstore-synth:{seed}:{plan.index}:{variant}:id")
    result = run(
        _entry(plan), plan.input, provider=ScriptedProvider(_script(plan)), context=plan.context,
        max_turns=plan.max_turns, policies=_policy(plan), metadata=plan.meta,
        include_prompt_text=plan.suite.name == "research",  # that team records prompts; others do not
        clock=_clock(seed, plan.index), id_factory=lambda: str(uuid.UUID(int=ids.getrandbits(128), version=4)),
    )
    return result.record


def generate_corpus(n: int, seed: int = 0, variant: str = "baseline") -> Iterator[dict]:
    """Yield ``n`` RunRecords (JSON-form dicts) for cases ``case-00001``… of ``seed``.

    ``variant`` is ``"baseline"`` or ``"candidate"`` (see the module docstring and
    ``case_changes``). Deterministic: the same arguments give identical records.
    """
    if variant not in _SUITES:
        raise ValueError(f"variant must be 'baseline' or 'candidate', not {variant!r}")
    for index in range(n):
        plan = _plan(seed, index, variant)
        if variant == "candidate":
            kind = _change_kind(seed, index, plan)
            if kind != "none":
                _apply_change(plan, kind, seed)
        yield _run_plan(seed, plan, variant)


def write_corpus(path: str | Path, n: int, seed: int = 0, variant: str = "baseline") -> Path:
    """Write ``generate_corpus(n, seed, variant)`` as NDJSON, gzip-compressed when ``path`` ends
    in ``.gz`` (with a fixed header, so equal corpora are equal bytes)."""
    path = Path(path)
    with private_open(path, "wb") as raw:
        out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) if path.suffix == ".gz" else raw
        with out:
            for record in generate_corpus(n, seed, variant):
                out.write(ndjson_line(record))
    return path


def ndjson_line(record: dict) -> bytes:
    """One NDJSON line (UTF-8, newline-terminated): compact JSON in which lone surrogates (not
    encodable) and U+2028/U+2029 (line breaks to ``str.splitlines``) are ``\\uXXXX`` escapes."""
    try:
        line = orjson.dumps(record)
    except orjson.JSONEncodeError:  # lone surrogates, integers beyond 64 bits
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8") + b"\n"
    if b"\xe2\x80\xa8" in line or b"\xe2\x80\xa9" in line:
        line = line.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return line + b"\n"
