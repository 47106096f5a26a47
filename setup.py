"""Build hook: installs carry the top-level ``schema/`` and ``queries/`` folders as package data.

The folders stay at the top level (see docs/ARCHITECTURE.md) as the one source of truth. Building
the package copies them into ``recstore/_data/``, where :func:`recstore.resources.resource_dir`
finds them with :mod:`importlib.resources` in any install (wheel, ``pip install --target``); a
checkout or editable install reads the top-level folders directly. Everything else about the
package is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
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


setup(cmdclass={"build_py": BuildPyWithResources})
