"""Each bundled implementation's README names every version its ``setup`` pins (a
``NAME_VERSION=x`` line, or a dependency of its package.json), so a reader of the
README, whose failures are traced to that version's source, knows what was certified."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retryproof.conformance.commands.matrix import discover

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^\s*([A-Z][A-Z0-9_]*)_VERSION=(\S+)", re.M)


def pins(folder: Path) -> dict[str, str]:
    found = {name.lower(): value for name, value in PIN.findall((folder / "setup").read_text(encoding="utf-8"))}
    package = folder / "package.json"
    if package.is_file():
        found.update(json.loads(package.read_text(encoding="utf-8")).get("dependencies", {}))
    return found


@pytest.mark.parametrize("implementation", discover(ROOT), ids=lambda implementation: implementation.name)
def test_the_readme_names_every_pinned_version(implementation):
    found = pins(implementation.folder)
    assert found, f"{implementation.name}: its setup pins nothing this test can read"
    readme = (implementation.folder / "README.md").read_text(encoding="utf-8")
    unnamed = {
        name: value
        for name, value in found.items()
        if not re.search(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\w)", readme)
    }
    assert not unnamed, f"{implementation.name}/README.md does not name {unnamed}"
