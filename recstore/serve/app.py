"""``recstore serve``: build the ASGI app and run it with uvicorn.

One process owns the store (:class:`~recstore.serve.hold.ServedStore`), answers the pages
(:mod:`~recstore.serve.pages`), the JSON API and the live-ingest endpoints
(:mod:`~recstore.serve.api`), behind :class:`~recstore.serve.security.Guard`. While it serves,
``<db>.serve.json`` (owner-only: the URL and the token) tells other recstore commands where it
is; it is removed when the server stops.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from recstore import __version__
from recstore.errors import InputError, NotFoundError, RecstoreError
from recstore.files import owner_only_umask
from recstore.serve.api import api_routes, json_response
from recstore.serve.hold import ServedStore
from recstore.serve.pages import page_routes
from recstore.serve.security import DEFAULT_MAX_BODY, LOOPBACK_NAMES, Guard

__all__ = ["ServeOptions", "build_app", "serve", "serve_file_path"]


@dataclass
class ServeOptions:
    """How ``recstore serve`` runs: where, with which token, body limit, watched folders."""

    db: Path
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    watch: list[str] = field(default_factory=list)
    max_body: int = DEFAULT_MAX_BODY
    workers: int | None = None  # processes preparing large POSTs (None: one per core, max 4)
    #: What a shell must send to have a command run (``POST /api/cli``): it is only in the
    #: owner-only server file, so only the store owner's shells can make the server read and
    #: write files as its user, also on loopback without --token.
    cli_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def __post_init__(self) -> None:
        if self.host not in LOOPBACK_NAMES and not self.token:
            self.token = secrets.token_urlsafe(24)  # off loopback a token is always required


def serve_file_path(db: Path) -> Path:
    """The owner-only file next to a served store that names the server: ``<db>.serve.json``."""
    return db.with_name(db.name + ".serve.json")


async def _error(request: Request, exc: Exception) -> Any:
    status = 404 if isinstance(exc, NotFoundError) else 400
    if not isinstance(exc, RecstoreError):
        status = 500
    return json_response({"error": str(exc) if status != 500 else "internal error"}, status)


def build_app(store: ServedStore, options: ServeOptions, spool: Path,
              port_ref: Callable[[], int]) -> Any:
    """The Starlette app behind its guard."""
    static = Path(__file__).resolve().parent.parent / "templates" / "static"
    app = Starlette(
        routes=[*api_routes(), Mount("/static", StaticFiles(directory=static)), *page_routes()],
        exception_handlers={RecstoreError: _error, ValueError: _error, Exception: _error},
    )
    app.state.store = store
    app.state.spool = str(spool)
    app.state.version = __version__
    app.state.cli_key = options.cli_key
    return Guard(app, host=options.host, port_ref=port_ref, token=options.token,
                 max_body=options.max_body)


@contextmanager
def _serve_file(db: Path, url: str, options: ServeOptions):
    path = serve_file_path(db)
    with owner_only_umask():
        path.write_text(json.dumps({"url": url, "token": options.token, "pid": os.getpid(),
                                    "cli_key": options.cli_key}))
    os.chmod(path, 0o600)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def serve(options: ServeOptions, announce: Callable[[str], None]) -> None:
    """Serve ``options.db`` until Ctrl-C (or SIGTERM); ``announce`` hears the URL line."""
    if serve_file_path(options.db).exists() and _alive(serve_file_path(options.db)):
        raise InputError(f"{options.db} is already served (see {serve_file_path(options.db)})")
    from recstore.process import no_more_worker_pools, worker_pool
    from recstore.store.prepare import WORKER_BYTES, default_workers

    workers = default_workers(WORKER_BYTES) if options.workers is None else options.workers
    # uvicorn stops on SIGTERM, then raises it again with the handler it found: with Python's
    # default one the process died there, leaving the serve file and the WAL (docker stop,
    # systemctl stop); this one unwinds like Ctrl-C does, so the store is closed and the file gone
    before = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with worker_pool(workers) as pool:  # forked before this process opens DuckDB
            no_more_worker_pools()  # commands run for other shells (replay --workers) fork none
            _serve(options, announce, ServedStore(options.db, pool=pool, workers=workers))
    finally:
        signal.signal(signal.SIGTERM, before)  # a library caller's own handler again


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _serve(options: ServeOptions, announce: Callable[[str], None], store: ServedStore) -> None:
    import uvicorn

    from recstore.serve.ingest import FolderWatch

    with store.writer():  # take the store now: create it, or say at once that it is busy
        pass
    spool = Path(tempfile.mkdtemp(prefix="recstore-serve-"))
    config = uvicorn.Config(None, host=options.host, port=options.port, log_level="warning",
                            access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    bound = {"port": options.port}
    config.app = build_app(store, options, spool, lambda: bound["port"])
    config.load()
    watch = None
    try:
        server_socket = config.bind_socket()
        bound["port"] = server_socket.getsockname()[1]
        host = f"[{options.host}]" if ":" in options.host else options.host
        url = f"http://{host}:{bound['port']}/"
        with _serve_file(options.db, url, options):
            shown = url + (f"?token={options.token}" if options.token else "")
            announce(f"recstore: serving {options.db} at {shown} (Ctrl-C stops)")
            if options.watch:
                watch = FolderWatch(store, options.watch,
                                    on_summary=lambda p, s: announce(f"recstore: {p}: {s}"))
                watch.start()
            server.run(sockets=[server_socket])
    finally:
        if watch is not None:
            watch.stop()
        store.close()
        shutil.rmtree(spool, ignore_errors=True)


def _alive(path: Path) -> bool:
    try:
        pid = int(json.loads(path.read_text())["pid"])
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False
