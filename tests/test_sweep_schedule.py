"""The sweep scheduler with an injected fake clock: cron slots, missed slots, one instance."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError, StoreLockedError
from recstore.sweep.locks import scheduler_lock
from recstore.sweep.schedule import (
    ScheduledSweep,
    Scheduler,
    cron_lines,
    next_slot,
    slots_between,
)
from recstore.sweep.spec import ScheduleSpec, load_spec, parse_spec

REPO_ROOT = Path(__file__).resolve().parent.parent


class FakeClock:
    """A clock that only moves when the scheduler sleeps or a sweep 'takes time'."""

    def __init__(self, start: datetime):
        self.current = start
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.current += timedelta(seconds=seconds)


def sweep(name: str, cron: str, tz: str = "UTC", path: str | None = None) -> ScheduledSweep:
    spec = parse_spec(
        {
            "name": name,
            "select": {"query": "status = 'completed'"},
            "candidate": {"from_source": True},
            "schedule": {"cron": cron, "timezone": tz},
        },
        source="mem",
    )
    return ScheduledSweep(spec, Path(path or f"/specs/{name}.toml"))


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_fires_at_cron_times_without_real_sleep():
    clock = FakeClock(utc(2026, 3, 1, 10, 7))
    fired: list[tuple[str, datetime, datetime]] = []

    def fire(s, slot):
        fired.append((s.spec.name, slot, clock.now()))
        return "ok"

    events = []
    Scheduler([sweep("a", "*/15 * * * *"), sweep("b", "0 * * * *")], fire, clock=clock,
              sleep=clock.sleep, on_event=events.append).run(max_fires=6)
    # 10:15 a, 10:30 a, 10:45 a, 11:00 a+b (one each), 11:15 a
    assert [(n, s.astimezone(UTC)) for n, s, _ in fired] == [
        ("a", utc(2026, 3, 1, 10, 15)),
        ("a", utc(2026, 3, 1, 10, 30)),
        ("a", utc(2026, 3, 1, 10, 45)),
        ("a", utc(2026, 3, 1, 11, 0)),
        ("b", utc(2026, 3, 1, 11, 0)),
        ("a", utc(2026, 3, 1, 11, 15)),
    ]
    # each fire happens exactly at its slot: the scheduler slept, it did not poll
    assert all(at == slot for _, slot, at in fired)
    assert not [e for e in events if e.kind == "missed"]
    assert sum(1 for e in events if e.kind == "fired") == 6


def test_time_zone_slots_follow_local_time_across_dst():
    clock = FakeClock(utc(2026, 3, 28, 0, 0))  # Berlin switches to CEST on 29 March
    fired = []
    Scheduler([sweep("nightly", "30 2 * * *", "Europe/Berlin")],
              lambda s, slot: fired.append(slot) or "ok", clock=clock, sleep=clock.sleep).run(max_fires=3)
    assert [s.astimezone(UTC) for s in fired] == [
        utc(2026, 3, 28, 1, 30),   # 02:30 CET
        utc(2026, 3, 29, 1, 0),    # 02:30 does not exist that night: 03:00 CEST, once
        utc(2026, 3, 30, 0, 30),   # 02:30 CEST
    ]


def test_missed_slots_while_down_are_reported_not_piled_up():
    clock = FakeClock(utc(2026, 3, 5, 9, 10))
    fired, events = [], []
    last = {"hourly": utc(2026, 3, 5, 4, 0)}  # last scheduled run; down since then
    Scheduler([sweep("hourly", "0 * * * *")], lambda s, slot: fired.append(slot) or "ok",
              clock=clock, sleep=clock.sleep, last_fired=last.get,
              on_event=events.append).run(max_fires=1)
    missed = [e for e in events if e.kind == "missed"]
    assert len(missed) == 1
    assert [m.astimezone(UTC).hour for m in missed[0].missed] == [5, 6, 7, 8, 9]
    assert "skipped 5 missed slots while down" in missed[0].line()
    # the next run is the next regular slot, once
    assert [s.astimezone(UTC) for s in fired] == [utc(2026, 3, 5, 10, 0)]


def test_slow_sweep_skips_slots_that_passed_while_running():
    clock = FakeClock(utc(2026, 3, 5, 0, 0))
    fired, events = [], []

    def slow_fire(s, slot):
        fired.append(slot)
        clock.current += timedelta(minutes=25)  # the sweep takes 25 minutes
        return "ok"

    Scheduler([sweep("tight", "*/10 * * * *")], slow_fire, clock=clock, sleep=clock.sleep,
              on_event=events.append).run(max_fires=2)
    assert [s.astimezone(UTC).minute for s in fired] == [10, 40]
    missed = [e for e in events if e.kind == "missed"]
    assert [tuple(m.astimezone(UTC).minute for m in e.missed) for e in missed] == [(20, 30), (50, 0)]


def test_a_failing_sweep_is_reported_and_the_schedule_continues():
    clock = FakeClock(utc(2026, 1, 1))
    events = []
    calls = []

    def fire(s, slot):
        calls.append(slot)
        if len(calls) == 1:
            raise RuntimeError("store unreachable")
        return "3 cases: 3 pass"

    Scheduler([sweep("x", "0 0 * * *")], fire, clock=clock, sleep=clock.sleep,
              on_event=events.append).run(max_fires=2)
    kinds = [e.kind for e in events if e.kind in ("error", "fired")]
    assert kinds == ["error", "fired"]
    assert "store unreachable" in events[[e.kind for e in events].index("error")].message


def test_until_stops_before_a_later_slot():
    clock = FakeClock(utc(2026, 1, 1))
    count = Scheduler([sweep("x", "0 */6 * * *")], lambda s, slot: "ok", clock=clock,
                      sleep=clock.sleep).run(until=utc(2026, 1, 2))
    assert count == 4  # 06, 12, 18, 00


def test_spec_without_schedule_and_duplicate_names_are_refused():
    plain = parse_spec({"name": "p", "select": {"query": "x = 1"}, "candidate": {"from_source": True}},
                       source="mem")
    with pytest.raises(InputError, match="no \\[schedule\\] section"):
        Scheduler([ScheduledSweep(plain, Path("p.toml"))], lambda s, t: "")
    with pytest.raises(InputError, match="share a sweep name"):
        Scheduler([sweep("a", "* * * * *"), sweep("a", "0 * * * *")], lambda s, t: "")


@settings(max_examples=40, deadline=None)
@given(
    minute=st.integers(0, 59),
    step=st.sampled_from([5, 15, 30]),
    start=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 1, 1)),
    hours=st.integers(1, 24),
)
def test_slots_between_are_ordered_cron_matches_in_range(minute, step, start, hours):
    schedule = ScheduleSpec(cron=f"{minute % step}/{step} * * * *", timezone="UTC")
    start = start.replace(tzinfo=UTC)
    end = start + timedelta(hours=hours)
    slots = slots_between(schedule, start, end)
    assert all(start < s <= end for s in slots)
    assert slots == sorted(set(slots))
    assert all(s.minute % step == minute % step and s.second == 0 for s in slots)
    assert len(slots) in range(hours * 60 // step - 1, hours * 60 // step + 2)
    assert next_slot(schedule, end) > end


def test_second_scheduler_on_the_same_store_is_refused(tmp_path):
    db = tmp_path / "store.duckdb"
    with scheduler_lock(db) as lock:
        assert (tmp_path / "store.duckdb.sweep.lock").read_text().strip() == str(os.getpid())
        with pytest.raises(StoreLockedError, match=f"PID {os.getpid()}"):
            scheduler_lock(db).acquire()
        # a different process is refused too, and is told who holds the lock
        probe = textwrap.dedent(f"""
            from recstore.errors import StoreLockedError
            from recstore.sweep.locks import scheduler_lock
            try:
                scheduler_lock({str(db)!r}).acquire()
            except StoreLockedError as exc:
                print(exc)
        """)
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert f"PID {os.getpid()}" in out.stdout
        assert lock.path.stat().st_mode & 0o777 == 0o600
    # released: another instance may start now
    with scheduler_lock(db):
        pass


def test_cron_lines_run_the_same_sweep_command(tmp_path):
    s = sweep("nightly", "30 2 * * 1-5", "Europe/Berlin", path="/specs/nightly%x.toml")
    text = cron_lines(s, tmp_path / "s.duckdb", python="/venv/bin/python", workdir=tmp_path)
    comment, tz, line = text.splitlines()
    assert comment.startswith("# recstore sweep nightly:")
    assert tz == "CRON_TZ=Europe/Berlin"
    assert line.startswith("30 2 * * 1-5 cd ")
    assert f"/venv/bin/python -m recstore --db {tmp_path / 's.duckdb'} sweep run /specs/nightly\\%x.toml" in line
    assert "%" not in line.replace("\\%", "")


def test_cli_schedule_refuses_a_second_scheduler_naming_the_holder(tmp_path):
    from recstore.store import Store

    from .conftest import AIOC_FIXTURES

    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    spec = tmp_path / "nightly.toml"
    spec.write_text('name = "nightly"\n[select]\nquery = "status = \'completed\'"\n[candidate]\n'
                    'from_source = true\n[schedule]\ncron = "0 3 * * *"\n', encoding="utf-8")
    with scheduler_lock(db):
        out = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "schedule",
                              str(spec)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"PID {os.getpid()}" in out.stderr and "Traceback" not in out.stderr
    cron = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "cron", str(spec)],
                          capture_output=True, text=True, timeout=60)
    assert cron.returncode == 0 and cron.stdout.splitlines()[2].startswith("0 3 * * * cd ")


def test_scheduled_fires_are_ordinary_sweep_runs_and_missed_slots_come_from_the_store(tmp_path):
    from recstore.store import Store
    from recstore.sweep.report import sweep_status
    from recstore.sweep.schedule import store_scheduler
    from recstore.synth import generate_corpus

    store = Store(tmp_path / "s.duckdb")
    store.ingest_records(list(generate_corpus(6, seed=4)), source_uri="synth")
    spec = tmp_path / "hourly.toml"
    spec.write_text('name = "hourly"\n[select]\nquery = "status = \'completed\' or status = \'failed\'"\n'
                    '[candidate]\nfrom_source = true\n[schedule]\ncron = "0 * * * *"\n', encoding="utf-8")
    sweeps = [ScheduledSweep(load_spec(spec), spec)]
    clock = FakeClock(utc(2026, 1, 1, 0, 30))
    events = []
    store_scheduler(store, sweeps, clock=clock, sleep=clock.sleep, on_event=events.append).run(max_fires=2)
    runs = sweep_status(store, "hourly")
    assert [(r["trigger"], r["scheduled_for"], r["status"]) for r in runs] == [
        ("schedule", "2026-01-01T01:00:00Z", "finished"),
        ("schedule", "2026-01-01T02:00:00Z", "finished"),
    ]
    assert all(r["case_count"] == 6 for r in runs)
    assert [e.kind for e in events if e.kind in ("fired", "error")] == ["fired", "fired"]

    # the scheduler was down from 02:00 to 06:30: the store says which slots it missed
    later = FakeClock(utc(2026, 1, 1, 6, 30))
    events.clear()
    store_scheduler(store, sweeps, clock=later, sleep=later.sleep, on_event=events.append).run(max_fires=0)
    [missed] = [e for e in events if e.kind == "missed"]
    assert [m.astimezone(UTC).hour for m in missed.missed] == [3, 4, 5, 6]
    assert len(sweep_status(store, "hourly")) == 2  # reported, not run
