"""Ingest the test fixtures and dump the log and every projection table as sorted text, so two
versions of the ingest can be compared byte for byte (`cmp a.txt b.txt`).

The steps cover what placement does: a first ingest of every fixture (aioc files and corpora,
replay lines, agentuse trees, OTLP, rejects) with ``--workers`` worker processes, the baseline
corpus again with a tag (duplicates and tags events), and revisions of a few runs given
in-process. Columns that hold the wall clock, the process or a fresh UUID are left out; the
batch hashes stay in (they cover every event and stream row). ``--views`` dumps every view
instead (what queries read), so a change of a stored table's layout can be checked against
the views' output of the version before it.

Run: python benchmarks/dump_store.py OUT.txt [--workers 2] [--views]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import tempfile
from pathlib import Path

import duckdb

from recstore.store import Store

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
# wall clock, process and fresh ids: differ between any two runs
VOLATILE = {"ingested_at", "started_at", "committed_at", "opened_at", "finished_at",
            "rejected_at", "ingest_id", "pid", "recorded_at", "created_at", "applied_at"}


def ingest(db: Path, workers: int) -> None:
    store = Store(db)
    store.ingest([str(FIXTURES / "aioc"), str(FIXTURES / "agentuse" / "data"),
                  str(FIXTURES / "otlp")], workers=workers)
    store.ingest([str(FIXTURES / "aioc" / "corpus-dev" / "corpus-baseline.ndjson.gz")],
                 tags={"dump": "again"}, workers=workers)
    with gzip.open(FIXTURES / "aioc" / "corpus-dev" / "corpus-candidate.ndjson.gz", "rt") as fh:
        records = [json.loads(line) for _, line in zip(range(5), fh, strict=False)]
    for record in records:
        record["status"] = "revised-by-dump"
    store.ingest_records(records, source_uri="dump-revisions", tags={"dump": "revised"})


def dump(db: Path, out: Path, kind: str = "BASE TABLE") -> None:
    """Every table (``kind`` 'BASE TABLE') or view ('VIEW') of ``db``, rows sorted."""
    con = duckdb.connect(str(db), read_only=True)
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = ? "
        "ORDER BY table_name", [kind]).fetchall()]
    with open(out, "w", encoding="utf-8") as fh:
        for table in tables:
            columns = [r[0] for r in con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "ORDER BY ordinal_position", [table]).fetchall()]
            kept = [c for c in columns if c not in VOLATILE]
            if not kept:
                continue
            select = ", ".join(f'"{c}"' for c in kept)
            rows = con.execute(f'SELECT {select} FROM "{table}" ORDER BY ALL').fetchall()
            digest = hashlib.sha256(repr(rows).encode("utf-8", "surrogatepass")).hexdigest()
            fh.write(f"## {table} ({len(rows)} rows, {digest}) {kept}\n")
            for row in rows:
                fh.write(repr(row))
                fh.write("\n")
    con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--views", action="store_true", help="dump the views, not the tables")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dump-store-") as tmp:
        db = Path(tmp) / "store.duckdb"
        ingest(db, args.workers)
        dump(db, args.out, "VIEW" if args.views else "BASE TABLE")
    for line in args.out.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            print(line[3:].split(" [")[0])


if __name__ == "__main__":
    main()
