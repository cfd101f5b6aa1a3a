"""Fixtures that start the reference harness as real processes on one state directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from reference_client import Harness


@pytest.fixture
def state_dir(tmp_path):
    directory = tmp_path / "state"
    directory.mkdir()
    return directory


@pytest.fixture
def start(state_dir) -> Iterator[Callable[..., Harness]]:
    """``start(failpoints=None, *options)``: a new harness on the test's state
    directory (the same one every time, as across restarts); all are killed at the end."""
    started: list[Harness] = []

    def start_harness(failpoints: dict[str, str] | None = None, *options: str) -> Harness:
        harness = Harness(state_dir, failpoints, *options)
        started.append(harness)
        return harness

    yield start_harness
    for harness in started:
        harness.close()
