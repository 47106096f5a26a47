"""Build hooks: package data, and the optional C extension for canonical JSON.

The top-level ``schema/`` and ``queries/`` folders stay at the top level (see
docs/ARCHITECTURE.md) as the one source of truth. Building the package copies them into
``recstore/_data/``, where :func:`recstore.resources.resource_dir` finds them with
:mod:`importlib.resources` in any install (wheel, ``pip install --target``); a checkout or
editable install reads the top-level folders directly.

``recstore._canonical`` (recstore/_canonical.c) is aioc's canonical JSON in C, built when a C
compiler and the Python headers are there. Without them the build prints one warning line and
goes on: recstore.canonical then runs its pure-Python path (``recstore.canonical.BACKEND``).
Everything else about the package is declared in pyproject.toml.
"""

import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
RESOURCES = ("schema", "queries")


class BuildPyWithResources(build_py):
    """``build_py`` that also copies the resource folders into the built package."""

    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's own folders
            return
        for name in RESOURCES:
            target = Path(self.build_lib, "recstore", "_data", name)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(HERE / name, target, ignore=shutil.ignore_patterns("__pycache__"))


class OptionalBuildExt(build_ext):
    """``build_ext`` that skips an extension it cannot compile (no compiler, no headers): the
    package works without it, on the pure-Python path."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any failure to build leaves the Python path
            _skipped(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _skipped(exc)


def _skipped(exc: Exception) -> None:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    print(f"warning: recstore's C extension not built ({first}); "
          "canonical JSON runs on the pure-Python path", file=sys.stderr)


CANONICAL = Extension("recstore._canonical", ["recstore/_canonical.c"], optional=True)

setup(
    cmdclass={"build_py": BuildPyWithResources, "build_ext": OptionalBuildExt},
    ext_modules=[CANONICAL],
)
