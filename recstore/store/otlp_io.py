"""OTLP/JSON trace files in the store: GenAI traces in as runs, runs out as traces.

Ingest: OTLP files are recognised by content (a document that starts with ``resourceSpans``) or
taken as such with ``format="otlp"``. Every file is read before anything is stored so that a
trace whose spans sit in several files (a collector rotating its output) is one run; the run is
credited to the file where its first span appears. Each trace becomes an aioc-shaped record
(:func:`recstore.formats.otlp.to_run_record`) handed to the ordinary record path with format
``otlp`` (run key ``otlp:<runId>``; the runId is the trace id, or the aioc run id a recstore
export carries). Unreadable documents and traces without GenAI spans are rejects, kept whole.

Export: :func:`export_otlp` writes one OTLP/JSON file per run (one line, so ``cat`` of several
files is the JSON-lines form collectors read), owner-only.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from recstore.errors import OtlpError
from recstore.files import private_dir, write_private_text
from recstore.formats.otlp import Span, Trace, iter_spans, to_otlp, to_run_record
from recstore.formats.reader import RawInput, SourceFile
from recstore.jsonout import dumps_compact

if TYPE_CHECKING:
    from recstore.store.store import Store

__all__ = ["FORMAT", "OtlpExport", "export_otlp", "is_otlp_file", "otlp_sources", "split_sources"]

FORMAT = "otlp"
_SNIFF_BYTES = 4096
_OTLP_START = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"resourceSpans"\s*:')
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_otlp_file(path: Path, compression: str | None) -> bool:
    """Whether a file's first JSON document starts with ``resourceSpans`` (an OTLP export)."""
    try:
        with open(path, "rb") as raw:
            head = gzip.GzipFile(fileobj=raw).read(_SNIFF_BYTES) if compression == "gzip" \
                else raw.read(_SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False  # the ordinary reader reports the problem
    return bool(_OTLP_START.match(head))


def split_sources(
    sources: Iterable[SourceFile], fmt: str | None
) -> tuple[list[SourceFile], list[SourceFile]]:
    """Sources -> (OTLP files, the rest): all of them with ``fmt="otlp"``, none with another
    format, else the files whose content looks like an OTLP export (stdin needs ``otlp``)."""
    otlp: list[SourceFile] = []
    rest: list[SourceFile] = []
    for source in sources:
        if source.problem is not None:  # a walk found a file never to open (FIFO, dangling link)
            rest.append(source)
        elif fmt == FORMAT or (
            fmt is None and source.path is not None
            and is_otlp_file(source.path, source.compression)
        ):
            otlp.append(source)
        else:
            rest.append(source)
    return otlp, rest


@dataclass
class OtlpSource:
    """One OTLP file as the batch writer reads it: its unreadable documents and the records of
    the traces that start in it (``record_format`` makes their run keys ``otlp:``)."""

    file: SourceFile
    problems: list[RawInput] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    record_format = FORMAT
    format = FORMAT

    @property
    def uri(self) -> str:
        return self.file.uri

    @property
    def compression(self) -> str | None:
        return self.file.compression

    @property
    def sha256(self) -> str | None:
        return self.file.sha256

    @property
    def size_bytes(self) -> int | None:
        return self.file.size_bytes

    def inputs(self) -> Iterator[RawInput]:
        yield from self.problems
        for trace in self.traces:
            try:
                record = to_run_record(trace)
            except OtlpError as exc:
                yield RawInput(self.uri, trace.line, None, trace.to_request(), error=str(exc))
                continue
            yield RawInput(self.uri, trace.line, None, record)


def otlp_sources(files: Iterable[SourceFile]) -> list[OtlpSource]:
    """Read every OTLP file and group the spans of all of them by trace."""
    sources: list[OtlpSource] = []
    traces: dict[str, Trace] = {}
    order = 0
    for file in files:
        source = OtlpSource(file)
        sources.append(source)
        for raw in file.inputs():
            if raw.error is not None:
                source.problems.append(raw)
                continue
            try:
                spans: list[Span] = list(iter_spans(raw.value, raw.line, order))
            except OtlpError as exc:
                source.problems.append(
                    RawInput(raw.source_uri, raw.line, raw.text, raw.value, error=str(exc))
                )
                continue
            order += len(spans)
            for span in spans:
                trace = traces.get(span.trace_id)
                if trace is None:
                    trace = traces[span.trace_id] = Trace(span.trace_id, [])
                    source.traces.append(trace)
                trace.spans.append(span)
    return sources


@dataclass
class OtlpExport:
    """What :func:`export_otlp` wrote: one file per run."""

    directory: Path
    content: str
    files: dict[str, Path] = field(default_factory=dict)  # run key -> file


def _file_name(run_key: str, trace_id: str) -> str:
    return f"{_UNSAFE.sub('_', run_key)[:80]}.{trace_id[:8]}.otlp.json"


def export_otlp(
    store: Store, directory: str | Path, run_keys: list[str] | None = None,
    content: str = "metadata",
) -> OtlpExport:
    """Write the current revision of each run (all runs without ``run_keys``) as an OTLP/JSON
    trace file under ``directory`` (created owner-only; files ``0600``). Lineage parents become
    span links. ``content`` is the policy of :func:`recstore.formats.otlp.to_otlp`."""
    from recstore import __version__

    if run_keys is None:
        with store.reader() as con:
            run_keys = [k for (k,) in con.execute(
                "SELECT run_key FROM runs ORDER BY first_seq").fetchall()]
    with store.reader() as con:
        parents: dict[str, list[tuple[str, str]]] = {}
        for child, parent, relation in con.execute(
            "SELECT child_run_key, parent_run_key, relation FROM lineage "
            "WHERE parent_run_key IS NOT NULL AND list_contains(?, child_run_key) "
            "ORDER BY child_run_key, parent_run_key, relation",
            [run_keys],
        ).fetchall():
            parents.setdefault(child, []).append((parent, relation))
    out = OtlpExport(Path(directory), content)
    private_dir(out.directory)
    for run in store.load_runs(run_keys):
        request = to_otlp(run.record, run.run_key, content=content,
                          links=parents.get(run.run_key, ()), version=__version__)
        trace_id = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        path = out.directory / _file_name(run.run_key, trace_id)
        write_private_text(path, dumps_compact(request) + "\n", sync=False)  # one of many
        out.files[run.run_key] = path
    return out

