"""``recstore serve``: the store as a local web app and JSON API, with live ingest."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from recstore.cli import cli


@cli.command("serve")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback requires a token.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (0: one the system picks; the URL line says which).")
@click.option("--watch", "watch", multiple=True, type=click.Path(file_okay=False),
              help="Folder to ingest new and appended files from (repeatable).")
@click.option("--token", envvar="RECSTORE_SERVE_TOKEN", default=None,
              help="Token every request must carry (generated off loopback; env "
                   "RECSTORE_SERVE_TOKEN).")
@click.option("--max-body", type=click.IntRange(min=1), default=64 * 2**20, show_default=True,
              help="Largest request body in bytes.")
@click.option("--workers", type=click.IntRange(min=0), default=None,
              help="Processes that prepare the records of large POSTs (default: one per core, "
                   "at most 4; 0: none, the server prepares them itself).")
@click.pass_context
def serve_cmd(ctx: click.Context, files: tuple[str, ...], host: str, port: int,
              watch: tuple[str, ...], token: str | None, max_body: int,
              workers: int | None) -> None:
    """Serve the store as a local web app and JSON API, with live ingest (docs/serve.md).

    With FILES (one or two RunRecord files), serve a temporary store holding only them.
    """
    from recstore.serve.app import ServeOptions, serve

    db = Path(ctx.obj["db"])
    temp = None
    if files:
        temp = tempfile.TemporaryDirectory(prefix="recstore-view-")
        db = Path(temp.name) / "view.duckdb"
        from recstore.store import Store

        Store(db).ingest(list(files), workers=0)
    options = ServeOptions(db=db, host=host, port=port, token=token, watch=list(watch),
                           max_body=max_body, workers=workers)
    try:
        serve(options, lambda line: click.echo(line, err=False))
    finally:
        if temp is not None:
            temp.cleanup()
