"""The ``--master`` and ``--conf`` options and the Spark session they ask for, apart from
``spark_cmds`` so that a command offering ``--engine spark`` (query, compare) imports only click
until it runs on Spark (issue 27.1)."""

from __future__ import annotations

from typing import Any

import click

from recstore.cli.terminal import name_values

master_option = click.option(
    "--master", metavar="URL",
    help="Spark master (local[4], spark://host:7077, yarn, k8s://...); default: the one "
    "spark-submit was given, else local[2].")
conf_option = click.option(
    "--conf", "conf", multiple=True, metavar="KEY=VALUE",
    help="A Spark setting for the session (repeatable), e.g. spark.executor.memory=8g.")


def session(master: str | None, conf: tuple[str, ...]) -> Any:
    """The Spark session ``--master`` and ``--conf`` ask for. The JVM's own log lines go to a
    file (:func:`~recstore.query.spark.jvm_log_path`), and to the terminal with ``--debug``."""
    from recstore.query.spark import jvm_log_path, spark_session

    ctx = click.get_current_context(silent=True)
    debug = bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("debug"))
    return spark_session(master, tuple(name_values(conf, "--conf", "KEY")),
                         None if debug else jvm_log_path())
