"""Sweep spec validation: good specs load with defaults, bad ones name the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.sweep.spec import SIGNALS, load_spec, parse_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"

MINIMAL = """
name = "nightly"
[select]
query = "status = 'completed'"
[candidate]
from_source = true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_spec_gets_aioc_default_classification(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    assert spec.name == "nightly"
    assert spec.replay.mode == "strict" and spec.replay.input_mode == "recorded"
    assert spec.replay.matching == "aioc"
    assert spec.classify.fail_on == ["replay_error", "candidate_failed"]
    assert spec.classify.warn_on == ["not_equal"]
    assert spec.workers == 1 and spec.schedule is None
    assert spec.spec_hash.startswith("sha256:") and len(spec.spec_hash) == 71


def test_harness_path_resolves_against_spec_folder(tmp_path):
    (tmp_path / "h.toml").write_text("", encoding="utf-8")
    text = MINIMAL.replace("from_source = true", 'harness = "h.toml"')
    spec = load_spec(write(tmp_path, text))
    assert spec.candidate.harness == str((tmp_path / "h.toml").resolve())


def test_shipped_examples_load():
    examples = sorted(EXAMPLES.glob("sweep-*.toml"))
    assert examples, "docs/examples/sweep-*.toml are missing"
    for path in examples:
        spec = load_spec(path)
        assert spec.schedule is not None, path


@pytest.mark.parametrize(
    ("edit", "where", "fragment"),
    [
        (lambda t: t.replace('name = "nightly"', ""), "at name", "required key is missing"),
        (lambda t: t.replace("from_source = true", ""), "at candidate", "exactly one of"),
        (lambda t: t.replace("from_source = true", 'from_source = true\nharness = "x.toml"'),
         "at candidate", "got harness, from_source"),
        (lambda t: t + "\n[select.extra]\n", "at select.extra", "unknown key"),
        (lambda t: t.replace("[select]", "[select]\nsample = 0"), "at select.sample", "greater than 0"),
        (lambda t: t + '\n[replay]\nmode = "fast"\n', "at replay.mode", "'strict'"),
        (lambda t: t + '\n[classify]\nfail_on = ["explodes"]\n', "at classify.fail_on.0", "replay_error"),
        (lambda t: t + '\n[schedule]\ncron = "every day"\n', "at schedule.cron", "5-field cron"),
        (lambda t: t + '\n[schedule]\ncron = "0 3 * * *"\ntimezone = "Mars/Base"\n',
         "at schedule.timezone", "unknown time zone"),
        (lambda t: "workers = 0\n" + t, "at workers", "greater than or equal to 1"),
        (lambda t: t.replace('"nightly"', '"night ly"'), "at name", "pattern"),
    ],
)
def test_bad_specs_name_file_and_field(tmp_path, edit, where, fragment):
    path = write(tmp_path, edit(MINIMAL))
    with pytest.raises(InputError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert where in message and fragment in message, message
    assert "\n" not in message


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="invalid TOML"):
        load_spec(write(tmp_path, "name = \n"))
    with pytest.raises(InputError, match="no such sweep spec file"):
        load_spec(tmp_path / "absent.toml")


def test_expectation_uses_aioc_key_names(tmp_path):
    text = MINIMAL + '\n[expectation]\nintent = "refund"\nshould_avoid_tools = ["delete"]\n'
    spec = load_spec(write(tmp_path, text))
    assert spec.expectation.to_aioc() == {"intent": "refund", "shouldAvoidTools": ["delete"]}


def test_every_signal_is_a_valid_rule_name(tmp_path):
    signals = ", ".join(f'"{s}"' for s in SIGNALS)
    spec = load_spec(write(tmp_path, MINIMAL + f"\n[classify]\nwarn_on = [{signals}]\n"))
    assert list(spec.classify.warn_on) == list(SIGNALS)


@settings(max_examples=60, deadline=None)
@given(
    sample=st.none() | st.integers(1, 10_000),
    seed=st.integers(-(2**31), 2**31),
    workers=st.integers(1, 64),
    tools=st.lists(st.text(min_size=1, max_size=8), max_size=4),
)
def test_spec_hash_is_stable_and_sensitive(sample, seed, workers, tools):
    data = {
        "name": "s",
        "select": {"query": "status = 'failed'", "seed": seed} | ({"sample": sample} if sample else {}),
        "candidate": {"from_source": True},
        "classify": {"tools": tools},
        "workers": workers,
    }
    one = parse_spec(data, source="mem")
    assert one.spec_hash == parse_spec(dict(reversed(list(data.items()))), source="mem").spec_hash
    # workers only change speed: an unfinished run may resume with another worker count
    faster = parse_spec(data | {"workers": workers % 64 + 1}, source="mem")
    assert faster.spec_hash == one.spec_hash
    changed = parse_spec(data | {"select": data["select"] | {"seed": seed + 1}}, source="mem")
    assert changed.spec_hash != one.spec_hash
