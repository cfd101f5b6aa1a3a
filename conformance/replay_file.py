"""The FUZZ-MODEL replay file: its format tag and its file name.

A replay is written beside a report by the report writers and read back by
``retryproof replay``; both sides take the format from here, so neither needs the fuzz
engine to name or recognize a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retryproof.conformance.file_names import file_stem

FORMAT = "retryproof-fuzz-replay/1"


def file_name(document: Mapping[str, Any]) -> str:
    """The file name of a replay: the implementation and the seed, file-name-safe and
    bounded in bytes whatever the harness calls itself."""
    name = file_stem((document.get("implementation") or {}).get("name"), "harness")
    return f"fuzz-model-{name}-seed{int(document['seed'])}.json"
