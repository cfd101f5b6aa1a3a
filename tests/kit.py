"""The kit run as a user runs it, for the tests: ``retryproof`` in a subprocess.

Many tests certify a deliberately broken or independent harness and read its
report.json; they all go through ``certify`` so that how the kit is invoked, and
where its report is read from, is written once. pytest puts this folder on
``sys.path``, as it holds the top conftest.py and no ``__init__.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CLI = (sys.executable, "-m", "retryproof.conformance.cli")


def retryproof(*args: str, timeout: float = 120, **options: Any) -> subprocess.CompletedProcess[str]:
    """``retryproof ARGS``, its output captured as text."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **options)


def certify(
    out: Path,
    harness: str,
    *args: str,
    seed: int | str = 1,
    formats: str = "json",
    timeout: float = 120,
    **options: Any,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    """``retryproof run --harness HARNESS`` into ``out``: the finished process and the
    report.json it wrote (None when it wrote none)."""
    done = retryproof(
        "run", "--harness", harness, "--seed", str(seed), "--out", str(out), "--format", formats, *args,
        timeout=timeout, **options,
    )  # fmt: skip
    report = out / "report.json"
    return done, json.loads(report.read_text()) if report.exists() else None


def by_id(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A report's scenarios by id (none when there is no report)."""
    return {scenario["id"]: scenario for scenario in (report or {}).get("scenarios", [])}


def claims_while_writing(monkeypatch: Any, module: Any, directory: Path) -> list[bool]:
    """Watch ``module.write_atomically``: for each file written, whether ``directory``
    (the report directory) was still claimed by the writer at that moment."""
    from retryproof.conformance.errors import KitError
    from retryproof.conformance.writers.files import prepare_directory

    held: list[bool] = []
    write = module.write_atomically

    def probing(path: str, text: str) -> None:
        try:
            prepare_directory(str(directory)).release()
            held.append(False)
        except KitError:
            held.append(True)
        write(path, text)

    monkeypatch.setattr(module, "write_atomically", probing)
    return held
