"""Shared test helpers: where the fixtures live (tests/fixtures/: data written by aioc 0.2.8 and
agentuse v0.15.0 themselves, copied into the repository so a clone stands alone)."""

from __future__ import annotations

import atexit
import gzip
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

# pytest imports GNU readline early (_pytest.capture), and readline writes COLUMNS and LINES
# (80x24 without a terminal) into the process's C environment, not os.environ: every CLI run in
# a subprocess would inherit them and fit a piped table to 80 columns. A test that wants a width
# sets COLUMNS or --width itself.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

# `recstore query` remembers checked SQL under ~/.cache (recstore.query.checked_cache); the tests'
# CLI runs share one cache of their own, removed at exit, so a test runs a text a second time
# through the remembered path exactly as a user does.
if "RECSTORE_CACHE_DIR" not in os.environ:
    os.environ["RECSTORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="recstore-test-cache-")
    atexit.register(shutil.rmtree, os.environ["RECSTORE_CACHE_DIR"], ignore_errors=True)

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = (REPO_ROOT / "tests" / "fixtures").resolve()  # the store records resolved source paths
AIOC_FIXTURES = FIXTURES / "aioc"
CORPUS_DEV = AIOC_FIXTURES / "corpus-dev"
AGENTUSE_DATA = FIXTURES / "agentuse" / "data"

# The 13 records that expected-aioc-0.2.8.json covers.
AIOC_RECORD_NAMES = [
    "simple-run",
    "tool-allow",
    "handoff-allow",
    "handoff-deny",
    "compare-v1",
    "compare-v2",
    "reported-runrecord-1",
    "v-handoff-cycle",
    "v-two-handoffs-one-turn",
    "v-approval-and-soft-deny",
    "v-failed-deny-throw",
    "v-thread-continuation",
    "v-guardrail-triggered",
]


HOSTILE = FIXTURES / "hostile"


def run_cli(db: Path | str, *args: str, cwd: Path | str | None = None,
            env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real ``recstore`` CLI in a subprocess on the store ``db`` (text output captured;
    ``env``: the child's whole environment, by default this one; ``timeout``: seconds before
    it is killed and ``subprocess.TimeoutExpired`` raised)."""
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, cwd=cwd or REPO_ROOT, timeout=timeout,
                          env=env)


def imported_modules(*args: str, env: dict[str, str] | None = None) -> set[str]:
    """Every module ``python -X importtime -m recstore ARGS`` imports (``env``: the child's
    whole environment, by default this one)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "recstore", *args],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "no -X importtime output"
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # [0] is the header


def from_source_sweep(folder: Path, name: str, query: str, select_extra: str = "") -> Path:
    """Write ``<folder>/<name>.toml``: a sweep replaying what ``query`` selects from source
    (``select_extra``: more ``[select]`` lines); returns its path."""
    path = folder / f"{name}.toml"
    path.write_text(f"name = {json.dumps(name)}\n[select]\nquery = {json.dumps(query)}\n"
                    f"{select_extra}[candidate]\nfrom_source = true\n", encoding="utf-8")
    return path


def tagged_store(path: Path, cases: int, seed: int):
    """A store at ``path`` with ``cases`` generated runs tagged ``set=baseline`` (source URI
    ``baseline``) and their ``set=candidate`` variants."""
    from recstore.store import Store
    from recstore.synth import generate_corpus

    store = Store(path)
    for variant in ("baseline", "candidate"):
        store.ingest_records(list(generate_corpus(cases, seed=seed, variant=variant)),
                             source_uri=variant, tags={"set": variant})
    return store


def read_terminal(leader: int) -> bytes:
    """Everything a pseudo-terminal's ``leader`` receives until the command on it ends (or is
    silent for two minutes)."""
    received = b""
    while select.select([leader], [], [], 120)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        received += chunk
    return received


def hostile_cases(name: str) -> list[tuple[str, ...]]:
    """The cases of ``tests/fixtures/hostile/<name>``: one per line, fields separated by tabs,
    ``#`` comment lines skipped (a new attack is one line to add)."""
    lines = (HOSTILE / name).read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines if line.strip() and not line.startswith("#")]


def stored_events_in_log_order(con) -> bool:
    """Whether the rows of ``events``, in the file's own order (rowid), go by batch, then family
    (recstore.formats.events.FAMILY_OF), type, array index and seq: the order a batch stores
    them in, so that alike payloads share zstd's vectors (store.chunks.placed_inserts)."""
    from recstore.formats.events import FAMILY_OF

    rows = con.execute("SELECT batch_id, type, idx, seq FROM events ORDER BY rowid").fetchall()
    return rows == sorted(rows, key=lambda r: (
        r[0], FAMILY_OF.get(r[1], 0), r[1], r[2] is None, r[2] or 0, r[3]))


