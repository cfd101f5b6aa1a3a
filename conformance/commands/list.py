"""``retryproof list``: the scenario catalogue, and which scenarios this kit implements."""

from __future__ import annotations

from tabulate import tabulate

from retryproof.conformance.catalogue import catalogue
from retryproof.conformance.scenarios import registry


def main(args) -> int:
    implemented = registry()
    rows = [
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
    print(
        tabulate(rows, headers=("id", "level", "checks", "answers", "needs", "implemented", "title"), tablefmt="github")
    )
    return 0
