"""Every command's --help prints its examples as a block (click's \\b marker): the Example(s):
heading starts its own line and each example command starts a line, never run into the prose."""

from __future__ import annotations

import re

import click
import pytest

from recstore.cli import cli
from tests.conftest import run_cli


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command's name path under ``group`` (subgroups walked)."""
    ctx = click.Context(group)
    paths: list[tuple[str, ...]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, (*prefix, name)))
    return paths


@pytest.mark.parametrize("path", _command_paths(cli), ids=" ".join)
def test_examples_print_as_a_block(tmp_path, path):
    result = run_cli(tmp_path / "s.duckdb", *path, "--help")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for number, line in enumerate(lines):
        assert not re.search(r"\S.*\bExamples?:", line), f"example run into prose: {line!r}"
        if re.match(r"\s*Examples?:\s*$", line):
            following = [x for x in lines[number + 1:] if x.strip()]
            assert following and following[0].strip().startswith("recstore"), lines[number:]
        if re.match(r"\s*Examples?:\s*\S", line):
            assert line.strip().split(":", 1)[1].strip().startswith("recstore"), line
