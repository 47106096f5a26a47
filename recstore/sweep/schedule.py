"""Scheduling sweeps: a foreground scheduler over cron expressions, and crontab lines.

The scheduler owns no time of its own: a *clock* (``now()`` → aware datetime) and a *sleeper*
(``sleep(seconds)``) are injected, so tests drive it with a fake clock and never sleep. Each spec
fires at its cron slots; a slot that passed while the scheduler was down (known from the last
scheduled run recorded in the store) or while an earlier sweep was still running is *reported as
missed and skipped* — a scheduler that comes back after a week runs the next slot, not seven
sweeps at once. One scheduler per store: whoever runs it holds
:func:`recstore.sweep.locks.scheduler_lock` (``<db>.sweep.lock``) for as long as it runs.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from croniter import croniter

from recstore.errors import InputError
from recstore.sweep.spec import ScheduleSpec, SweepSpec


class Clock(Protocol):
    """Source of the current time (timezone-aware)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real wall clock, in UTC."""

    def now(self) -> datetime:
        """Current time, aware, UTC."""
        return datetime.now(UTC)


def next_slot(schedule: ScheduleSpec, after: datetime) -> datetime:
    """The first cron slot strictly after ``after`` (aware, in the schedule's zone)."""
    return croniter(schedule.cron, after.astimezone(schedule.zone)).get_next(datetime)


#: Missed slots listed at most per report (a per-minute cron down for a month has 43,200).
MAX_LISTED_SLOTS = 1000


def slots_between(schedule: ScheduleSpec, after: datetime, until: datetime,
                  limit: int | None = None) -> list[datetime]:
    """Cron slots in ``(after, until]``, the first ``limit`` of them when given."""
    slots: list[datetime] = []
    slot = next_slot(schedule, after)
    while slot <= until and (limit is None or len(slots) < limit):
        slots.append(slot)
        slot = next_slot(schedule, slot)
    return slots


@dataclass(frozen=True)
class ScheduleEvent:
    """Something the scheduler did or noticed: ``waiting``, ``fired``, ``missed``, ``error``."""

    kind: str
    sweep: str
    at: datetime
    slot: datetime | None = None
    missed: tuple[datetime, ...] = ()
    message: str = ""

    def line(self) -> str:
        """One human-readable log line."""
        stamp = self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{stamp} {self.kind:<7} {self.sweep}: {self.message}"

    def to_json(self) -> dict:
        """The event for ``sweep schedule --json`` (one JSON object per line)."""
        return {"kind": self.kind, "sweep": self.sweep, "at": self.at.isoformat(),
                "slot": self.slot.isoformat() if self.slot else None,
                "missed": [m.isoformat() for m in self.missed], "message": self.message}


#: Runs one sweep for a slot; the scheduler passes the spec, its path and the slot time.
FireFn = Callable[["ScheduledSweep", datetime], str]


@dataclass(frozen=True)
class ScheduledSweep:
    """A spec the scheduler fires, with the file it came from (for logs and cron lines)."""

    spec: SweepSpec
    path: Path

    @property
    def schedule(self) -> ScheduleSpec:
        """The spec's schedule (validated to exist by :class:`Scheduler`)."""
        assert self.spec.schedule is not None
        return self.spec.schedule


class Scheduler:
    """Fires each sweep at its cron slots until stopped (or ``max_fires``/``until`` is reached).

    ``fire(sweep, slot)`` runs one sweep and returns a one-line result for the log; an exception
    from it is reported as an ``error`` event and the scheduler carries on with the next slot.
    ``last_fired(name)`` returns the slot of the sweep's last scheduled run (from the store), so
    slots missed while the scheduler was down can be reported on start.
    """

    def __init__(
        self,
        sweeps: Sequence[ScheduledSweep],
        fire: FireFn,
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], None] = time.sleep,
        last_fired: Callable[[str], datetime | None] = lambda name: None,
        on_event: Callable[[ScheduleEvent], None] = lambda event: None,
    ):
        for sweep in sweeps:
            if sweep.spec.schedule is None:
                raise InputError("has no [schedule] section (cron and timezone)", source=str(sweep.path))
        names = [s.spec.name for s in sweeps]
        if len(set(names)) != len(names):
            raise InputError(f"two specs share a sweep name: {sorted(names)}")
        self.sweeps = list(sweeps)
        self.fire = fire
        self.clock = clock or SystemClock()
        self.sleep = sleep
        self.last_fired = last_fired
        self.on_event = on_event

    def run(self, *, max_fires: int | None = None, until: datetime | None = None) -> int:
        """Run the schedule in the foreground; returns the number of sweeps fired."""
        now = self.clock.now()
        due: dict[str, datetime] = {}
        for sweep in self.sweeps:
            last = self.last_fired(sweep.spec.name)
            if last is not None:
                missed = slots_between(sweep.schedule, last, now, limit=MAX_LISTED_SLOTS)
                self._report_missed(sweep, missed, "while down")
            due[sweep.spec.name] = next_slot(sweep.schedule, now)
            self._emit("waiting", sweep, slot=due[sweep.spec.name], message="next run at {slot}")
        fired = 0
        while max_fires is None or fired < max_fires:
            sweep = min(self.sweeps, key=lambda s: due[s.spec.name])
            slot = due[sweep.spec.name]
            if until is not None and slot > until:
                break
            self._sleep_until(slot)
            # Slots of this sweep that also passed (we were busy with another sweep): skip them and
            # run once for the latest, so a late scheduler never piles runs up.
            late = slots_between(sweep.schedule, slot, self.clock.now())
            if late:
                self._report_missed(sweep, [slot, *late[:-1]], "while busy")
                slot = late[-1]
            self._fire(sweep, slot)
            fired += 1
            after = self.clock.now()
            self._report_missed(sweep, slots_between(sweep.schedule, slot, after), "while running")
            due[sweep.spec.name] = next_slot(sweep.schedule, after)
            self._emit("waiting", sweep, slot=due[sweep.spec.name], message="next run at {slot}")
        return fired

    def _sleep_until(self, moment: datetime) -> None:
        while (remaining := (moment - self.clock.now()).total_seconds()) > 0:
            self.sleep(remaining)

    def _fire(self, sweep: ScheduledSweep, slot: datetime) -> None:
        try:
            result = self.fire(sweep, slot)
        except Exception as exc:  # noqa: BLE001 - one failed sweep must not stop the schedule
            self._emit("error", sweep, slot=slot, message=f"slot {{slot}} failed: {exc}")
            return
        self._emit("fired", sweep, slot=slot, message=f"slot {{slot}}: {result}")

    def _report_missed(self, sweep: ScheduledSweep, slots: list[datetime], why: str) -> None:
        if not slots:
            return
        first, last = _fmt(slots[0]), _fmt(slots[-1])
        span = first if len(slots) == 1 else f"{first} .. {last}"
        count = f"at least {len(slots)}" if len(slots) >= MAX_LISTED_SLOTS else str(len(slots))
        plural = "s" if len(slots) > 1 else ""
        self._emit("missed", sweep, missed=tuple(slots),
                   message=f"skipped {count} missed slot{plural} {why}: {span}")

    def _emit(self, kind: str, sweep: ScheduledSweep, *, slot: datetime | None = None,
              missed: tuple[datetime, ...] = (), message: str = "") -> None:
        text = message.replace("{slot}", _fmt(slot)) if slot is not None else message
        self.on_event(ScheduleEvent(kind, sweep.spec.name, self.clock.now(), slot, missed, text))


