"""Fixtures that tests of more than one module here read."""

from __future__ import annotations

from pathlib import Path

import pytest
from kit import once_per_session
from sharded import whole_and_shards


@pytest.fixture(scope="session")
def shard_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sharded.whole_and_shards``, once per session: test_shard_merge merges the CLI's
    shards, test_pytest_plugin_scale_out mixes the plugin's shards with them."""
    return once_per_session(tmp_path_factory, "shards", whole_and_shards)
