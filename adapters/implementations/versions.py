"""The version a harness's ``hello`` names: the library's own, then each other package of
the stack its behaviour depends on (``"1.2.24, langgraph-checkpoint-sqlite 3.1.2"``), so
every report, and the matrix README that quotes it, names each version it was made with."""

from __future__ import annotations

from importlib.metadata import version


def stack_version(library: str, *others: str) -> str:
    return ", ".join([version(library), *(f"{name} {version(name)}" for name in others)])
