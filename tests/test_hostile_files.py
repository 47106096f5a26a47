"""Hostile files (issue 24 points 1, 4, 5, 9, 10, 11), as data in tests/hostile/, each case run
through the real CLI in a subprocess: outputs never replace the store or a file recstore owns,
never write through a planted symbolic link, and a missing folder, a full disk, another
program's DuckDB file or a corrupt block each end in one line, with the store unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from recstore.store import Store
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, tagged_store
from .hostile_cases import hostile_lines
from .query_support import run_cli

ONE_RECORD = AIOC_FIXTURES / "simple-run.json"
SWEEP = "planted"


def _sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _listing(folder: Path) -> dict[str, str | None]:
    return {p.name: _sha(p) for p in sorted(folder.iterdir())}


def _args(line: str, **values: object) -> list[str]:
    for name, value in values.items():
        line = line.replace("{" + name + "}", str(value))
    return shlex.split(line)


def _assert_one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("recstore: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two tagged run sets, one finished sweep run (``planted``) and a finished export."""
    home = tmp_path_factory.mktemp("hostile-files")
    (home / "store").mkdir()
    store = tagged_store(home / "store" / "s.duckdb", 4, seed=5)
    spec = parse_spec({"name": SWEEP, "select": {"query": "tag.set = 'baseline'"},
                       "candidate": {"from_source": True}}, source="test")
    run_sweep(store, spec)
    assert run_cli("export", str(home / "export"), db=store.path).returncode == 0
    return store


# --- points 1 and 9: outputs onto what recstore owns, into missing folders, onto /proc ----------

def _target(spec: str, store: Store, tmp: Path) -> Path:
    """The path a target line names; ``link:``/``hardlink:`` make that link in ``tmp``."""
    for kind in ("link:", "hardlink:"):
        if spec.startswith(kind):
            inner = _target(spec[len(kind):], store, tmp)
            link = tmp / f"{kind[:-1]}-{len(list(tmp.iterdir()))}"
            os.symlink(inner, link) if kind == "link:" else os.link(inner, link)
            return link
    return Path(_args(spec, db=store.path, tmp=tmp, export=store.path.parent.parent / "export")[0])


OUTPUT_COMMANDS = hostile_lines("output-commands.txt")
TARGETS = [(target, message, command)
           for target, message, which in (line.split(" | ")
                                          for line in hostile_lines("output-targets.txt"))
           for command in (OUTPUT_COMMANDS if which == "all" else OUTPUT_COMMANDS[:1])]


@pytest.mark.parametrize(("target", "message", "command"), TARGETS,
                         ids=[f"{t} <- {c.split(' -')[0]}" for t, _, c in TARGETS])
def test_no_output_replaces_a_file_recstore_owns_or_lands_nowhere(store, tmp_path, command,
                                                                  target, message):
    out = _target(target, store, tmp_path)
    before = {folder: _listing(folder) for folder in (store.path.parent, tmp_path)}
    existing = _sha(out) if out.is_file() and not str(out).startswith("/proc") else None
    result = run_cli(*_args(command, out=out), db=store.path)
    assert result.returncode == 2, result.stderr
    _assert_one_error_line(result, message)
    assert "Traceback" not in result.stderr
    assert {folder: _listing(folder) for folder in before} == before  # the store too
    if existing is not None:
        assert _sha(out) == existing


# --- point 5: planted symbolic links ---------------------------------------------------------

PLANTED = [line.split(" | ") for line in hostile_lines("planted-links.txt")]


@pytest.mark.parametrize(("status", "links", "command"), PLANTED, ids=[c for *_, c in PLANTED])
def test_outputs_never_write_through_a_planted_link(store, tmp_path, status, links, command):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    victim.chmod(0o644)
    spec = tmp_path / f"{SWEEP}.toml"
    spec.write_text(f'name = "{SWEEP}"\n[select]\nquery = "tag.set = \'baseline\'"\n'
                    "[candidate]\nfrom_source = true\n")
    planted = [Path(p) for p in _args(links.replace(",", " "), tmp=tmp_path, db=store.path)]
    for link in planted:
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)  # the sweep's own lock file, replaced by the link
        os.symlink(victim, link)
    store_before = _sha(store.path)
    try:
        result = run_cli(*_args(command, tmp=tmp_path, spec=spec), db=store.path)
        assert result.returncode == int(status), result.stderr
        assert victim.read_text() == "someone else's file\n"
        assert victim.stat().st_mode & 0o777 == 0o644
        if result.returncode == 2:
            _assert_one_error_line(result)
            assert all(link.is_symlink() for link in planted)  # refused, and left alone
        else:
            for link in planted:  # the link itself was replaced by the output
                assert not link.is_symlink() and link.is_file() and link.stat().st_size > 0
                assert link.stat().st_mode & 0o777 == 0o600
        assert _sha(store.path) == store_before
    finally:
        for link in planted:
            if str(link).startswith(str(store.path)):
                link.unlink(missing_ok=True)


def test_a_sweep_lock_file_that_is_not_a_lock_is_left_alone(store, tmp_path):
    lock = Path(f"{store.path}.sweep-{SWEEP}.lock")
    lock.write_text("not a pid: someone's notes\n")
    spec = tmp_path / f"{SWEEP}.toml"
    spec.write_text(f'name = "{SWEEP}"\n[select]\nquery = "tag.set = \'baseline\'"\n'
                    "[candidate]\nfrom_source = true\n")
    try:
        result = run_cli("sweep", "run", str(spec), db=store.path)
        assert result.returncode == 2, result.stderr
        _assert_one_error_line(result, "is not a lock file recstore wrote")
        assert lock.read_text() == "not a pid: someone's notes\n"
    finally:
        lock.unlink()


