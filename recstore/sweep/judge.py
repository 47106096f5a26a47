"""External judges: a command that reads one sweep case as JSON on stdin and prints a verdict.

The verdict is aioc's ``RunJudgeResult`` (docs/aioc-runrecord.md §7.1–7.2), validated strictly:
``{verdict: pass|warn|fail, summary, findings: [{severity: info|warn|error, reason, evidence?}],
score?, judgeModel?, judgePromptVersion?}``. Like aioc's ``parseRunJudgeResult``, the JSON may be
wrapped in a Markdown code fence. Anything else is a :class:`JudgeError` naming the command.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recstore.errors import CommandError, JudgeError
from recstore.jsonout import dumps
from recstore.process import DEFAULT_MAX_OUTPUT_BYTES, run_command, utf8_output
from recstore.sweep.spec import JudgeSpec

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


class JudgeFinding(BaseModel):
    """One finding of a judge."""

    model_config = ConfigDict(extra="forbid")
    severity: Literal["info", "warn", "error"]
    reason: str
    evidence: Any = None


class RunJudgeResult(BaseModel):
    """aioc's judge result."""

    model_config = ConfigDict(extra="forbid")
    verdict: Literal["pass", "warn", "fail"]
    summary: str
    findings: list[JudgeFinding] = Field(default_factory=list)
    score: float | None = None
    judgeModel: str | None = None  # noqa: N815 - aioc's key names
    judgePromptVersion: str | None = None  # noqa: N815


def parse_verdict(text: str) -> dict:
    """Parse and validate a judge's output (plain JSON or one fenced JSON block)."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"output is not JSON ({exc.msg} at line {exc.lineno})") from None
    try:
        return RunJudgeResult.model_validate(value).model_dump(exclude_none=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "$"
        raise JudgeError(f"output is not a judge result: {where}: {first['msg']}") from None


def run_judge(judge: JudgeSpec, case: dict) -> dict:
    """Run the judge command on one case (in its own process group, like a replayer) and return
    its validated verdict."""
    name = judge.command[0]
    try:
        done = run_command(judge.command, dumps(case, indent=None, ascii_only=True).encode("ascii"),
                           judge.timeout, role="judge")  # ASCII: a pipe of unknown encoding
    except CommandError as exc:
        raise JudgeError(str(exc)) from None
    if done.output_exceeded:
        raise JudgeError(f"judge command {name!r} printed more than "
                         f"{DEFAULT_MAX_OUTPUT_BYTES // 2**20} MiB; it was stopped")
    if done.timed_out:
        raise JudgeError(f"judge command {name!r} timed out after {judge.timeout:g}s")
    if done.returncode != 0:
        last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1]
        raise JudgeError(f"judge command {name!r} exited with {done.returncode}: {last}")
    try:
        return parse_verdict(utf8_output(done.stdout, "output"))
    except (CommandError, JudgeError) as exc:
        raise JudgeError(f"judge command {name!r}: {exc}") from None
