"""Build hook: the wheel carries the charts and the custom resource schemas as package data.

``charts/`` and ``schemas/`` are copied from the source tree (a checkout or its sdist, see
MANIFEST.in) into ``sunk/_data/`` of the build at build time, so git holds one copy and the
installed ``sunkctl`` finds them (``sunk.resources``). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = ("charts", "schemas")


class BuildWithCharts(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout itself
        target = Path(self.build_lib) / "sunk" / "_data"
        for name in BUNDLED:
            source = ROOT / name
            if not (source / ".").is_dir():
                raise SystemExit(f"{source}: missing; build the wheel from a checkout or an sdist")
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildWithCharts})
