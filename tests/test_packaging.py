"""An install that is not a checkout or a venv works: ``pip install --target DIR`` (from the source
tree and from the source distribution) carries schema/ and queries/ as package data identical to
the top-level folders, and recstore runs from DIR alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from .conftest import AIOC_FIXTURES, REPO_ROOT

RESOURCES = ("schema", "queries")
# What a build reads: everything but tests, caches and local state.
NOT_BUILT = shutil.ignore_patterns(".git", ".venv", "tests", "build", "dist", "*.egg-info",
                                   "__pycache__", ".*_cache", ".hypothesis", "*.duckdb*", "_data")


def _run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd,
                            env=env, timeout=600)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module", params=["source tree", "sdist"])
def target(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip install --target`` of a copy of the repository (so the build leaves nothing in the
    checkout), offline: no dependencies, no build isolation."""
    work = tmp_path_factory.mktemp("packaging")
    source = work / "src"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_BUILT)
    if request.param == "sdist":
        built = _run(sys.executable, "-c", "from setuptools.build_meta import build_sdist; "
                     "print(build_sdist('dist'))", cwd=source).stdout.split()[-1]
        source = source / "dist" / built
    target = work / "target"
    _run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", target, source, cwd=work)
    return target


def _isolated(target: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -S ARGS`` with only DIR and the dependencies on the path: no site processing, so
    the test venv's own (editable) recstore cannot be found."""
    paths = sysconfig.get_paths()
    dependencies = dict.fromkeys([paths["purelib"], paths["platlib"]])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *dependencies])}
    return _run(sys.executable, "-S", *args, cwd=cwd, env=env)


@pytest.mark.slow
def test_installed_resources_are_the_top_level_folders(target: Path, tmp_path: Path):
    for name in RESOURCES:
        installed = _files(target / "recstore" / "_data" / name)
        assert installed, name
        assert installed == _files(REPO_ROOT / name), f"installed {name}/ differs from {name}/"
    found = _isolated(target, "-c", "import recstore.resources as r; "
                      "print(r.resource_dir('schema')); print(r.resource_dir('queries'))",
                      cwd=tmp_path)
    assert found.stdout.split() == [str(target / "recstore" / "_data" / n) for n in RESOURCES]


@pytest.mark.slow
def test_the_install_carries_the_license(target: Path):
    (dist_info,) = target.glob("recstore-*.dist-info")
    assert (dist_info / "licenses" / "LICENSE").read_bytes() == (REPO_ROOT / "LICENSE").read_bytes()
    assert "License-Expression: Apache-2.0" in (dist_info / "METADATA").read_text()


@pytest.mark.slow
def test_recstore_runs_from_the_target_directory(target: Path, tmp_path: Path):
    version = _isolated(target, "-m", "recstore", "--version", cwd=tmp_path)
    assert version.stdout.strip() == "recstore, version 0.1.0"
    db = tmp_path / "runs.duckdb"
    _isolated(target, "-m", "recstore", "--db", db, "ingest", AIOC_FIXTURES / "simple-run.json",
              cwd=tmp_path)  # creates the store from schema/
    runs = _isolated(target, "-m", "recstore", "--db", db, "query",
                     "SELECT count(*) AS n FROM runs", "--format", "csv", cwd=tmp_path)
    assert runs.stdout.split() == ["n", "1"]
    saved = _isolated(target, "-m", "recstore", "queries", cwd=tmp_path)  # reads queries/
    assert "slowest-runs" in saved.stdout


def test_license_file_is_the_license_pyproject_declares():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("Copyright 2026 recstore authors\n")
    heading = [line.strip() for line in text.splitlines()[2:4]]
    assert heading == ["Apache License", "Version 2.0, January 2004"]
    assert text.rstrip().endswith("limitations under the License.")
    assert "9. Accepting Warranty or Additional Liability." in text  # the full terms, not a notice


CANONICAL_PROBE = ("import recstore.canonical as c; "
                   "print(c.BACKEND, c.canonical_json({'b': 1.0, '10': -0.0, '9': [1e21]}))")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler on this machine")
def test_an_install_with_a_compiler_runs_the_c_extension(target: Path, tmp_path: Path):
    assert list((target / "recstore").glob("_canonical*.so"))
    probe = _isolated(target, "-c", CANONICAL_PROBE, cwd=tmp_path)
    assert probe.stdout.split() == ["c", '{"9":[1e+21],"10":0,"b":1}']


@pytest.mark.slow
def test_an_install_without_a_compiler_runs_the_python_path(tmp_path: Path):
    source = tmp_path / "src"
    shutil.copytree(REPO_ROOT, source, ignore=NOT_BUILT)
    target = tmp_path / "target"
    env = {**os.environ, "CC": str(tmp_path / "no-such-compiler")}
    built = _run(sys.executable, "-m", "pip", "install", "-v", "--no-deps",
                 "--no-build-isolation", "--target", target, source, cwd=tmp_path, env=env)
    warnings = [line for line in built.stdout.splitlines() + built.stderr.splitlines()
                if "C extension not built" in line]
    assert len(warnings) == 1 and "pure-Python path" in warnings[0]
    assert not list((target / "recstore").glob("_canonical*"))
    probe = _isolated(target, "-c", CANONICAL_PROBE, cwd=tmp_path)
    assert probe.stdout.split() == ["python", '{"9":[1e+21],"10":0,"b":1}']
