"""The candidate of a sweep, ready to replay one source run after another.

Three kinds (``[candidate]`` in the spec):

* ``harness = FILE`` — a replay harness file (``recstore.replay.harness``), loaded once;
* ``from_source = true`` — a harness derived from each source run, optionally with some tools
  replaced (``[candidate.tools.NAME]``), so the replay reproduces the run except where the tool
  changed;
* ``command = [ARGV...]`` — an external replayer (the user's own runtime): it reads the source
  RunRecord as JSON on stdin and prints the replay RunRecord as JSON on stdout. The replay mode
  and input mode are in ``RECSTORE_REPLAY_MODE`` / ``RECSTORE_REPLAY_INPUT_MODE``.

Whatever the kind, :meth:`PreparedCandidate.replay` returns a :class:`CaseReplay`: the replay
record (or ``None``), a JSON report with the replay's status and per-call provenance, and the
reason the replay did not complete, if it did not.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from dataclasses import dataclass
from typing import Any

from recstore.errors import InputError, RecstoreError
from recstore.sweep.spec import SweepSpec

#: Replay report statuses that mean the replay stopped where the source did not (aioc's
#: "replay error": strict miss, policy throw, candidate crash).
STOPPED = ("incomplete", "error")


@dataclass(frozen=True)
class CaseReplay:
    """One replay: the record (None when none was produced), its report, and why it stopped."""

    record: dict | None
    report: dict
    error: str | None


class PreparedCandidate:
    """A spec's candidate, loaded once per worker process."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        candidate = spec.candidate
        self.harness = None
        if candidate.harness:
            from recstore.replay.harness import load_harness

            self.harness = load_harness(candidate.harness)
        if spec.replay.matching != "aioc" and not candidate.command:
            raise InputError("only aioc matching is available for harness and from_source "
                             "candidates in this recstore", path="replay.matching")

    @property
    def descriptor(self) -> dict | None:
        """The harness document a judge may see (``candidateDescriptor``)."""
        return self.harness.materialized() if self.harness is not None else None

    def replay(self, source: dict) -> CaseReplay:
        """Replay one source run."""
        if self.spec.candidate.command:
            return self._replay_command(source)
        return self._replay_harness(source)

    def _replay_harness(self, source: dict) -> CaseReplay:
        from recstore.replay.replay import error_outcome, replay_run

        spec = self.spec
        try:
            harness = self.harness if self.harness is not None else self._source_harness(source)
            on_missing = spec.replay.on_missing
            outcome = replay_run(source, harness, spec.replay.mode, spec.replay.input_mode,
                                 on_missing=(lambda _call: on_missing) if on_missing else None)
        except RecstoreError as exc:
            outcome = error_outcome(source, spec.replay.mode, spec.replay.input_mode, exc)
        report = outcome.report.to_json()
        error = None
        if report["status"] in STOPPED:
            error = report.get("reason") or (report.get("error") or {}).get("message") or report["status"]
        return CaseReplay(outcome.record, report, error)

    def _source_harness(self, source: dict) -> Any:
        from recstore.replay.harness import harness_from_source, parse_harness

        derived = harness_from_source(source)
        overrides = self.spec.candidate.tools
        if not overrides:
            return derived
        document = copy.deepcopy(derived.materialized())
        for name, override in overrides.items():
            if name in document.get("tools", {}):
                document["tools"][name] = {**document["tools"][name], **override}
        return parse_harness(document, source=f"from-source harness of {source.get('runId')} "
                                              f"with sweep tool overrides")

    def _replay_command(self, source: dict) -> CaseReplay:
        spec = self.spec
        argv = spec.candidate.command or []
        env = os.environ | {"RECSTORE_REPLAY_MODE": spec.replay.mode,
                            "RECSTORE_REPLAY_INPUT_MODE": spec.replay.input_mode,
                            "RECSTORE_SWEEP": spec.name}
        report: dict[str, Any] = {"status": "error", "mode": spec.replay.mode,
                                  "inputMode": spec.replay.input_mode, "command": argv, "calls": []}
        try:
            done = subprocess.run(argv, input=json.dumps(source, ensure_ascii=False), env=env,
                                  capture_output=True, text=True, timeout=spec.candidate.timeout,
                                  check=False)
        except FileNotFoundError:
            return self._command_error(report, f"candidate command {argv[0]!r} not found")
        except subprocess.TimeoutExpired:
            return self._command_error(report, f"candidate command timed out after "
                                               f"{spec.candidate.timeout:g}s")
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return self._command_error(report, f"candidate command exited with {done.returncode}: {last}")
        try:
            record = _command_record(done.stdout, argv[0])
        except InputError as exc:
            return self._command_error(report, str(exc))
        metadata = record.get("metadata")
        if isinstance(metadata, dict) and "replayOfRunId" not in metadata:
            # recstore's lineage convention (aioc §6.9): a replay names its source run.
            record["metadata"] = {"replayOfRunId": source.get("runId"), **metadata}
        elif metadata is None:
            record["metadata"] = {"replayOfRunId": source.get("runId")}
        stopped = record.get("status") == "failed" and source.get("status") != "failed"
        report.update(status="incomplete" if stopped else "completed",
                      replayRunId=record.get("runId"), replayStatus=record.get("status"))
        error = f"{record.get('errorName')}: {record.get('errorMessage')}" if stopped else None
        return CaseReplay(record, report, error)

    @staticmethod
    def _command_error(report: dict, message: str) -> CaseReplay:
        report["reason"] = message
        return CaseReplay(None, report, message)


def _command_record(stdout: str, name: str) -> dict:
    from recstore.formats.aioc import validate_run_record

    try:
        value = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise InputError(f"candidate command {name!r} printed no RunRecord JSON "
                         f"({exc.msg} at line {exc.lineno})") from None
    validate_run_record(value, source=f"candidate command {name!r} output")
    return value


def prepare_candidate(spec: SweepSpec) -> PreparedCandidate:
    """Load the spec's candidate (harness files are read once here)."""
    return PreparedCandidate(spec)
