"""The paths a command sent to a server names are made absolute from the real commands' click
parameters (``recstore.serve.client.absolute_paths``), whatever form the option takes."""

from __future__ import annotations

import os

import click
from hypothesis import given
from hypothesis import strategies as st

from recstore.cli import cli
from recstore.serve.client import absolute_paths

NAMES = st.text(st.sampled_from("abc-_.x/"), min_size=1, max_size=12).filter(
    lambda p: not p.startswith(("-", "/")) and p not in (".", ".."))


def command(name: str) -> click.Command:
    ctx = click.Context(cli)
    return cli.get_command(ctx, name)


@given(path=NAMES, form=st.sampled_from([("-o", " "), ("-o", ""), ("--output", "="),
                                          ("--output", " "), ("-qo", " "), ("-qo", "")]),
       text=st.text(st.sampled_from("ab =/"), min_size=1, max_size=8))
def test_an_output_option_becomes_absolute_in_every_form(path, form, text):
    option, sep = form

    def written(value: str) -> list[str]:
        return [option, value] if sep == " " else [option + sep + value]

    sent = absolute_paths(command("query"), [text, *written(path), "--format", "csv"])
    assert sent == [text, *written(os.path.abspath(path)), "--format", "csv"]


def test_a_subcommand_and_arguments_that_name_files():
    sent = absolute_paths(command("sweep"), ["report", "nightly", "-o", "out", "--json"])
    assert sent == ["report", "nightly", "-o", os.path.abspath("out"), "--json"]
    sent = absolute_paths(command("ingest"), ["a.json", "--tag", "k=v", "dir/*.ndjson"])
    assert sent == [os.path.abspath("a.json"), "--tag", "k=v", os.path.abspath("dir/*.ndjson")]
    assert absolute_paths(command("export"), ["--otlp", "t", "status = 'failed'"]) == [
        "--otlp", os.path.abspath("t"), "status = 'failed'"]  # with --otlp TARGET is a filter
    assert absolute_paths(command("export"), ["views"]) == [os.path.abspath("views")]
    assert absolute_paths(command("compare"), ["aioc:run-1", "aioc:run-2"]) == [
        "aioc:run-1", "aioc:run-2"]  # run refs, not files here
