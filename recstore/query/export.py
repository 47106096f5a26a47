"""Export the public views as zstd Parquet for other engines (Spark, Trino, Polars, DuckDB).

The comparison's feature views (``cmp_run_features``, ``cmp_call_features``,
``cmp_entry_features``, ``cmp_input_scopes``) are written too, so ``recstore compare --engine
spark`` runs over an export as over a ``recstore spark build``.

Layout: ``DIR/<view>/day=YYYY-MM-DD/data_0.parquet`` — hive-partitioned by the day the run
started (``day=unknown`` when it has no start time) for ``runs`` and every view whose rows belong
to a run; other views (sources, batches, ...) and empty views are one unpartitioned file.
Columns Spark cannot read are converted: UUID, JSON, INTERVAL and TIME WITH TIME ZONE become
strings, 128-bit integers DOUBLE, unsigned integers the next wider signed type (UBIGINT
``DECIMAL(20, 0)``). Reading back, ``day`` is an extra partition column.

``DIR/recstore-export.json`` (the manifest) marks the folder as a recstore export and lists the
view folders it wrote. An export goes only into a new or empty folder, or replaces an earlier
export when asked (``overwrite``), and then deletes only the view folders that export's
manifest lists; a user's folder is never deleted. Files and folders are owner-only.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from sqlglot import exp

from recstore.errors import InputError
from recstore.files import (
    EXPORT_MANIFEST,
    file_error,
    is_disk_problem,
    owner_only_umask,
    private_dir,
    write_output,
)
from recstore.progress import NO_PROGRESS, Progress
from recstore.query.views import Catalog, View, layout_catalog

if TYPE_CHECKING:
    from recstore.store import Store

PARTITION_COLUMN = "day"
MANIFEST = EXPORT_MANIFEST
MANIFEST_FORMAT = "recstore-export/1"
_SPARK_CASTS = {"UUID": "VARCHAR", "JSON": "VARCHAR", "HUGEINT": "DOUBLE", "UHUGEINT": "DOUBLE",
                "UBIGINT": "DECIMAL(20, 0)", "UINTEGER": "BIGINT", "USMALLINT": "INTEGER",
                "UTINYINT": "SMALLINT", "INTERVAL": "VARCHAR", "TIME WITH TIME ZONE": "VARCHAR"}


@dataclass
class ExportSummary:
    """Rows written per view and where."""

    directory: Path
    rows: dict[str, int] = field(default_factory=dict)
    partitioned: list[str] = field(default_factory=list)


def export_views(store: Store, directory: str | Path, progress: Progress = NO_PROGRESS, *,
                 overwrite: bool = False) -> ExportSummary:
    """Write every public view of ``store``, and the comparison's feature views, under
    ``directory`` and return the row counts; ``progress`` follows the views written.

    ``directory`` must be new, empty, or (with ``overwrite``) an earlier export, whose listed
    view folders are replaced.

    Raises:
        InputError: the folder holds something else, or an earlier export without ``overwrite``
            (checked before anything is written or deleted).
    """
    directory = Path(directory)
    summary = ExportSummary(directory)
    with store.file_reader() as con:
        catalog = layout_catalog(con)
        views = list(catalog.views.values())
        claim_export_dir(directory, [v.name for v in views], overwrite)
        try:
            with owner_only_umask():  # DuckDB's COPY creates the partition folders and files
                for done, view in enumerate(views, start=1):
                    summary.rows[view.name] = _export_view(con, catalog, view,
                                                           directory / view.name)
                    progress.update(done, len(views))
                    if partitionable(catalog, view):
                        summary.partitioned.append(view.name)
            write_manifest(directory, summary.rows, summary.partitioned)
        except BaseException as exc:
            remove_export(directory, [v.name for v in views])
            if isinstance(exc, duckdb.Error) and is_disk_problem(exc):
                raise file_error(exc, directory) from exc
            raise
    return summary


def remove_export(directory: Path, views: list[str]) -> None:
    """Delete what an export that failed wrote into ``directory`` (its view folders, then its
    manifest), so that nothing half-written is left and a retry needs no ``--overwrite``."""
    for name in views:
        shutil.rmtree(directory / name, ignore_errors=True)
    (directory / MANIFEST).unlink(missing_ok=True)


def claim_export_dir(directory: Path, views: list[str], overwrite: bool) -> None:
    """Make ``directory`` ready to receive the folders ``views`` (what ``recstore export`` and
    ``recstore spark build`` write): create it when new, accept it when empty, or (with
    ``overwrite``) delete the view folders an earlier export's manifest lists. Then mark it with
    an incomplete manifest, so a crashed export can be replaced with ``overwrite``.

    Raises:
        InputError: the folder holds something else, or an earlier export without
            ``overwrite`` (checked before anything is deleted).
    """
    for name in _earlier_views(directory, views, overwrite):
        shutil.rmtree(directory / name)
    _write_manifest(directory, {"complete": False, "views": views})


def write_manifest(directory: Path, rows: dict[str, int], partitioned: list[str]) -> None:
    """Mark the export in ``directory`` complete, with each view's rows."""
    _write_manifest(directory, {"complete": True, "views": list(rows), "rows": rows,
                                "partitioned": partitioned})


