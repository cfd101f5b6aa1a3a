"""The FUZZ-MODEL replay file: its format tag and its file name.

A replay is written beside a report by the report writers and read back by
``retryproof replay``; both sides take the format from here, so neither needs the fuzz
engine to name or recognize a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FORMAT = "retryproof-fuzz-replay/1"


def file_name(document: Mapping[str, Any]) -> str:
    """The file name of a replay: the implementation and the seed, file-name-safe."""
    name = str((document.get("implementation") or {}).get("name") or "harness")
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in name)
    return f"fuzz-model-{safe}-seed{document['seed']}.json"
