"""Child processes do not outlive what started them: a replayer's own children die with it at
--command-timeout, and `kill -9` of a `sweep run --workers 2` takes its workers, their
replayers and the replayers' children, and multiprocessing's resource tracker with it, as
`kill -9` of an `ingest --workers 2` takes its workers. Real processes throughout, found
through /proc."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, REPO_ROOT
from .query_support import run_cli

# A replayer that starts a child which keeps running, records both PIDs, then waits for ever.
STUBBORN = """#!/bin/sh
sleep 100000 &
echo "$$ $!" > "{pids}/$$"
sleep 100000
"""


def _stubborn(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "stubborn.sh"
    script.write_text(STUBBORN.format(pids=pids))
    script.chmod(0o755)
    return script, pids


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _recorded_pids(pids: Path) -> set[int]:
    return {int(p) for f in pids.iterdir() for p in f.read_text().split()}


def _wait_until_gone(pids: set[int], hang_guard: float = 60.0) -> set[int]:
    """The PIDs still running once all are gone or ``hang_guard`` seconds passed."""
    end = time.monotonic() + hang_guard
    while time.monotonic() < end and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


def _survivors_of_sigkill(proc: subprocess.Popen, family: set[int]) -> set[int]:
    """``kill -9`` of ``proc``: which of its ``family`` of processes still run afterwards."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return _wait_until_gone(family)


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_command_timeout_kills_the_replayers_own_children(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    script, pids = _stubborn(tmp_path)
    done = run_cli("replay", "simple-run", "--command", str(script), "--command-timeout", "1",
                   "--json", db=db)
    assert done.returncode == 1 and "timed out after 1s" in json.loads(done.stdout)["reason"]
    started = _recorded_pids(pids)
    assert len(started) == 2
    left = _wait_until_gone(started)
    _kill_all(left)
    assert not left, "the replayer's child outlived --command-timeout"


@pytest.mark.slow
def test_sigkill_of_a_sweep_takes_its_workers_and_replayers_with_it(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest_records(list(generate_corpus(4, seed=6)), source_uri="synth")
    script, pids = _stubborn(tmp_path)
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "killed"\nworkers = 2\n[select]\nquery = "status = \'completed\' or '
                    f'status = \'failed\'"\n[candidate]\ncommand = ["{script}"]\ntimeout = 100000\n')
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "run",
                             str(spec)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    family: set[int] = set()
    try:
        while len(list(pids.iterdir())) < 2:  # both workers are inside a replayer
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        # A replayer's child can be between fork and exec (or reparenting to the subreaper)
        # while /proc is read: look again until the tree settles.
        deadline = time.monotonic() + 10
        family = _descendants(proc.pid)
        while not _recorded_pids(pids) <= family and time.monotonic() < deadline:
            time.sleep(0.1)
            family = _descendants(proc.pid)
        assert _recorded_pids(pids) <= family
        assert len(family) >= 7  # 2 workers, the resource tracker, 2 replayers, 2 children
        left = _survivors_of_sigkill(proc, family)
    finally:
        proc.kill()
        _kill_all(family)
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left
                if Path(f"/proc/{pid}/cmdline").exists()}
    assert not left, f"still running after the sweep was killed: {commands}"


# A replayer whose child leaves its session (so no process-group kill reaches it), recording
# both PIDs, then waiting for ever.
ESCAPING = """#!/bin/sh
setsid sh -c 'echo $$ > "{pids}/child"; exec sleep 100000' &
echo $$ > "{pids}/replayer"
exec sleep 100000
"""


def test_sigkill_of_a_replay_takes_the_replayer_and_its_setsid_child_with_it(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "escaping.sh"
    script.write_text(ESCAPING.format(pids=pids))
    script.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), "replay",
                             "simple-run", "--command", str(script), "--command-timeout", "100000"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    family: set[int] = set()
    try:
        end = time.monotonic() + 60
        while len(list(pids.iterdir())) < 2 and time.monotonic() < end:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.2)  # let the last PID file be written whole
        family = _recorded_pids(pids)
        assert len(family) == 2 and all(_alive(p) for p in family)
        left = _survivors_of_sigkill(proc, family)
    finally:
        proc.kill()
        _kill_all(family)
    assert not left, "the replayer or its setsid child outlived kill -9 of the replay"


def test_sigkill_of_an_ingest_takes_its_workers_with_it(tmp_path):
    record = (AIOC_FIXTURES / "simple-run.json").read_bytes().replace(b"\n", b"") + b"\n"
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(tmp_path / "s.duckdb"),
                             "ingest", "--workers", "2", "-"], cwd=REPO_ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    family: set[int] = set()
    try:
        proc.stdin.write(record)  # then the ingest waits for more input, its workers idle
        proc.stdin.flush()
        end = time.monotonic() + 60
        while len(family) < 2 and time.monotonic() < end:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
            family = _descendants(proc.pid)
        assert len(family) >= 2
        left = _survivors_of_sigkill(proc, family)
    finally:
        proc.kill()
        _kill_all(family)
    assert not left, "ingest workers outlived the ingest"


@pytest.mark.parametrize("reaper", [True, False], ids=["reaper", "process-group"])
def test_run_command_says_how_a_command_ended(monkeypatch, tmp_path, reaper):
    """The runner itself, with its reaper and with the fallback used where there is none."""
    from recstore import process

    monkeypatch.setattr(process, "_USE_REAPER", reaper)
    sh = ["/bin/sh", "-c"]
    done = process.run_command([*sh, "cat; echo err >&2; exit 3"], b"in" * 100_000, 30)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (
        3, b"in" * 100_000, b"err\n", False)
    done = process.run_command([*sh, "sleep 100000"], b"", 0.5)
    assert (done.returncode, done.timed_out, done.output_exceeded) == (None, True, False)
    done = process.run_command([*sh, "head -c 5000000 /dev/zero; sleep 100000"], b"", 30,
                               max_output=1_000_000)
    assert (done.returncode, done.stdout, done.timed_out, done.output_exceeded) == (
        None, b"", False, True)
    done = process.run_command([*sh, "head -c 300000 /dev/zero >&2"], b"", 30)
    assert done.returncode == 0 and len(done.stderr) == process.STDERR_TAIL_BYTES
    script = tmp_path / "no-shebang"
    script.write_text("echo hi\n")
    for argv, message in ([str(tmp_path / "missing")], "not found"), (
            [str(script)], "not executable"):
        with pytest.raises(process.CommandError, match=message):
            process.run_command(argv, b"", 30, role="test")
    script.chmod(0o755)
    with pytest.raises(process.CommandError, match="not a program the system can run"):
        process.run_command([str(script)], b"", 30, role="test")
