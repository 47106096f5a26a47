"""The candidate of a sweep, ready to replay one source run after another.

Three kinds (``[candidate]`` in the spec), all run by the replay layer:

* ``harness = FILE`` — a replay harness file (:mod:`recstore.replay.harness`), loaded once;
* ``from_source = true`` — a harness derived from each source run, optionally with some tools
  replaced (``[candidate.tools.NAME]``), so the replay reproduces the run except where the tool
  changed;
* ``command = [ARGV...]`` — an external replayer speaking ``recstore-replayer/1``
  (:mod:`recstore.replay.external`, ``schema/replayer-protocol.json``): the user's own runtime.

Whatever the kind, :meth:`PreparedCandidate.replay` returns a :class:`CaseReplay`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from recstore.errors import InputError, RecstoreError
from recstore.sweep.spec import SweepSpec

#: Replay report statuses that mean the replay stopped where the source did not (aioc's
#: "replay error": strict miss, policy throw, candidate crash, replayer failure).
STOPPED = ("incomplete", "error")


@dataclass(frozen=True)
class CaseReplay:
    """One replay: the record (None when none was produced), the replay layer's
    ``ReplayReport``, why it stopped (None when it did not) and the provider's name."""

    record: dict | None
    report: Any
    error: str | None
    provider: str


class PreparedCandidate:
    """A spec's candidate, loaded once per worker process."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self.harness = None
        if spec.candidate.harness:
            from recstore.replay.harness import load_harness

            self.harness = load_harness(spec.candidate.harness,
                                        allow_outside=spec.candidate.allow_outside)
        if spec.replay.matching != "aioc" and not spec.candidate.command:
            raise InputError("matching = 'agentuse' needs an external replayer (candidate.command); "
                             "harness replays use aioc's rules", path="replay.matching")

    @property
    def waits(self) -> bool:
        """Whether a replay mostly waits (an HTTP model or an external command): then many run
        at once."""
        if self.spec.candidate.command:
            return True
        return self.harness is not None and self.harness.provider.kind in ("openai", "anthropic")

    @property
    def descriptor(self) -> dict | None:
        """The harness document a judge may see (``candidateDescriptor``)."""
        return self.harness.materialized() if self.harness is not None else None

    def replay(self, source: dict, run_key: str, source_uri: str | None) -> CaseReplay:
        """Replay one source run (``run_key`` and ``source_uri`` name it to external replayers)."""
        if self.spec.candidate.command:
            return self._replay_external(source, run_key, source_uri)
        return self._replay_harness(source)

    def _replay_harness(self, source: dict) -> CaseReplay:
        from recstore.replay.replay import error_outcome, provider_for, replay_run

        spec = self.spec
        provider_name = ""
        try:
            harness = self.harness if self.harness is not None else self._source_harness(source)
            provider = provider_for(harness.provider, source)
            provider_name = provider.name
            on_missing = spec.replay.on_missing
            outcome = replay_run(source, harness, spec.replay.mode, spec.replay.input_mode,
                                 on_missing=(lambda _call: on_missing) if on_missing else None,
                                 provider=provider)
        except RecstoreError as exc:
            outcome = error_outcome(source, spec.replay.mode, spec.replay.input_mode, exc)
        return CaseReplay(outcome.record, outcome.report, _stop_reason(outcome.report), provider_name)

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
                                              f"with the sweep's tool overrides")

    def _replay_external(self, source: dict, run_key: str, source_uri: str | None) -> CaseReplay:
        from recstore.replay.external import build_request, replay_external

        spec = self.spec
        request = build_request(source, run_key=run_key, source_uri=source_uri,
                                mode=spec.replay.mode, input_mode=spec.replay.input_mode,
                                matching=spec.replay.matching, timeout=spec.candidate.timeout)
        outcome = replay_external(source, spec.candidate.command or [], request)
        return CaseReplay(outcome.record, outcome.report, _stop_reason(outcome.report),
                          outcome.provider)


def _stop_reason(report: Any) -> str | None:
    if report.status not in STOPPED:
        return None
    return report.reason or (report.error or {}).get("message") or report.status


def prepare_candidate(spec: SweepSpec) -> PreparedCandidate:
    """Load the spec's candidate (harness files are read once here)."""
    return PreparedCandidate(spec)
