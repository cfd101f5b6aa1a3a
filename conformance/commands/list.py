"""``retryproof list``: the scenario catalogue, and which scenarios this kit implements.

It answers from the spec and the scenario modules' source, loading neither the
scenario modules (with them the runner, the adapters and the validators) nor tabulate
(with it ``importlib.metadata``, for tabulate's own version): each of the two was a
third of this command's start. ``tests/conformance/test_cli_startup.py`` holds both
answers equal to what the modules and tabulate would give.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Sequence

from retryproof.conformance.catalogue import catalogue

SCENARIOS = "retryproof.conformance.scenarios"
HEADERS = ("id", "level", "checks", "answers", "needs", "implemented", "title")
# A scenario is bound by a decorator at the start of a line (scenarios/__init__.py).
_BOUND = re.compile(r'^@scenario\(\s*"([^"]+)"', re.MULTILINE)


def implemented_ids() -> set[str]:
    """The ids the ``@scenario("ID")`` decorators of the scenario modules bind, read
    as text from the modules ``scenarios.registry()`` imports (every one but the
    package's own ``__init__``, whose docstring shows the decorator)."""
    spec = importlib.util.find_spec(SCENARIOS)  # finds the package without running it
    assert spec is not None and spec.submodule_search_locations is not None
    ids: set[str] = set()
    for folder in spec.submodule_search_locations:
        for name in os.listdir(folder):
            if name.endswith(".py") and name != "__init__.py":
                with open(os.path.join(folder, name), encoding="utf-8") as source:
                    ids.update(_BOUND.findall(source.read()))
    return ids


def github_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Text cells as tabulate's ``github`` format lays them out: left-aligned, each
    column two wider than its header at least."""
    widths = [max(len(header) + 2, *(len(row[index]) for row in rows)) for index, header in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    return "\n".join([line(headers), rule, *map(line, rows)])


def rows() -> list[tuple[str, ...]]:
    implemented = implemented_ids()
    return [
        (
            item.id,
            item.level,
            ", ".join(item.checks),
            ", ".join(item.checklist),
            ", ".join(item.needs),
            "yes" if item.id in implemented else "NO",
            item.title,
        )
        for item in catalogue()
    ]


def main(args) -> int:
    print(github_table(HEADERS, rows()))
    return 0