def _earlier_views(directory: Path, views: list[str], overwrite: bool) -> list[str]:
    """Check that ``directory`` may receive an export (creating it when new); return the view
    folders of an earlier export that are to be replaced."""
    where = str(directory)
    if (directory.exists() or directory.is_symlink()) and not directory.is_dir():
        raise InputError("exists and is not a directory; export into a new or empty folder",
                         source=where)
    private_dir(directory)
    entries = sorted(p.name for p in directory.iterdir())
    if not entries:
        return []
    listed = _earlier_export(directory)
    if listed is None:
        raise InputError("folder is not empty and holds no recstore export; export into a new "
                         "or empty folder (nothing was changed)", source=where)
    if not overwrite:
        raise InputError("holds an earlier recstore export; pass `overwrite` to replace it",
                         source=where)
    earlier = [name for name in listed if name in entries]
    for name in sorted(set(earlier) | set(views) & set(entries)):
        path = directory / name
        if name not in listed or path.is_symlink() or not path.is_dir():
            raise InputError(f"{name!r} here was not written by recstore export (it is "
                             f"{_kind(path)}); move it away first (nothing was changed)",
                             source=where)
    return earlier


def _earlier_export(directory: Path) -> list[str] | None:
    """The view folders an earlier export's manifest lists, or None when there is none."""
    manifest = directory / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("format") != MANIFEST_FORMAT:
        return None
    views = document.get("views")
    if not isinstance(views, list) or not all(_plain_name(v) for v in views):
        return None
    return views


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..", MANIFEST) and "/" not in name \
        and "\\" not in name


def _kind(path: Path) -> str:
    if path.is_symlink():
        return "a symbolic link"
    return "a folder" if path.is_dir() else "a file"


def _write_manifest(directory: Path, fields: dict[str, Any]) -> None:
    document = {"format": MANIFEST_FORMAT, **fields,
                "written_at": datetime.now(UTC).isoformat(timespec="seconds")}
    text = json.dumps(document, indent=2) + "\n"
    write_output(directory / MANIFEST, lambda fh: fh.write(text), owned=True)


def _export_view(con: duckdb.DuckDBPyConnection, catalog: Catalog, view: View,
                 target: Path) -> int:
    private_dir(target)
    count = con.execute(f"SELECT count(*) FROM {view.name}").fetchone()[0]  # type: ignore[index]
    options = "FORMAT parquet, COMPRESSION zstd"
    partitioned = bool(count) and partitionable(catalog, view)
    select = export_select(view, partitioned)
    if partitioned:
        options += f", PARTITION_BY ({PARTITION_COLUMN}), OVERWRITE true"
        to = _literal(str(target))
    else:  # empty or not run-scoped: one file, so a reader still finds the columns
        to = _literal(str(target / "data_0.parquet"))
    con.execute(f"COPY ({select.sql('duckdb')}) TO {to} ({options})")
    return int(count)


def export_select(view: View, partitioned: bool) -> exp.Select:
    """The rows of ``view`` as the export writes them (DuckDB SQL; the Spark build transpiles
    it): every column in a type Spark reads, and with ``partitioned`` the ``day`` its run
    started."""
    select = spark_safe_select(view)
    if partitioned:
        select = select.select(_day_expression(view), copy=False)
        if view.name != "runs":
            select = select.join(exp.to_table("runs").as_("run"),
                                 on=f"run.run_key = {view.name}.run_key", join_type="left",
                                 copy=False)
    return select


def spark_safe_select(view: View) -> exp.Select:
    """``SELECT`` of every column of ``view``, converting types Spark cannot read from Parquet."""
    columns = []
    for column in view.columns:
        ref = exp.column(column.name, table=view.name, quoted=True)
        cast = _SPARK_CASTS.get(column.type.upper())
        columns.append(exp.cast(ref, cast).as_(column.name, quoted=True) if cast else ref)
    return exp.select(*columns).from_(exp.to_table(view.name))


def partitionable(catalog: Catalog, view: View) -> bool:
    """Whether ``view``'s rows belong to runs, so the export partitions them by day."""
    return view.name == "runs" or view.name in catalog.run_children()


def _day_expression(view: View) -> exp.Expr:
    table = "runs" if view.name == "runs" else "run"
    day = exp.func("strftime", exp.column("started", table=table), exp.Literal.string("%Y-%m-%d"),
                   dialect="duckdb")
    return exp.func("coalesce", day, exp.Literal.string("unknown")).as_(PARTITION_COLUMN)


def _literal(text: str) -> str:
    return exp.Literal.string(text).sql("duckdb")


def parquet_view_paths(directory: str | Path) -> dict[str, Path]:
    """The exported view directories under ``directory`` by view name."""
    directory = Path(directory)
    return {p.name: p for p in sorted(directory.iterdir()) if p.is_dir()} if directory.is_dir() \
        else {}
