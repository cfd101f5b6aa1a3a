"""The checkout's sources as a fresh clone holds them, for the tests that build or
install the kit from its sources (tests/packaging, tests/adapters): pip and setuptools
write into the tree they build (``build/``, ``*.egg-info``), so they build a copy and
the checkout is left as it was, and nothing a former build left there reaches the
result."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_of_the_sources(root: Path) -> None:
    """The checkout's sources in ``root``, without environments, node_modules, servers'
    data or reports. The four folders are pyproject.toml's package-dir; README.md is its
    readme, LICENSE a wheel's licence file."""
    ignore = shutil.ignore_patterns(".venv", "node_modules", ".run", "__pycache__", "*.egg-info")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, root / name)
    for name in ("spec", "conformance", "adapters", "reference_impl"):
        shutil.copytree(ROOT / name, root / name, ignore=ignore)
