"""One sharded run that the CLI's shard-and-merge tests and the pytest plugin's read:
a whole ``retryproof run`` and its two shards, against a runtime that fails (so a
merged verdict has something to get right)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from kit import REFERENCE, retryproof_here

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR

HARNESS = shlex.join([*REFERENCE, "--fault", "no-idempotency"])
#: Three and three over two shards, FUZZ-MODEL in both (each on half of its budget).
ONLY = "WT-CREATE,A2-RESPONSE-LOSS,CONFLICT-DIGEST,LEGACY-NO-ID,RESTART-REUSE,FUZZ-MODEL"
SEED = 9


def kit(*args: str) -> subprocess.CompletedProcess[str]:
    """``retryproof ARGS`` at the dev fuzz budget (in CI the ambient one would be larger),
    in this process (``retryproof_here``): the profile is named, so FUZZ-MODEL's settings
    are not the session's, and the test's phase limit bounds the run as a timeout did
    (a process of its own cost each run about 0.3 CPU-s more)."""
    return retryproof_here(*args, env={**os.environ, ENV_VAR: DEV})


def whole_and_shards(root: Path) -> Path:
    """``root/whole``, ``root/one``, ``root/two``: the whole run and shards 1/2 and 2/2,
    every report format."""
    common = ("--harness", HARNESS, "--only", ONLY, "--seed", str(SEED))
    done = {
        name: kit("run", *common, *extra, "--out", str(root / name))
        for name, extra in [
            ("whole", ()),
            ("one", ("--shard", "1/2")),
            ("two", ("--shard", "2/2")),
        ]
    }
    for name, result in done.items():
        assert result.returncode == 1, f"{name}: {result.stdout}{result.stderr}"
    return root
