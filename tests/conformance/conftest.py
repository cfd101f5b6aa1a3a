"""Fixtures that tests of more than one module here read."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from kit import certify, once_per_session
from reference_whole import WholeRun, whole_reference_run
from sharded import whole_and_shards

from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR


@pytest.fixture(scope="session")
def shard_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sharded.whole_and_shards``, once per session: test_shard_merge merges the CLI's
    shards, test_pytest_plugin_scale_out mixes the plugin's shards with them."""
    return once_per_session(tmp_path_factory, "shards", whole_and_shards)


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> WholeRun:
    """``reference_whole.whole_reference_run``, once per session: test_reference_run,
    test_approval_scenarios, test_server_sharing and test_durability_trace read it."""
    return once_per_session(tmp_path_factory, "reference-whole", whole_reference_run)


@pytest.fixture(scope="session")
def raw_request_compare(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any] | None]:
    """A4-CONCURRENT and FUZZ-MODEL, seed 2, against broken_runtimes.py's
    ``raw-request-compare`` (equal requests in another key order answered conflict), once
    per session: test_judging_holes reads its verdict, test_messages its FUZZ-MODEL reason.
    Seed 2's minimal history is one burst of eight (the race a Q4 answer could come from)
    of a Unicode variant (the hint test_messages must not give), found at the fifth
    history: 1.0-1.3 CPU-s where seed 3's took 2.6-3.1 (its shrinking, 2 CPUs, load 5-10).
    In this process, at the dev budget named here (not the session's)."""
    harness = f"{sys.executable} -S {Path(__file__).with_name('broken_runtimes.py')} raw-request-compare"
    only = ("--only", "A4-CONCURRENT,FUZZ-MODEL")
    env = {**os.environ, ENV_VAR: DEV}
    return once_per_session(
        tmp_path_factory,
        "raw-request-compare",
        lambda out: certify(out, harness, *only, seed=2, in_process=True, env=env),
    )
