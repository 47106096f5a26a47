"""Live ingest: records POSTed to the server, and folders it watches.

A POSTed body is spooled to an owner-only file and read by the same reader as a file on disk
(:class:`~recstore.formats.reader.SourceFile`: one JSON document or NDJSON, gzip, the record size
limit, rejects with their line), under a source URI that says how it arrived:
``post:/v1/runrecords?request=<id>&received=<UTC time>``. OTLP/HTTP bodies (JSON, or protobuf
turned into OTLP/JSON by the official ``opentelemetry-proto`` messages) go through the OTLP reader
as an OTLP file does. POSTs that arrive while a batch commits are stored together
(:mod:`recstore.serve.group`); each is answered with its own summary once its records are
committed, so a record is queryable as soon as its POST is answered.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recstore.errors import InputError
from recstore.files import owner_only_umask
from recstore.formats.reader import SourceFile, iter_sources
from recstore.serve.hold import ServedStore
from recstore.store import otlp_io

__all__ = ["FolderWatch", "ingest_body", "otlp_body"]

NDJSON_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/ndjson"})
PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})


def _arrival_uri(endpoint: str, request_id: str) -> str:
    received = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"post:{endpoint}?request={request_id}&received={received}"


def _spool(spool: Path, body: bytes) -> Path:
    with owner_only_umask():
        fd, name = tempfile.mkstemp(dir=spool, suffix=".body")
    with os.fdopen(fd, "wb") as out:
        out.write(body)
    return Path(name)


def ingest_body(store: ServedStore, spool: Path, body: bytes, content_type: str, gzipped: bool,
                request_id: str | None = None) -> dict:
    """Store a RunRecord POST (one JSON document, or NDJSON); returns the ingest summary with
    the request id and source URI."""
    request_id = request_id or uuid.uuid4().hex
    uri = _arrival_uri("/v1/runrecords", request_id)
    ndjson = content_type in NDJSON_TYPES or (
        content_type not in ("application/json",) and b"\n" in body.strip())
    path = _spool(spool, body)
    try:
        source = SourceFile(uri, path, "ndjson" if ndjson else "json",
                            "gzip" if gzipped else None)
        summary = store.ingest_posted([source])
    finally:
        path.unlink(missing_ok=True)
    return {"request_id": request_id, "source_uri": uri, **summary.to_dict()}


def otlp_body(store: ServedStore, spool: Path, body: bytes, content_type: str, gzipped: bool,
              request_id: str | None = None) -> dict:
    """Store an OTLP/HTTP ``ExportTraceServiceRequest`` (JSON or protobuf): one run per trace."""
    if gzipped:
        import gzip

        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as exc:
            raise InputError(f"body is not gzip: {exc}", source="/v1/traces") from None
    if content_type in PROTOBUF_TYPES:
        body = _protobuf_to_json(body)
    request_id = request_id or uuid.uuid4().hex
    uri = _arrival_uri("/v1/traces", request_id)
    path = _spool(spool, body)
    try:
        sources = otlp_io.otlp_sources([SourceFile(uri, path, "json", None)])
        summary = store.ingest_posted(sources)
    finally:
        path.unlink(missing_ok=True)
    return {"request_id": request_id, "source_uri": uri, **summary.to_dict()}


def _protobuf_to_json(body: bytes) -> bytes:
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError:
        raise InputError("OTLP protobuf needs `pip install 'recstore[serve]'`; send "
                         "application/json instead", source="/v1/traces") from None
    from google.protobuf.message import DecodeError

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InputError(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}",
                         source="/v1/traces") from None
    document = MessageToDict(request)
    _ids_to_hex(document)
    return json.dumps(document).encode()


def _ids_to_hex(value: Any) -> None:
    """protobuf's JSON mapping writes bytes as base64; OTLP/JSON writes trace and span ids as
    hex."""
    import base64

    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                value[key] = base64.b64decode(item).hex()
            else:
                _ids_to_hex(item)
    elif isinstance(value, list):
        for item in value:
            _ids_to_hex(item)


class FolderWatch:
    """Ingest new and grown files under ``folders`` every ``interval`` seconds (a thread).

    A file is ingested when its size and mtime stop changing between two polls; ingest is
    idempotent (a run seen again is a duplicate, a changed one a revision), so an appended NDJSON
    file is simply read again and only its new records are stored.
    """

    def __init__(self, store: Any, folders: list[str], interval: float = 1.0,
                 on_summary: Any = None):
        self.store = store
        self.folders = [str(Path(f)) for f in folders]
        self.interval = interval
        self.on_summary = on_summary or (lambda path, summary: None)
        self._seen: dict[str, tuple[int, int]] = {}
        self._pending: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> FolderWatch:
        self._thread = threading.Thread(target=self._run, name="recstore-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - a bad file must not stop the watch
                self.on_summary("(watch)", f"error: {exc}")
            self._stop.wait(self.interval)

    def poll(self) -> list[str]:
        """One pass: ingest the files that settled since the last pass; returns their paths."""
        ready = []
        try:
            sources = list(iter_sources(self.folders))
        except InputError:  # an empty folder matches nothing yet
            return []
        for source in sources:
            if source.path is None:
                continue
            try:
                stat = source.path.stat()
            except OSError:
                continue
            mark = (stat.st_size, stat.st_mtime_ns)
            key = str(source.path)
            if self._seen.get(key) == mark:
                continue
            if self._pending.get(key) == mark:
                ready.append(key)
            else:
                self._pending[key] = mark
        if ready:
            summary = self.store.ingest(ready, workers=0)
            for key in ready:
                self._seen[key] = self._pending.pop(key)
            self.on_summary(", ".join(ready), summary.line())
        return ready
