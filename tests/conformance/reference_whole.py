"""One whole run of the catalogue against the bundled reference, as a user runs it, that
several test modules read: test_reference_run judges it, test_approval_scenarios reads
its approval tables, test_server_sharing its shared harness and test_durability_trace
its traced pass (each ran the reference again for that: 17, 7 and 2 harness starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR

SEED = 11


@dataclass(frozen=True)
class WholeRun:
    """The finished ``retryproof run``, its --out directory, and what its working
    directory held after it."""

    done: subprocess.CompletedProcess[str]
    out: Path
    left_in_cwd: list[str]

    def report(self) -> dict[str, Any]:
        return json.loads((self.out / "report.json").read_text())


def whole_reference_run(root: Path) -> WholeRun:
    """``retryproof run --seed 11`` in a process of its own, started in an empty directory
    (``root/cwd``), its reports in ``root/out``. The profile is pinned: in CI the ambient
    one would be the larger CI budget. In a process, not in the test's: Hypothesis fixes
    its ``.hypothesis`` directory from the working directory it was imported in, so only a
    process of its own shows that the kit leaves nothing in the user's."""
    cwd, out = root / "cwd", root / "out"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "retryproof.conformance.cli", "run", "--seed", str(SEED), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, ENV_VAR: DEV},
    )
    return WholeRun(done, out, os.listdir(cwd))
