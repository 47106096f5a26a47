"""aioc's own strict and hybrid replays (corpus-dev/corpus-replays.ndjson.gz) against a candidate
agent: recstore's tool tape, rebuilt from each source, serves exactly the calls aioc served from
the recording — same order, same outputs — and reproduces aioc's replayStats.

Which calls aioc served is worked out from each replay record: a call was executed when its
output is an ``ok`` (or raw) envelope of a non-handoff tool, or when it is the run's final
dangling call after an allow. aioc looks recordings up by the candidate's *schema-validated*
arguments; the candidate's schemas are not in the file, but aioc's own strict-miss messages
(``argsCanonicalJson=...``) show the two rules they apply: ``trace_id`` is stripped (zod strips
unknown keys) and ``search_docs`` fills ``limit: 5``. A test below checks those rules against
every such message.
"""

from __future__ import annotations

import re

import pytest

from recstore.canonical import canonical_json, sha256_text
from recstore.records import analyze, extract_tool_calls
from recstore.replay import AIOC, build_tape
from recstore.runtime import ABSENT

from .conftest import CORPUS_DEV, read_ndjson_gz

MISSING = re.compile(r'Missing recorded tool output for "([^"]+)"\. argsHash=([0-9a-f]{64})\. argsCanonicalJson=(.*)\Z', re.S)


@pytest.fixture(scope="module")
def corpus():
    sources = {r["runId"]: r for r in read_ndjson_gz(CORPUS_DEV / "corpus-baseline.ndjson.gz")}
    replays = read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")
    return sources, replays


def validated(name: str, arguments):
    """The candidate's argument validation, as aioc's strict-miss messages reveal it."""
    if not isinstance(arguments, dict):
        return arguments
    out = {k: v for k, v in arguments.items() if k != "trace_id"}
    if name == "search_docs":
        out.setdefault("limit", 5)
    return out


def same_value(left, right) -> bool:
    if left is ABSENT or right is ABSENT:
        return left is right
    return canonical_json(left) == canonical_json(right)


def test_validation_rules_match_every_strict_miss_message(corpus):
    _, replays = corpus
    checked = 0
    for rep in replays:
        record = rep["replayRunRecord"]
        match = MISSING.match(record.get("errorMessage") or "")
        if not match:
            continue
        last = extract_tool_calls(record)[-1]
        assert last["name"] == match.group(1)
        assert canonical_json(validated(last["name"], last["arguments"])) == match.group(3)
        assert sha256_text(match.group(3)) == match.group(2)
        checked += 1
    assert checked >= 15


def test_tape_serves_exactly_what_aioc_served(corpus):
    sources, replays = corpus
    assert len(replays) == 120 and {r["mode"] for r in replays} == {"strict", "hybrid"}
    with_stats = 0
    for rep in replays:
        source, record, stats = sources[rep["sourceRunId"]], rep["replayRunRecord"], rep["replayStats"]
        tape = build_tape(source, AIOC)
        served, missing = [], 0
        for join in analyze(record).tool_calls:
            call = join.call
            if join.in_input or join.is_handoff:
                continue
            executed = (join.envelope_status in ("ok", "raw")) if call["hasOutput"] else join.decision == "allow"
            if not executed:
                continue
            args_hash = sha256_text(canonical_json(validated(call["name"], call["arguments"])))
            entry = tape.take(call["name"], args_hash)
            if entry is None:
                missing += 1
                continue
            assert call["hasOutput"], f"{rep['sourceRunId']}: aioc stopped on a call the tape serves"
            output = call["output"]
            assert isinstance(output, dict) and output.get("status") == "ok"
            assert same_value(entry.value, output.get("data", ABSENT)), (rep["sourceRunId"], call["name"])
            served.append(entry)
        # FIFO in record order per key: each key's entries are served in source item order.
        for key in {e.key for e in served}:
            order = [e.output_item_index for e in served if e.key == key]
            assert order == sorted(order)
        if stats is not None:
            with_stats += 1
            assert tape.recorded_tool_calls == stats["recordedToolCalls"]
            assert len(served) == stats["replayedFromRecord"]
            assert missing == stats["missingToolCalls"]
            if rep["mode"] == "strict":
                assert stats["liveFallbackCalls"] == 0
            else:
                assert stats["liveFallbackCalls"] == missing
        elif rep["mode"] == "strict":
            # aioc rejected the replay; a strict miss is exactly one missing call, the last one.
            expect = 1 if MISSING.match(record.get("errorMessage") or "") else 0
            assert missing == expect, rep["sourceRunId"]
    assert with_stats == 86