def test_an_output_to_a_fifo_or_dev_null_is_written_in_place(store, tmp_path):
    result = run_cli("query", "SELECT 1 AS x", "--format", "csv", "-o", "/dev/stdout",
                     db=store.path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["x", "1"]
    assert run_cli("query", "SELECT 1", "--format", "table", "-o", "/dev/null",
                   db=store.path).returncode == 0
    assert Path("/dev/null").is_char_device()


# --- point 4: DuckDB files recstore did not write --------------------------------------------

FOREIGN = hostile_lines("foreign-databases.txt")
STORE_COMMANDS = hostile_lines("store-commands.txt")
FOREIGN_CASES = [(FOREIGN[0], command) for command in STORE_COMMANDS] + [
    (sql, command) for sql in FOREIGN[1:] for command in ('query "SELECT 1"', "ingest {one}")]


@pytest.mark.parametrize(("sql", "command"), FOREIGN_CASES)
def test_a_duckdb_file_recstore_did_not_write_is_refused_and_unchanged(tmp_path, sql, command):
    db = tmp_path / "theirs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(sql)
    before = _listing(tmp_path)
    result = run_cli(*_args(command, one=ONE_RECORD, tmp=tmp_path), db=db)
    assert result.returncode == 2, result.stderr
    _assert_one_error_line(result, str(db), "not a recstore store", "left it unchanged")
    assert _listing(tmp_path) == before  # byte for byte, and no WAL or export beside it


def test_a_new_path_or_an_empty_file_becomes_a_store(tmp_path):
    empty = tmp_path / "mktemp.duckdb"
    empty.touch()
    refused = run_cli("query", "SELECT 1", db=empty)
    assert refused.returncode == 2 and "no store here yet" in refused.stderr
    assert empty.stat().st_size == 0
    for db in (tmp_path / "new.duckdb", empty):
        assert run_cli("ingest", str(ONE_RECORD), db=db).returncode == 0
        assert run_cli("verify", db=db).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mktemp.duckdb", "new.duckdb"]


# --- point 11: a corrupt block ------------------------------------------------------------------

def _flip_a_byte_of(db: Path, table: str) -> None:
    """Flip one byte inside the first data block of ``table`` (after its checksum)."""
    with duckdb.connect(str(db), read_only=True) as con:
        block, offset = con.execute(
            "SELECT block_id, block_offset FROM pragma_storage_info(?) WHERE block_id >= 0 "
            "ORDER BY row_group_id, column_id LIMIT 1", [table]).fetchone()
        block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    position = 3 * 4096 + block * block_size + 8 + offset + 16  # the file header is 3 x 4 KiB
    with open(db, "r+b") as fh:
        fh.seek(position)
        byte = fh.read(1)
        fh.seek(position)
        fh.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("table", hostile_lines("corrupt-blocks.txt"))
def test_a_corrupt_block_is_one_line_and_refuses_writes(tmp_path, table):
    db = tmp_path / "s.duckdb"
    records = tmp_path / "runs.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in generate_corpus(40, seed=9)))
    assert run_cli("ingest", str(records), db=db).returncode == 0
    _flip_a_byte_of(db, table)
    before = _listing(tmp_path)
    verify = run_cli("verify", db=db)
    assert verify.returncode == 1, verify.stderr
    _assert_one_error_line(verify, str(db), "corrupt")
    for command in (["rebuild"], ["ingest", str(ONE_RECORD)]):
        result = run_cli(*command, db=db)
        assert result.returncode == 2, result.stderr
        _assert_one_error_line(result, str(db), "corrupt")
    assert _listing(tmp_path) == before


# --- point 10: a full disk --------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 40 MB tmpfs (needs root); skipped where it cannot be mounted."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with open(filler, "wb") as fh:
        fh.truncate(0)
        fh.write(b"\0" * max(free - leave, 0))
    return filler


def test_a_full_disk_is_one_line_leaves_nothing_half_written_and_a_retry_works(small_disk,
                                                                               tmp_path):
    lines = [json.dumps(r) + "\n" for r in generate_corpus(600, seed=2)]
    corpus, first = tmp_path / "corpus.jsonl", tmp_path / "first.jsonl"
    corpus.write_text("".join(lines))
    first.write_text("".join(lines[:200]))  # ~1.5 MB of events for the outputs below
    db = small_disk / "s.duckdb"
    assert run_cli("ingest", str(first), db=db).returncode == 0
    cases = [_args(line, db=db, full=small_disk, corpus=corpus)
             for line in hostile_lines("disk-full.txt")]
    filler = _fill(small_disk, leave=96 * 1024)
    for args in cases:
        before = _listing(small_disk)
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        _assert_one_error_line(result, "no space left on the disk", f"({small_disk} is full)")
        after = _listing(small_disk)
        new = {name for name in after if name not in before}
        assert new <= {"s.duckdb.wal", "export", "traces"}, (args, new)  # DuckDB's own WAL
        assert not (small_disk / "new.duckdb").exists()  # no 0-byte store
        if "ingest" not in args:
            assert after["s.duckdb"] == before["s.duckdb"], args
        for folder in ("export", "traces"):  # nothing half-written inside either
            for path in (small_disk / folder).glob("*") if (small_disk / folder).is_dir() else ():
                assert path.suffix == ".json" and json.loads(path.read_text()), (args, path)
    assert run_cli("verify", db=db).returncode == 0
    filler.unlink()
    for args in cases:
        result = run_cli(*args)
        assert result.returncode == 0, (args, result.stderr)
    for store in (db, small_disk / "new.duckdb"):
        assert run_cli("verify", db=store).returncode == 0
    runs = run_cli("query", "SELECT count(*) AS n FROM runs", "--format", "csv", db=db)
    assert runs.stdout.split() == ["n", "600"]
