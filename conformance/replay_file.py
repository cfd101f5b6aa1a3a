"""Replay files: their format tags and file names.

A replay is written beside a report by the report writers and read back by
``retryproof replay``; both sides take the format from here, so neither needs the fuzz
engine to name or recognize a file. FUZZ-MODEL's holds the steps of a shrunk history;
a scenario replay (CRASH-POINTS, KILL-NEMESIS) holds the seed and the environment
that make ``retryproof run --only ID --seed N`` take exactly the recorded path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from retryproof.conformance.file_names import file_stem

FORMAT = "retryproof-fuzz-replay/1"
SCENARIO_FORMAT = "retryproof-scenario-replay/1"
#: The key of a replay file's ``true`` when its run's target was the bundled reference
#: (no --harness, --python or --binding), so that ``replay`` without ``--harness`` replays
#: only such a file: a harness may forward the reference's hello, name and all. A file
#: from an older kit has none (``replay`` then compares the names).
BUNDLED_REFERENCE = "bundled_reference"


def scenario_replay(
    scenario_id: str, seed: int, implementation: Mapping[str, Any], env: Mapping[str, str], **facts: Any
) -> dict[str, Any]:
    """A scenario replay document: re-running ``scenario_id`` with ``seed`` and ``env``."""
    return {
        "format": SCENARIO_FORMAT,
        "scenario": scenario_id,
        "seed": seed,
        "implementation": dict(implementation),
        "env": dict(env),
        **facts,
    }


def file_name(document: Mapping[str, Any]) -> str:
    """The file name of a replay: the implementation and the seed, file-name-safe and
    bounded in bytes whatever the harness calls itself."""
    name = file_stem((document.get("implementation") or {}).get("name"), "harness")
    scenario = file_stem(str(document.get("scenario") or "fuzz-model").lower(), "scenario")
    return f"{scenario}-{name}-seed{int(document['seed'])}.json"


def is_file_name(name: str) -> bool:
    """Whether ``file_name`` could have given ``name``: a catalogue scenario's stem, then
    the implementation's, then the seed. The kit removes such a file from a report
    folder when a later run there did not write it, and no other."""
    from retryproof.conformance.catalogue import catalogue

    if not re.fullmatch(r"[A-Za-z0-9._-]+-seed-?[0-9]+\.json", name):
        return False
    return any(name.startswith(f"{file_stem(entry.id.lower(), 'scenario')}-") for entry in catalogue())