def store_scheduler(store: Any, sweeps: Sequence[ScheduledSweep], **options: Any) -> Scheduler:
    """A :class:`Scheduler` whose fires are ordinary sweep runs on ``store`` (``trigger =
    'schedule'``, ``scheduled_for`` = the slot) and which knows each sweep's last scheduled slot
    from the store. The spec file is re-read at every slot, so edits apply without a restart.
    ``options`` are the scheduler's (``clock``, ``sleep``, ``on_event``)."""
    from recstore.sweep.runner import run_sweep
    from recstore.sweep.spec import load_spec

    def fire(sweep: ScheduledSweep, slot: datetime) -> str:
        spec = load_spec(sweep.path) if sweep.path.exists() else sweep.spec
        return run_sweep(store, spec, trigger="schedule", scheduled_for=slot,
                         spec_path=sweep.path).summary_line()

    def last_fired(name: str) -> datetime | None:
        if not store.path.exists():
            return None
        with store.reader() as con:
            row = con.execute("SELECT max(scheduled_for) FROM sweep_runs WHERE sweep_name = ? "
                              "AND trigger = 'schedule'", [name]).fetchone()
        return row[0].replace(tzinfo=UTC) if row and row[0] else None

    return Scheduler(sweeps, fire, last_fired=last_fired, **options)


def _fmt(moment: datetime) -> str:
    return moment.isoformat(timespec="minutes")


def cron_lines(sweep: ScheduledSweep, db_path: str | Path, *, python: str = sys.executable,
               workdir: str | Path | None = None, log: str | Path | None = None) -> str:
    """The crontab entry that runs ``recstore sweep run`` at the spec's schedule.

    ``CRON_TZ`` carries the spec's time zone (cronie and systemd-cron honour it; classic Vixie
    cron does not, so its line comment says which zone the times are in).
    """
    schedule = sweep.schedule
    workdir = Path(workdir or Path.cwd()).resolve()
    log = Path(log) if log else Path(f"{Path(db_path).resolve()}.sweep-{sweep.spec.name}.log")
    argv = [python, "-m", "recstore", "--db", str(Path(db_path).resolve()), "sweep", "run",
            str(sweep.path.resolve())]
    command = f"cd {shlex.quote(str(workdir))} && {shlex.join(argv)} >> {shlex.quote(str(log))} 2>&1"
    # In a crontab a bare % ends the command and starts stdin; escape it.
    command = command.replace("%", r"\%")
    return "\n".join([
        f"# recstore sweep {sweep.spec.name}: '{schedule.cron}' in {schedule.timezone}",
        f"CRON_TZ={schedule.timezone}",
        f"{schedule.cron} {command}",
    ])