def read_ndjson_gz(path: Path) -> list[dict]:
    """All lines of a gzip NDJSON fixture, parsed."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def aioc_records() -> dict[str, dict]:
    """The 13 aioc fixture records by name."""
    return {
        name: json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
        for name in AIOC_RECORD_NAMES
    }


@pytest.fixture(scope="session")
def expected_aioc() -> dict:
    """aioc's own outputs for the 13 records."""
    return json.loads((AIOC_FIXTURES / "expected-aioc-0.2.8.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def fixture_store(tmp_path_factory: pytest.TempPathFactory):
    """One store of the 13 fixture records and corpus-dev (with its replays), built once per
    session (~5 s) for every test module that queries it."""
    from .query_support import build_store  # query_support imports this module's constants

    return build_store(tmp_path_factory.mktemp("query-store") / "runs.duckdb")


class _XdistShares:
    """Work shares for pytest-xdist (``-n auto`` in pyproject's addopts): each test module runs
    whole in one worker, so its fixtures are built once and its tests run in file order; the
    modules on the Spark session (``*spark*``, the only ones using it) share one worker, so a
    test run starts one JVM and builds the shared Spark corpus once. (xdist's own
    ``--dist loadgroup`` marks do not group under pytest 9.2, which keeps node ids elsewhere.)"""

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        from xdist.scheduler import LoadScopeScheduling

        class ModuleShares(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                module = nodeid.split("::", 1)[0]
                return "spark" if "spark" in Path(module).name else module

        return ModuleShares(config, log)


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistShares(), "recstore-xdist-shares")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep _XdistShares' rule true: a test on the Spark session lives in a ``*spark*`` module
    (elsewhere it would start a second JVM in another worker)."""
    stray = [item.nodeid for item in items
             if "spark" in getattr(item, "fixturenames", ()) and "spark" not in item.path.name]
    if stray:
        raise pytest.UsageError(f"tests on the Spark session belong in a *spark* module: {stray}")


@pytest.fixture(scope="session")
def spark():
    """The one local Spark session of the whole test run (a JVM start costs 10-30 s), stopped when
    the run ends. ``recstore.query.spark.spark_session`` hands the same session to the library's
    Spark path, so in-process tests and the CLI run in-process share it. Skips without pyspark
    or Java."""
    from recstore.query.spark import spark_missing_reason, spark_session

    reason = spark_missing_reason()
    if reason is not None:
        pytest.skip(f"Spark tests need pyspark and Java 17+: {reason}")
    with pytest.MonkeyPatch.context() as patch:
        # The JVM's quick (C1) compiler only: the tests run many small queries in a short-lived
        # JVM, where the optimizing compiler's threads cost more than they win back (the Spark
        # tests take half as long on 2 cores). Results do not depend on it. C1 alone gets a
        # 48 MB code cache, which Spark's generated code for every test filled in one CI run
        # (the JVM then stops compiling and the corpus build failed): give it room.
        if "PYSPARK_SUBMIT_ARGS" not in os.environ:  # a developer's own settings win
            patch.setenv("PYSPARK_SUBMIT_ARGS",
                         "--driver-java-options '-XX:TieredStopAtLevel=1 "
                         "-XX:ReservedCodeCacheSize=256m' pyspark-shell")
        session = spark_session()
    yield session
    session.stop()
    spark_session.cache_clear()


@pytest.fixture(scope="session")
def spark_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev corpus and a file of duplicates, revisions and bad lines (tests/spark_corpus.py)."""
    from .spark_corpus import write_inputs

    return write_inputs(tmp_path_factory.mktemp("spark-inputs"))


@pytest.fixture(scope="session")
def spark_built(spark, spark_inputs, tmp_path_factory: pytest.TempPathFactory):
    """``spark_inputs`` ingested and exported on a store and built on Spark, once per test run
    (the build is the Spark tests' largest cost): a ``spark_corpus.SparkBuilt``."""
    from .spark_corpus import build_both

    return build_both(spark, spark_inputs, tmp_path_factory.mktemp("spark-build"))


def reverse_key_order(value):
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reverse_key_order(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_key_order(v) for v in value]
    return value


class ProgressLog:
    """A :class:`recstore.progress.Progress` that records every update, and interrupts the
    work (as Ctrl-C would) once ``stop_at`` units are done."""

    def __init__(self, stop_at: int | None = None):
        self.seen: list[tuple[int, int | None]] = []
        self.stop_at = stop_at

    def update(self, done: int, total: int | None = None) -> None:
        self.seen.append((done, total))
        if self.stop_at is not None and done >= self.stop_at:
            raise KeyboardInterrupt
