"""``recstore.files.write_output`` as properties: whatever fails while an output is written, the
target holds its old bytes or the new ones, never a mix, and no temporary file is left; and a
store is recognised through any chain of symbolic and hard links (tests/test_hostile_files.py
runs the same through the CLI)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.files import owned_file, protect_store_files, write_output


class _Stop(Exception):
    pass


@settings(max_examples=60, deadline=None)
@given(old=st.binary(max_size=2000) | st.none(), new=st.lists(st.binary(max_size=500), max_size=8),
       fail_at=st.integers(min_value=0, max_value=9))
def test_an_output_is_the_old_file_or_the_new_one_and_leaves_nothing_behind(old, new, fail_at):
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "out.bin"
        if old is not None:
            target.write_bytes(old)

        def write(fh) -> int:
            for i, chunk in enumerate(new):
                if i == fail_at:
                    raise _Stop
                fh.write(chunk)
            return len(new)

        try:
            write_output(target, write, mode="wb")
        except _Stop:
            assert (target.read_bytes() if target.exists() else None) == old
        else:
            assert target.read_bytes() == b"".join(new)
            assert target.stat().st_mode & 0o777 == 0o600
        assert sorted(os.listdir(folder)) == (["out.bin"] if target.exists() else [])


@settings(max_examples=40, deadline=None)
@given(chain=st.lists(st.sampled_from(["symlink", "hardlink"]), min_size=1, max_size=5))
def test_a_store_is_recognised_through_any_chain_of_links(chain):
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "s.duckdb"
        db.write_bytes(b"a store")
        protect_store_files(db)
        alias = db
        for i, kind in enumerate(chain):
            link = Path(folder) / f"alias-{i}"
            os.symlink(alias, link) if kind == "symlink" else os.link(alias, link)
            alias = link
        assert owned_file(alias) is not None
        with pytest.raises(InputError, match="is the store"):
            write_output(alias, lambda fh: fh.write("x"))
        assert db.read_bytes() == b"a store"
        assert owned_file(Path(folder) / "other.csv") is None
