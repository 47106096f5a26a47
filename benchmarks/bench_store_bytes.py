"""Where a store's bytes go: per table and column, the blocks its segments take and the
compression DuckDB chose, plus the blocks no segment names (metadata, indexes) and free blocks.

Either ingests N records shaped like ``bench_ingest.py``'s corpus (``--shape synth|aioc-dev``)
into a fresh store and reads it, or reads an existing store (``--db``). A segment's size is the
distance to the next segment in its block (the last one in a block is charged up to the block's
end, so a partly filled block's tail counts to it) plus every whole block it continues into
(``additional_block_ids``: long zstd strings). Constant segments take no block.

Run: python benchmarks/bench_store_bytes.py [--shape aioc-dev] [--records 6000]
     python benchmarks/bench_store_bytes.py --db STORE
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))


def segment_sizes(con: duckdb.DuckDBPyConnection, tables: list[str],
                  block_size: int) -> list[tuple]:
    """(table, column, segment type, compression, bytes) of every persistent segment.

    Segments of different tables share blocks, so sizes come from all tables' offsets at once."""
    by_block = defaultdict(list)
    for table in tables:
        for column, kind, compression, block, offset, extra in con.execute(
                "SELECT column_name, segment_type, compression, block_id, block_offset, "
                "len(additional_block_ids) FROM pragma_storage_info(?) WHERE persistent",
                [table]).fetchall():
            by_block[block].append((offset, table, column, kind, compression, extra))
    sizes = []
    for block, segments in by_block.items():
        segments.sort()
        for i, (offset, table, column, kind, compression, extra) in enumerate(segments):
            if block < 0:  # a constant segment: no block at all
                sizes.append((table, column, kind, compression, 0))
                continue
            end = segments[i + 1][0] if i + 1 < len(segments) else block_size
            sizes.append((table, column, kind, compression,
                          end - offset + extra * block_size))
    return sizes


def blocks_named(con: duckdb.DuckDBPyConnection, tables: list[str]) -> int:
    """How many distinct blocks the tables' segments take (first and continuation blocks)."""
    union = " UNION ALL ".join(
        f"SELECT block_id FROM pragma_storage_info('{t}') WHERE persistent AND block_id >= 0 "
        f"UNION ALL SELECT unnest(additional_block_ids) FROM pragma_storage_info('{t}') "
        "WHERE persistent" for t in tables)
    return con.execute(f"SELECT count(DISTINCT block_id) FROM ({union})").fetchone()[0]


def tally(con: duckdb.DuckDBPyConnection, tables: list[str], block_size: int) -> tuple:
    """Bytes per table, bytes per (table, column) and the compressions each column uses."""
    per_table = dict.fromkeys(tables, 0)
    per_column, choice = defaultdict(int), defaultdict(set)
    for table, column, kind, compression, size in segment_sizes(con, tables, block_size):
        per_table[table] += size
        per_column[(table, column)] += size
        if kind != "VALIDITY":
            choice[(table, column)].add(compression)
    return per_table, per_column, choice


def report(db: Path) -> None:
    """Print where the bytes of ``db`` go: per table, unnamed and free blocks, top columns."""
    con = duckdb.connect(str(db), read_only=True)
    _, _, block_size, total, used, free, *_ = con.execute("PRAGMA database_size").fetchone()
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "ORDER BY table_name").fetchall()]
    per_table, per_column, choice = tally(con, tables, block_size)
    unnamed = (used - blocks_named(con, tables)) * block_size
    con.close()
    size = db.stat().st_size
    print(f"{db}: {size:,} bytes; block {block_size:,}; blocks {total} (used {used}, free {free})")
    print(f"\n{'table':<28} {'bytes':>12} {'share':>6}")
    rows = sorted(((t, b) for t, b in per_table.items() if b), key=lambda kv: -kv[1])
    rows += [("(metadata, indexes)", unnamed), ("(free blocks)", free * block_size)]
    for name, part in rows:
        print(f"{name:<28} {part:>12,} {part / size:>6.1%}")
    print(f"\n{'table.column':<44} {'bytes':>11} {'share':>6}  compression")
    for (table, column), part in sorted(per_column.items(), key=lambda kv: -kv[1])[:40]:
        print(f"{table + '.' + column:<44} {part:>11,} {part / size:>6.1%}  "
              f"{','.join(sorted(choice[(table, column)]))}")


def ingest(corpus: Path, db: Path, shape: str, n: int) -> None:
    from bench_ingest import write_corpus

    from recstore.store import Store
    from recstore.store.prepare import default_workers

    write_corpus(corpus, n, shape=shape)
    Store(db).ingest([str(corpus)], workers=default_workers(corpus.stat().st_size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an existing store to read (no ingest)")
    parser.add_argument("--shape", choices=("synth", "aioc-dev"), default="aioc-dev")
    parser.add_argument("--records", type=int, default=6000)
    args = parser.parse_args()
    if args.db:
        report(args.db)
        return
    with tempfile.TemporaryDirectory(prefix="store-bytes-") as tmp:
        db = Path(tmp) / "store.duckdb"
        ingest(Path(tmp) / "corpus.ndjson", db, args.shape, args.records)
        report(db)


if __name__ == "__main__":
    main()
